package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// Exact strings of design §3, spelled out here rather than taken from domain so that a changed
// constant fails these tests.
const (
	optInAnnotation    = "eno.azure.io/tombstone-recovery"
	decisionAnnotation = "eno.azure.io/tombstone-recovery-decision"
	secretType         = "eno.azure.io/inventory-snapshot"
	managedByLabel     = "app.kubernetes.io/managed-by"
	managedByValue     = "eno-tombstone-recovery"
	lineageLabel       = "eno.azure.io/inventory-lineage"
	dataKey            = "inventory.json"
	readinessGroup     = "eno.azure.io/readiness-group"
	deletionGroup      = "eno.azure.io/deletion-group"
)

var (
	compositionGVR = schema.GroupVersionResource{Group: "eno.azure.io", Version: "v1", Resource: "compositions"}
	sliceGVR       = schema.GroupVersionResource{Group: "eno.azure.io", Version: "v1", Resource: "resourceslices"}
)

// object renders one manifest as Eno's synthesizer stores it in a slice: a JSON string.
func object(apiVersion, kind, namespace, name string, labels, annotations map[string]string, extra map[string]any) string {
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	if labels != nil {
		meta["labels"] = labels
	}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	obj := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
	for k, v := range extra {
		obj[k] = v
	}
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// deployment is a Deployment manifest the API server accepts, so that publish can apply it
// downstream: a selector and a pod template matching it.
func deployment(namespace, name string, labels, annotations map[string]string) string {
	pod := map[string]string{"app.kubernetes.io/name": name}
	return object("apps/v1", "Deployment", namespace, name, labels, annotations, map[string]any{"spec": map[string]any{
		"replicas": 3,
		"selector": map[string]any{"matchLabels": pod},
		"template": map[string]any{
			"metadata": map[string]any{"labels": pod},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.example/app:1"}}},
		},
	}})
}

// service is a Service manifest the API server accepts: one port.
func service(namespace, name string, labels map[string]string) string {
	return object("v1", "Service", namespace, name, labels, nil,
		map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": 80}}}})
}

// patchOf is an Eno Patch of a resource Eno does not own.
func patchOf(targetAPIVersion, targetKind, namespace, name string) string {
	return object("eno.azure.io/v1", "Patch", namespace, name, nil, nil, map[string]any{
		"patch": map[string]any{"apiVersion": targetAPIVersion, "kind": targetKind, "ops": []any{}},
	})
}

type resource struct {
	manifest string
	deleted  bool
}

// synthesis is one synthesis as Eno publishes it: slices, then status.currentSynthesis.
type synthesis struct {
	uuid        string
	synthesized time.Time
	slices      [][]resource
	// extraSlices are named by the synthesis besides its own (a slice someone else created).
	extraSlices []string
	// previous is written as status.previousSynthesis, as Eno keeps the synthesis it replaced.
	previous *domain.Synthesis
}

func newSynthesis(synthesized time.Time, slices ...[]resource) synthesis {
	return synthesis{uuid: string(uuid.NewUUID()), synthesized: synthesized.UTC().Truncate(time.Second), slices: slices}
}

// produced lists the manifests the synthesis produces: its tombstones are not among them.
func (s synthesis) produced() []string {
	var out []string
	for _, rs := range s.slices {
		for _, r := range rs {
			if !r.deleted {
				out = append(out, r.manifest)
			}
		}
	}
	return out
}

func (s synthesis) sliceName(comp string, i int) string {
	return comp + "-" + s.uuid[:8] + "-" + strconv.Itoa(i)
}

// createComposition creates an opted-in Composition with no status yet.
func createComposition(t *testing.T, c kubetest.Clients, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	created, err := kubetest.CreateComposition(testContext(t), c.Dynamic, domain.Composition{
		Namespace: namespace, Name: name, Annotations: map[string]string{optInAnnotation: "enabled"},
	})
	require.NoError(t, err)
	return created
}

// publish creates the synthesis's slices, then sets status.currentSynthesis through the
// status subresource, as Eno does. The objects the synthesis produces are applied downstream
// first (the test API server is also the downstream cluster), as eno-reconciler would have
// applied them before the synthesis is Ready and its history is written (design §6.3 reads them).
func publish(t *testing.T, c kubetest.Clients, comp *unstructured.Unstructured, syn synthesis) *unstructured.Unstructured {
	t.Helper()
	ctx := testContext(t)
	ns, name := comp.GetNamespace(), comp.GetName()
	require.NoError(t, env.AdminClients(t).ApplyDownstream(ctx, syn.produced()...))
	client := c.Dynamic.Resource(compositionGVR).Namespace(ns)
	// Stock Eno stamps a slice with the synthesis current when its executor writes it: "" on a
	// first synthesis, the previous UUID after that (design §2).
	before, err := client.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	stamp, _, _ := unstructured.NestedString(before.Object, "status", "currentSynthesis", "uuid")
	status := domain.Synthesis{UUID: syn.uuid, Synthesized: syn.synthesized, Ready: true}
	for i, resources := range syn.slices {
		slice := domain.ResourceSlice{Namespace: ns, Name: syn.sliceName(name, i), SynthesisUUID: stamp}
		for _, r := range resources {
			slice.Resources = append(slice.Resources, domain.SliceResource{Manifest: r.manifest, Deleted: r.deleted})
		}
		_, err := kubetest.CreateSlice(ctx, c.Dynamic, slice)
		require.NoError(t, err)
		status.Slices = append(status.Slices, slice.Name)
	}
	status.Slices = append(status.Slices, syn.extraSlices...)
	for {
		cur, err := client.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		cur.Object["status"] = kubetest.CompositionStatus(status)
		if p := syn.previous; p != nil {
			refs := make([]any, len(p.Slices))
			for i, n := range p.Slices {
				refs[i] = map[string]any{"name": n}
			}
			cur.Object["status"].(map[string]any)["previousSynthesis"] = map[string]any{"uuid": p.UUID, "resourceSlices": refs}
		}
		updated, err := client.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue // the controller wrote a decision meanwhile
		}
		require.NoError(t, err)
		return updated
	}
}

// waitForDecision waits for the decision annotation of the given synthesis.
func waitForDecision(t *testing.T, c kubetest.Clients, namespace, name, synthesisUUID string) domain.Decision {
	t.Helper()
	var d domain.Decision
	waitFor(t, fmt.Sprintf("decision for synthesis %s on %s/%s", synthesisUUID, namespace, name), func(ctx context.Context) error {
		u, err := c.Dynamic.Resource(compositionGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		raw, ok := u.GetAnnotations()[decisionAnnotation]
		if !ok {
			return errors.New("no decision annotation yet")
		}
		if d, err = domain.ParseDecision(raw); err != nil {
			return err
		}
		if d.SynthesisUUID != synthesisUUID {
			return fmt.Errorf("decision is for synthesis %s", d.SynthesisUUID)
		}
		return nil
	})
	return d
}

// listInventory lists a lineage's Secrets, ordered by chunk index.
func listInventory(ctx context.Context, c kubetest.Clients, namespace, lineage string) ([]corev1.Secret, error) {
	list, err := c.Kube.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: lineageLabel + "=" + lineage})
	if err != nil {
		return nil, err
	}
	items := list.Items
	slices.SortFunc(items, func(a, b corev1.Secret) int {
		ai, _ := strconv.Atoi(a.Annotations["eno.azure.io/inventory-chunk-index"])
		bi, _ := strconv.Atoi(b.Annotations["eno.azure.io/inventory-chunk-index"])
		return ai - bi
	})
	return items, nil
}

