package kubetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// The steps of a story told to the real binary: an opted-in Composition, syntheses published as
// Eno publishes them, and waits for the decision and the snapshot the binary writes. The exact
// strings of design §3 are spelled out here rather than taken from domain, so that a changed
// constant fails the tests.
const (
	optInAnnotation    = "eno.azure.io/tombstone-recovery"
	decisionAnnotation = "eno.azure.io/tombstone-recovery-decision"
	lineageLabel       = "eno.azure.io/inventory-lineage"
)

// Manifest renders one manifest as Eno's synthesizer stores it in a slice: a JSON string.
func Manifest(apiVersion, kind, namespace, name string, labels, annotations map[string]string, extra map[string]any) string {
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

// Resource is one resource of a slice: a manifest, a tombstone when Deleted.
type Resource struct {
	Manifest string
	Deleted  bool
}

// Synthesis is one synthesis as Eno publishes it: slices, then status.currentSynthesis.
type Synthesis struct {
	UUID        string
	Synthesized time.Time
	Slices      [][]Resource
	// ExtraSlices are named by the synthesis besides its own (a slice someone else created).
	ExtraSlices []string
	// Previous is written as status.previousSynthesis, as Eno keeps the synthesis it replaced.
	Previous *domain.Synthesis
}

// NewSynthesis is a synthesis with a fresh UUID, synthesized at the given second.
func NewSynthesis(synthesized time.Time, slices ...[]Resource) Synthesis {
	return Synthesis{UUID: string(uuid.NewUUID()), Synthesized: synthesized.UTC().Truncate(time.Second), Slices: slices}
}

// Produced lists the manifests the synthesis produces: its tombstones are not among them.
func (s Synthesis) Produced() []string {
	var out []string
	for _, rs := range s.Slices {
		for _, r := range rs {
			if !r.Deleted {
				out = append(out, r.Manifest)
			}
		}
	}
	return out
}

// SliceName is the name of the synthesis's i-th slice of Composition comp.
func (s Synthesis) SliceName(comp string, i int) string {
	return comp + "-" + s.UUID[:8] + "-" + strconv.Itoa(i)
}

// CreateOptedIn creates an opted-in Composition with no status yet.
func CreateOptedIn(t testing.TB, c Clients, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	created, err := CreateComposition(Context(t, time.Minute), c.Dynamic, domain.Composition{
		Namespace: namespace, Name: name, Annotations: map[string]string{optInAnnotation: "enabled"},
	})
	require.NoError(t, err)
	return created
}

// Publish creates the synthesis's slices, then sets status.currentSynthesis through the
// status subresource, as Eno does. The objects the synthesis produces are applied downstream
// first (the test API server is also the downstream cluster), as eno-reconciler would have
// applied them before the synthesis is Ready and its history is written (design §6.3 reads them).
func (e *Env) Publish(t testing.TB, c Clients, comp *unstructured.Unstructured, syn Synthesis) *unstructured.Unstructured {
	t.Helper()
	ctx := Context(t, 3*time.Minute)
	ns, name := comp.GetNamespace(), comp.GetName()
	require.NoError(t, e.AdminClients(t).ApplyDownstream(ctx, syn.Produced()...))
	client := c.Dynamic.Resource(CompositionResource).Namespace(ns)
	// Stock Eno stamps a slice with the synthesis current when its executor writes it: "" on a
	// first synthesis, the previous UUID after that (design §2).
	before, err := client.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	stamp, _, _ := unstructured.NestedString(before.Object, "status", "currentSynthesis", "uuid")
	status := domain.Synthesis{UUID: syn.UUID, Synthesized: syn.Synthesized, Ready: true}
	for i, resources := range syn.Slices {
		slice := domain.ResourceSlice{Namespace: ns, Name: syn.SliceName(name, i), SynthesisUUID: stamp}
		for _, r := range resources {
			slice.Resources = append(slice.Resources, domain.SliceResource{Manifest: r.Manifest, Deleted: r.Deleted})
		}
		_, err := CreateSlice(ctx, c.Dynamic, slice)
		require.NoError(t, err)
		status.Slices = append(status.Slices, slice.Name)
	}
	status.Slices = append(status.Slices, syn.ExtraSlices...)
	for {
		cur, err := client.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		cur.Object["status"] = CompositionStatus(status)
		if p := syn.Previous; p != nil {
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

// WaitForDecision waits for the decision annotation of the given synthesis.
func WaitForDecision(t testing.TB, c Clients, namespace, name, synthesisUUID string) domain.Decision {
	t.Helper()
	var d domain.Decision
	WaitFor(t, fmt.Sprintf("decision for synthesis %s on %s/%s", synthesisUUID, namespace, name), func(ctx context.Context) error {
		u, err := c.Dynamic.Resource(CompositionResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
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

// ListInventory lists a lineage's Secrets, ordered by chunk index.
func ListInventory(ctx context.Context, c Clients, namespace, lineage string) ([]corev1.Secret, error) {
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

// ChunkSecrets converts Secrets to the domain's chunks.
func ChunkSecrets(secrets []corev1.Secret) []domain.ChunkSecret {
	out := make([]domain.ChunkSecret, len(secrets))
	for i, s := range secrets {
		out[i] = domain.ChunkSecret{
			Namespace: s.Namespace, Name: s.Name, Type: string(s.Type),
			Labels: s.Labels, Annotations: s.Annotations, Data: s.Data, ResourceVersion: s.ResourceVersion,
		}
	}
	return out
}

// WaitForSnapshot waits until the lineage's Secrets read (design §5) as a valid snapshot of the
// given Composition UID and synthesis, and returns it with the Secrets.
func WaitForSnapshot(t testing.TB, c Clients, namespace, lineage, compUID, synthesisUUID string) (domain.Snapshot, []corev1.Secret) {
	t.Helper()
	var snap domain.Snapshot
	var secrets []corev1.Secret
	WaitFor(t, fmt.Sprintf("snapshot of synthesis %s in lineage %s", synthesisUUID, lineage), func(ctx context.Context) error {
		var err error
		if secrets, err = ListInventory(ctx, c, namespace, lineage); err != nil {
			return err
		}
		if snap, err = domain.ReadHistory(ChunkSecrets(secrets), time.Now(), 0).Verdict(); err != nil {
			return err
		}
		if m := snap.Meta(); m.CompositionUID != compUID || m.SynthesisUUID != synthesisUUID {
			return fmt.Errorf("snapshot is of composition UID %s, synthesis %s", m.CompositionUID, m.SynthesisUUID)
		}
		return nil
	})
	return snap, secrets
}
