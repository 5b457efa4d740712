package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

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
	return kubetest.Manifest(apiVersion, kind, namespace, name, labels, annotations, extra)
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

// resource and synthesis are kubetest's: one resource of a slice, one synthesis as Eno publishes it.
type (
	resource  = kubetest.Resource
	synthesis = kubetest.Synthesis
)

func newSynthesis(synthesized time.Time, slices ...[]resource) synthesis {
	return kubetest.NewSynthesis(synthesized, slices...)
}

// createComposition creates an opted-in Composition with no status yet.
func createComposition(t *testing.T, c kubetest.Clients, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	return kubetest.CreateOptedIn(t, c, namespace, name)
}

// publish publishes the synthesis as Eno does, its objects applied downstream first (kubetest).
func publish(t *testing.T, c kubetest.Clients, comp *unstructured.Unstructured, syn synthesis) *unstructured.Unstructured {
	t.Helper()
	return env.Publish(t, c, comp, syn)
}

// waitForDecision waits for the decision annotation of the given synthesis.
func waitForDecision(t *testing.T, c kubetest.Clients, namespace, name, synthesisUUID string) domain.Decision {
	t.Helper()
	return kubetest.WaitForDecision(t, c, namespace, name, synthesisUUID)
}

// listInventory lists a lineage's Secrets, ordered by chunk index.
func listInventory(ctx context.Context, c kubetest.Clients, namespace, lineage string) ([]corev1.Secret, error) {
	return kubetest.ListInventory(ctx, c, namespace, lineage)
}

func chunkSecrets(secrets []corev1.Secret) []domain.ChunkSecret {
	return kubetest.ChunkSecrets(secrets)
}

// waitForSnapshot waits until the lineage's Secrets read (design §5) as a valid snapshot of the
// given Composition UID and synthesis, and returns it with the Secrets.
func waitForSnapshot(t *testing.T, c kubetest.Clients, namespace, lineage, compUID, synthesisUUID string) (domain.Snapshot, []corev1.Secret) {
	t.Helper()
	return kubetest.WaitForSnapshot(t, c, namespace, lineage, compUID, synthesisUUID)
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