func chunkSecrets(secrets []corev1.Secret) []domain.ChunkSecret {
	out := make([]domain.ChunkSecret, len(secrets))
	for i, s := range secrets {
		out[i] = domain.ChunkSecret{
			Namespace: s.Namespace, Name: s.Name, Type: string(s.Type),
			Labels: s.Labels, Annotations: s.Annotations, Data: s.Data, ResourceVersion: s.ResourceVersion,
		}
	}
	return out
}

// waitForSnapshot waits until the lineage's Secrets read (design §5) as a valid snapshot of the
// given Composition UID and synthesis, and returns it with the Secrets.
func waitForSnapshot(t *testing.T, c kubetest.Clients, namespace, lineage, compUID, synthesisUUID string) (domain.Snapshot, []corev1.Secret) {
	t.Helper()
	var snap domain.Snapshot
	var secrets []corev1.Secret
	waitFor(t, fmt.Sprintf("snapshot of synthesis %s in lineage %s", synthesisUUID, lineage), func(ctx context.Context) error {
		var err error
		if secrets, err = listInventory(ctx, c, namespace, lineage); err != nil {
			return err
		}
		if snap, err = domain.ReadSnapshot(chunkSecrets(secrets), time.Now(), 0); err != nil {
			return err
		}
		if m := snap.Meta(); m.CompositionUID != compUID || m.SynthesisUUID != synthesisUUID {
			return fmt.Errorf("snapshot is of composition UID %s, synthesis %s", m.CompositionUID, m.SynthesisUUID)
		}
		return nil
	})
	return snap, secrets
}

// assertNoSnapshotOf checks that no inventory Secret of the lineage was recorded from the synthesis.
func assertNoSnapshotOf(t *testing.T, c kubetest.Clients, namespace, lineage, synthesisUUID string) {
	t.Helper()
	secrets, err := listInventory(testContext(t), c, namespace, lineage)
	require.NoError(t, err)
	for _, s := range secrets {
		assert.NotEqual(t, synthesisUUID, s.Annotations["eno.azure.io/source-synthesis-uuid"], "secret %s was recorded from synthesis %s", s.Name, synthesisUUID)
	}
}

// waitForEvent waits for an event with reason on the Composition and returns it.
func waitForEvent(t *testing.T, c kubetest.Clients, namespace, name, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	waitFor(t, fmt.Sprintf("event %s on %s/%s", reason, namespace, name), func(ctx context.Context) error {
		list, err := c.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return err
		}
		var reasons []string
		for _, e := range list.Items {
			if e.Reason == reason && e.InvolvedObject.Kind == "Composition" {
				found = e
				return nil
			}
			reasons = append(reasons, e.Reason)
		}
		return fmt.Errorf("events so far: %v", reasons)
	})
	return found
}

// lineageOf is the default lineage of a Composition (design §3).
func lineageOf(namespace, name string) string {
	return domain.DefaultLineage(namespace, name).String()
}
