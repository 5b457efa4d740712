package k8s

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// env is the real etcd and kube-apiserver every test of the package shares.
var env *kubetest.Env

// inventoryWriter is a user granted only what the SecretStore needs, in one namespace.
const inventoryWriter = "inventory-writer"

// TestMain starts the API server; TestMainWithEnv stops it and then runs goleak over the package.
func TestMain(m *testing.M) {
	kubetest.TestMainWithEnv(m, kubetest.Options{Users: []kubetest.User{{Name: inventoryWriter}}}, func(e *kubetest.Env) int {
		env = e
		return m.Run()
	})
}

// eventually is how long a cache may lag behind the API server in these tests.
const eventually = 15 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

type clients struct {
	dynamic dynamic.Interface
	kube    kubernetes.Interface
}

func clientsFor(t *testing.T, cfg *rest.Config) clients {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return clients{dynamic: dyn, kube: kube}
}

func admin(t *testing.T) clients { return clientsFor(t, env.AdminConfig()) }

// newNamespace creates a namespace under a generated name. Nothing is cleaned up: every test
// works in its own namespaces and the server is discarded at the end.
func newNamespace(t *testing.T, c clients, prefix string) string {
	t.Helper()
	ns, err := c.kube.CoreV1().Namespaces().Create(testContext(t),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return ns.Name
}

// compositionStatus renders a synthesis as Eno writes status.currentSynthesis.
func compositionStatus(s *domain.Synthesis) map[string]any {
	syn := map[string]any{"uuid": s.UUID}
	if !s.Synthesized.IsZero() {
		syn["synthesized"] = s.Synthesized.UTC().Format(time.RFC3339)
		if s.Ready {
			syn["ready"] = s.Synthesized.UTC().Add(time.Minute).Format(time.RFC3339)
		}
	}
	if len(s.Slices) > 0 {
		refs := make([]any, len(s.Slices))
		for i, name := range s.Slices {
			refs[i] = map[string]any{"name": name}
		}
		syn["resourceSlices"] = refs
	}
	return map[string]any{"currentSynthesis": syn}
}

// createComposition creates c, then writes its status through the status subresource when it
// has a synthesis, and returns the object as finally stored.
func createComposition(ctx context.Context, dyn dynamic.Interface, c domain.Composition) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": enoAPIVersion,
		"kind":       compositionKind,
		"spec":       map[string]any{"synthesizer": map[string]any{"name": "demo"}},
	}}
	u.SetNamespace(c.Namespace)
	u.SetName(c.Name)
	u.SetLabels(c.Labels)
	u.SetAnnotations(c.Annotations)
	client := dyn.Resource(CompositionGVR).Namespace(c.Namespace)
	created, err := client.Create(ctx, u, metav1.CreateOptions{})
	if err != nil || c.Synthesis == nil {
		return created, err
	}
	created.Object["status"] = compositionStatus(c.Synthesis)
	return client.UpdateStatus(ctx, created, metav1.UpdateOptions{})
}

// createSlice creates s as Eno's synthesizer would, without an owner.
func createSlice(ctx context.Context, dyn dynamic.Interface, s domain.ResourceSlice) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": enoAPIVersion,
		"kind":       resourceSliceKind,
		"spec": map[string]any{
			"synthesisUUID": s.SynthesisUUID,
			"resources":     sliceResourcesToUnstructured(s.Resources),
		},
	}}
	u.SetNamespace(s.Namespace)
	u.SetName(s.Name)
	return dyn.Resource(ResourceSliceGVR).Namespace(s.Namespace).Create(ctx, u, metav1.CreateOptions{})
}
