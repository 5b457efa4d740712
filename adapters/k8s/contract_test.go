package k8s

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/adapters/contract"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// TestContract runs the shared adapter contract against the real API server. Every case shares
// one control-plane namespace, one inventory namespace and running caches, as production does.
func TestContract(t *testing.T) {
	wait := fleetWait
	fleetWait = 2 * time.Second // a slice that never comes
	t.Cleanup(func() { fleetWait = wait })
	c := env.AdminClients(t)
	h := &harness{
		t:         t,
		clients:   c,
		namespace: c.NewNamespace(t, "contract"),
		inventory: c.NewNamespace(t, "contract-inventory"),
	}
	store := newStore(t, c.Kube.CoreV1(), c.Metadata, h.inventory)
	startStore(t, store)
	informer, _ := startCompositionInformer(t, c.Dynamic, h.namespace)
	h.store = store
	h.compositions = newCompositions(t, c.Dynamic, informer)
	var err error
	h.slices, err = NewSlices(c.Dynamic)
	require.NoError(t, err)
	h.sink, err = NewTombstoneSink(c.Dynamic)
	require.NoError(t, err)
	h.fleet = startFleetIndex(t, c)

	contract.Run(t, func(*testing.T) contract.Harness { return h })
}

type harness struct {
	t            *testing.T
	clients      kubetest.Clients
	namespace    string
	inventory    string
	store        *SecretStore
	compositions *Compositions
	slices       *Slices
	sink         *TombstoneSink
	fleet        *FleetIndex
}

var _ contract.Harness = (*harness)(nil)

func (h *harness) InventoryNamespace() string                 { return h.inventory }
func (h *harness) Store() ports.SnapshotStore                 { return h.store }
func (h *harness) Namespace() string                          { return h.namespace }
func (h *harness) CompositionReader() ports.CompositionReader { return h.compositions }
func (h *harness) LiveReader() ports.LiveReader               { return h.compositions }
func (h *harness) CompositionLister() ports.CompositionLister { return h.compositions }
func (h *harness) DecisionWriter() ports.DecisionWriter       { return h.compositions }
func (h *harness) SliceReader() ports.SliceReader             { return h.slices }
func (h *harness) TombstoneSink() ports.TombstoneSink         { return h.sink }
func (h *harness) FleetIndex() ports.FleetIndex               { return h.fleet }

// startFleetIndex runs a fleet index until the test ends and waits for it to sync.
func startFleetIndex(t *testing.T, c kubetest.Clients) *FleetIndex {
	t.Helper()
	f, err := NewFleetIndex(c.Dynamic)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.True(t, f.WaitForCacheSync(kubetest.Context(t, 30*time.Second)))
	return f
}
func (h *harness) Eventually(t testing.TB, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, eventually, 20*time.Millisecond)
}

// PutForeignSecret creates s, or replaces it whatever its resourceVersion, as another client.
func (h *harness) PutForeignSecret(t testing.TB, s domain.ChunkSecret) domain.ChunkSecret {
	t.Helper()
	secrets := h.clients.Kube.CoreV1().Secrets(s.Namespace)
	want := secretFromChunk(s)
	want.ResourceVersion = ""
	stored, err := secrets.Create(t.Context(), want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var live *corev1.Secret
		live, err = secrets.Get(t.Context(), s.Name, metav1.GetOptions{})
		require.NoError(t, err)
		want.ResourceVersion = live.ResourceVersion
		stored, err = secrets.Update(t.Context(), want, metav1.UpdateOptions{})
	}
	require.NoError(t, err, "putting secret %s/%s", s.Namespace, s.Name)
	return chunkFromSecret(stored)
}

func (h *harness) CreateComposition(t testing.TB, c domain.Composition) domain.Composition {
	t.Helper()
	u, err := kubetest.CreateComposition(t.Context(), h.clients.Dynamic, c)
	require.NoError(t, err, "creating composition %s", c.Ref())
	got, err := compositionFromUnstructured(u)
	require.NoError(t, err)
	return got
}

func (h *harness) CreateSlice(t testing.TB, s domain.ResourceSlice) {
	t.Helper()
	_, err := kubetest.CreateSlice(t.Context(), h.clients.Dynamic, s)
	require.NoError(t, err, "creating resource slice %s/%s", s.Namespace, s.Name)
}

