package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// foreignAnnotation is what another writer (a backup tool, say) adds to a chunk Secret.
const foreignAnnotation = "backup.example.com/last-seen"

// interleavingStore lets another writer update the chunk Secret right before the first
// UpdateChunk, between the pass's read and its write.
type interleavingStore struct {
	*k8s.SecretStore
	other   func(ctx context.Context, name string) error
	mu      sync.Mutex
	updates int
}

func (s *interleavingStore) UpdateChunk(ctx context.Context, chunk domain.ChunkSecret) (domain.ChunkSecret, error) {
	s.mu.Lock()
	s.updates++
	first := s.updates == 1
	s.mu.Unlock()
	if first {
		if err := s.other(ctx, chunk.Name); err != nil {
			return domain.ChunkSecret{}, err
		}
	}
	return s.SecretStore.UpdateChunk(ctx, chunk)
}

// TestResourceVersionGuard drives app.Service over the Kubernetes adapters: a Secret bumped by
// another writer between read and write is not overwritten, and the next pass converges while
// keeping the other writer's annotation.
func TestResourceVersionGuard(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "guard")
	inventoryNS := c.NewNamespace(t, "guard-inventory")
	other := env.AdminClients(t) // a separate client: another writer

	comps, err := k8s.NewCompositions(c.Dynamic, nil)
	require.NoError(t, err)
	slices, err := k8s.NewSlices(c.Dynamic)
	require.NoError(t, err)
	sink, err := k8s.NewTombstoneSink(c.Dynamic)
	require.NoError(t, err)
	secretStore, err := k8s.NewSecretStore(c.Kube.CoreV1(), nil, inventoryNS)
	require.NoError(t, err)
	store := &interleavingStore{SecretStore: secretStore, other: func(ctx context.Context, name string) error {
		s, err := other.Kube.CoreV1().Secrets(inventoryNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[foreignAnnotation] = "2026-11-30T12:00:00Z"
		_, err = other.Kube.CoreV1().Secrets(inventoryNS).Update(ctx, s, metav1.UpdateOptions{})
		return err
	}}
	cfg := app.DefaultConfig()
	cfg.Enabled, cfg.ControlPlane = true, "e2e"
	cfg.InventoryNamespace = inventoryNS
	downstream, err := k8s.NewDownstreamObjects(c.Metadata, c.Dynamic, c.Kube.Discovery())
	require.NoError(t, err)
	svc, err := app.New(cfg, app.Deps{Compositions: comps, Live: comps, Slices: slices, Fleet: runFleetIndex(t, c), Store: store, Sink: sink, Decisions: comps, Downstream: downstream})
	require.NoError(t, err)

	const name = "billing"
	ref := domain.CompositionRef{Namespace: ns, Name: name}
	lineage := lineageOf(ns, name)
	comp := createComposition(t, c, ns, name)
	first := newSynthesis(time.Now().Add(-10*time.Minute), []resource{
		{Manifest: object("v1", "ConfigMap", ns, "billing", nil, nil, nil)},
		{Manifest: deployment(ns, "billing", nil, nil)},
	})
	publish(t, c, comp, first)
	res, err := svc.Reconcile(ctx, ref)
	require.NoError(t, err)
	require.NotNil(t, res.Recording)
	require.Equal(t, 1, res.Recording.Created)
	_, before := waitForSnapshot(t, c, inventoryNS, lineage, string(comp.GetUID()), first.UUID)
	require.Len(t, before, 1)

	// A new synthesis changes the chunk: the pass must update it, and the other writer gets there first.
	second := newSynthesis(time.Now().Add(-5*time.Minute), []resource{
		{Manifest: object("v1", "ConfigMap", ns, "billing", nil, nil, nil)},
		{Manifest: deployment(ns, "billing", nil, nil)},
		{Manifest: service(ns, "billing", nil)},
	})
	publish(t, c, comp, second)
	_, err = svc.Reconcile(ctx, ref)
	require.ErrorIs(t, err, ports.ErrConflict, "the update prepared from the old resourceVersion must be refused")

	after, err := listInventory(ctx, c, inventoryNS, lineage)
	require.NoError(t, err)
	require.Len(t, after, 1)
	assert.Equal(t, first.UUID, after[0].Annotations["eno.azure.io/source-synthesis-uuid"], "the refused write changed the Secret")
	assert.Equal(t, before[0].Data, after[0].Data)
	assert.Contains(t, after[0].Annotations, foreignAnnotation, "the other writer's update was overwritten")

	// The retry reads the new resourceVersion and converges.
	res, err = svc.Reconcile(ctx, ref)
	require.NoError(t, err)
	require.NotNil(t, res.Recording)
	assert.Equal(t, 1, res.Recording.Updated)
	snap, secrets := waitForSnapshot(t, c, inventoryNS, lineage, string(comp.GetUID()), second.UUID)
	assert.Equal(t, 3, snap.Inventory().Len())
	assert.Equal(t, "2026-11-30T12:00:00Z", secrets[0].Annotations[foreignAnnotation], "others' annotations are preserved")
	assert.Equal(t, 2, store.updates)

	// Converged: another pass writes nothing.
	res, err = svc.Reconcile(ctx, ref)
	require.NoError(t, err)
	require.NotNil(t, res.Recording)
	assert.True(t, res.Recording.Unchanged || res.Recording.Reused == 1, "%+v", *res.Recording)
	assert.Equal(t, 2, store.updates)
}

// runFleetIndex runs a fleet index over c until the test ends, once it has synced.
func runFleetIndex(t testing.TB, c kubetest.Clients) *k8s.FleetIndex {
	t.Helper()
	fleet, err := k8s.NewFleetIndex(c.Dynamic)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	running.Go(func() { fleet.Run(ctx) })
	t.Cleanup(func() { cancel(); running.Wait() })
	require.True(t, fleet.WaitForCacheSync(kubetest.Context(t, time.Minute)), "the fleet index never synced")
	return fleet
}