func (h *harness) ReadSlice(t testing.TB, namespace, name string) domain.ResourceSlice {
	t.Helper()
	u, err := h.clients.Dynamic.Resource(ResourceSliceGVR).Namespace(namespace).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err, "reading resource slice %s/%s", namespace, name)
	s, err := sliceFromUnstructured(u)
	require.NoError(t, err)
	return s
}

func (h *harness) CreateOwnedSlice(t testing.TB, s domain.ResourceSlice, owner domain.Composition) {
	t.Helper()
	_, err := kubetest.CreateSliceOwnedBy(t.Context(), h.clients.Dynamic, s, &owner)
	require.NoError(t, err, "creating resource slice %s/%s", s.Namespace, s.Name)
}

func (h *harness) ListSlices(t testing.TB, namespace string) []domain.ResourceSlice {
	t.Helper()
	list, err := h.clients.Dynamic.Resource(ResourceSliceGVR).Namespace(namespace).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	out := make([]domain.ResourceSlice, 0, len(list.Items))
	for i := range list.Items {
		s, err := sliceFromUnstructured(&list.Items[i])
		require.NoError(t, err)
		out = append(out, s)
	}
	return out
}

func (h *harness) SliceOwnerUID(t testing.TB, namespace, name string) string {
	t.Helper()
	u, err := h.clients.Dynamic.Resource(ResourceSliceGVR).Namespace(namespace).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	for _, o := range u.GetOwnerReferences() {
		if o.APIVersion == enoAPIVersion && o.Kind == compositionKind && o.Controller != nil && *o.Controller {
			return string(o.UID)
		}
	}
	return ""
}

// RemoveSlice releases the slice's finalizers, as Eno's cleanup does, then deletes it.
func (h *harness) RemoveSlice(t testing.TB, namespace, name string) {
	t.Helper()
	client := h.clients.Dynamic.Resource(ResourceSliceGVR).Namespace(namespace)
	u, err := client.Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	if len(u.GetFinalizers()) > 0 {
		u.SetFinalizers(nil)
		_, err = client.Update(t.Context(), u, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, client.Delete(t.Context(), name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := client.Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, eventually, 20*time.Millisecond)
}

// SetAnnotation merge-patches one annotation, as an operator's kubectl would.
func (h *harness) SetAnnotation(t testing.TB, ref domain.CompositionRef, key, value string) domain.Composition {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	require.NoError(t, err)
	u, err := h.clients.Dynamic.Resource(CompositionGVR).Namespace(ref.Namespace).Patch(t.Context(), ref.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	got, err := compositionFromUnstructured(u)
	require.NoError(t, err)
	return got
}

// MarkSliceDeleting adds a finalizer of another controller, then deletes the slice.
func (h *harness) MarkSliceDeleting(t testing.TB, namespace, name string) {
	t.Helper()
	client := h.clients.Dynamic.Resource(ResourceSliceGVR).Namespace(namespace)
	u, err := client.Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	u.SetFinalizers(append(u.GetFinalizers(), "example.com/hold"))
	_, err = client.Update(t.Context(), u, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, client.Delete(t.Context(), name, metav1.DeleteOptions{}))
	t.Cleanup(func() {
		if u, err := client.Get(context.Background(), name, metav1.GetOptions{}); err == nil {
			u.SetFinalizers(nil)
			_, _ = client.Update(context.Background(), u, metav1.UpdateOptions{})
		}
	})
}

// SetSynthesis writes the status through the status subresource, as Eno does.
func (h *harness) SetSynthesis(t testing.TB, ref domain.CompositionRef, s *domain.Synthesis, inFlight string) domain.Composition {
	t.Helper()
	client := h.clients.Dynamic.Resource(CompositionGVR).Namespace(ref.Namespace)
	u, err := client.Get(t.Context(), ref.Name, metav1.GetOptions{})
	require.NoError(t, err)
	status := map[string]any{}
	if s != nil {
		status = kubetest.CompositionStatus(*s)
	}
	if inFlight != "" {
		status["inFlightSynthesis"] = map[string]any{"uuid": inFlight}
	}
	u.Object["status"] = status
	u, err = client.UpdateStatus(t.Context(), u, metav1.UpdateOptions{})
	require.NoError(t, err)
	got, err := compositionFromUnstructured(u)
	require.NoError(t, err)
	return got
}
