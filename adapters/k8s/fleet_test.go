package k8s

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// A pending hand-off's watch looks again on the event itself (design §6.2): once a slice of
// another Composition starts to produce a tombstone's identity, OnThreat names the Composition
// whose recovery slice holds the tombstone; a slice producing something else names nobody.
func TestFleetIndexOnThreat(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "threat")
	self := mustCreateComposition(t, c, sampleComposition(ns, "web"))
	other := mustCreateComposition(t, c, sampleComposition(ns, "other"))
	cm := func(name string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"` + ns + `","name":"` + name + `"}}`
	}

	var mu sync.Mutex
	var threatened []domain.CompositionRef
	fleet := runFleetIndex(t, c, func(fleet *FleetIndex) {
		require.NoError(t, fleet.OnThreat(func(ref domain.CompositionRef) {
			mu.Lock()
			defer mu.Unlock()
			threatened = append(threatened, ref)
		}))
	})

	_, err := kubetest.CreateSliceOwnedBy(ctx, c.Dynamic, domain.ResourceSlice{Namespace: ns, Name: "web-recovery-1",
		Annotations: map[string]string{domain.AnnotationSourceUID: "old-uid"},
		Resources:   []domain.SliceResource{{Manifest: cm("orphan"), Deleted: true}}}, &self)
	require.NoError(t, err)
	require.NoError(t, fleet.WaitForSlice(ctx, ns, "web-recovery-1"))
	_, err = kubetest.CreateSliceOwnedBy(ctx, c.Dynamic, domain.ResourceSlice{Namespace: ns, Name: "other-unrelated",
		Resources: []domain.SliceResource{{Manifest: cm("unrelated")}}}, &other)
	require.NoError(t, err)
	require.NoError(t, fleet.WaitForSlice(ctx, ns, "other-unrelated"))
	mu.Lock()
	assert.Empty(t, threatened, "nothing threatens the hand-off yet")
	mu.Unlock()

	_, err = kubetest.CreateSliceOwnedBy(ctx, c.Dynamic, domain.ResourceSlice{Namespace: ns, Name: "other-takes-over",
		Resources: []domain.SliceResource{{Manifest: cm("orphan")}}}, &other)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(threatened) > 0
	}, 30*time.Second, 10*time.Millisecond)
	mu.Lock()
	assert.Equal(t, []domain.CompositionRef{self.Ref()}, threatened)
	threatened = nil
	mu.Unlock()

	// A deleted recovery slice is no longer watched. The handler sees events in order, so once
	// the marker's threat is seen, the slice created before it has been checked.
	third := mustCreateComposition(t, c, sampleComposition(ns, "third"))
	require.NoError(t, c.Dynamic.Resource(ResourceSliceGVR).Namespace(ns).Delete(ctx, "web-recovery-1", metav1.DeleteOptions{}))
	_, err = kubetest.CreateSliceOwnedBy(ctx, c.Dynamic, domain.ResourceSlice{Namespace: ns, Name: "third-recovery-1",
		Annotations: map[string]string{domain.AnnotationSourceUID: "old-third"},
		Resources:   []domain.SliceResource{{Manifest: cm("marker"), Deleted: true}}}, &third)
	require.NoError(t, err)
	for _, name := range []string{"orphan", "marker"} {
		_, err = kubetest.CreateSliceOwnedBy(ctx, c.Dynamic, domain.ResourceSlice{Namespace: ns, Name: "other-" + name + "-again",
			Resources: []domain.SliceResource{{Manifest: cm(name)}}}, &other)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(threatened) > 0
	}, 30*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []domain.CompositionRef{third.Ref()}, threatened)
}

// The slice informer runs only while asked (design §6.3): not before the first question, stopped
// after fleetIdle without one, started again by the next, which sees what was written meanwhile.
func TestFleetIndexSlicesLiveWhileAsked(t *testing.T) {
	idle := fleetIdle
	fleetIdle = 200 * time.Millisecond
	t.Cleanup(func() { fleetIdle = idle })
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "idle")
	other := mustCreateComposition(t, c, sampleComposition(ns, "other"))
	fleet := startFleetIndex(t, c)
	fleet.mu.Lock()
	fleet.pinned = func() bool { return false } // earlier tests' armed Compositions stay: no namespace controller here
	fleet.mu.Unlock()
	running := func() bool {
		fleet.mu.Lock()
		defer fleet.mu.Unlock()
		return fleet.slices != nil
	}
	assert.False(t, running(), "nothing asked yet")

	id := domain.ResourceID{Kind: "ConfigMap", Namespace: ns, Name: "taken"}
	got, err := fleet.ProducedElsewhere(ctx, []domain.ResourceID{id})
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.True(t, running())
	require.Eventually(t, func() bool { return !running() }, 30*time.Second, 10*time.Millisecond, "stopped once idle")

	_, err = kubetest.CreateSliceOwnedBy(ctx, c.Dynamic, domain.ResourceSlice{Namespace: ns, Name: "other-1",
		Resources: []domain.SliceResource{{Manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"` + ns + `","name":"taken"}}`}}}, &other)
	require.NoError(t, err)
	got, err = fleet.ProducedElsewhere(ctx, []domain.ResourceID{id})
	require.NoError(t, err)
	assert.Equal(t, map[domain.ResourceID]string{id: ns + "/other-1"}, got, "started again, with a full list")
}

// No idle stop while any Composition is armed (design §6.2): its watch needs the slices' events
// whatever --pending-recheck-interval, or a retry's backoff, makes of its questions.
func TestFleetIndexSlicesLiveWhileArmed(t *testing.T) {
	idle := fleetIdle
	fleetIdle = 50 * time.Millisecond
	t.Cleanup(func() { fleetIdle = idle })
	c := env.AdminClients(t)
	ns := c.NewNamespace(t, "armed")
	comp := sampleComposition(ns, "armed")
	comp.Annotations[domain.AnnotationArmed] = "0123456789abcdef"
	mustCreateComposition(t, c, comp)
	fleet := startFleetIndex(t, c)
	_, err := fleet.ProducedElsewhere(testContext(t), nil)
	require.NoError(t, err)
	time.Sleep(40 * fleetIdle) // the idle check runs every fleetIdle/4
	fleet.mu.Lock()
	defer fleet.mu.Unlock()
	assert.NotNil(t, fleet.slices, "an armed hand-off keeps the slices watched")
}

// No idle stop while a caller waits for the slices' first list, however short fleetIdle.
func TestFleetIndexNoIdleStopWhileListing(t *testing.T) {
	idle := fleetIdle
	fleetIdle = time.Millisecond
	t.Cleanup(func() { fleetIdle = idle })
	c := env.AdminClients(t)
	fleet := startFleetIndex(t, c)
	for range 3 {
		_, err := fleet.ProducedElsewhere(testContext(t), nil)
		require.NoError(t, err)
	}
}

// The fence (design §6.3) holds only once the index holds the slice as it is live: an index
// still holding an earlier slice of the same name (created again since, its delete and create not
// yet delivered) has not seen the slices written before the new create.
func TestFleetIndexWaitsForTheLiveSlice(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "livefence")
	self := mustCreateComposition(t, c, sampleComposition(ns, "web"))
	fleet := runFleetIndex(t, c, nil)
	_, err := kubetest.CreateSliceOwnedBy(ctx, c.Dynamic, domain.ResourceSlice{Namespace: ns, Name: "web-recovery-1",
		Resources: []domain.SliceResource{{Manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"` + ns + `","name":"orphan"}}`, Deleted: true}}}, &self)
	require.NoError(t, err)
	require.NoError(t, fleet.WaitForSlice(ctx, ns, "web-recovery-1"))

	// The index holds an earlier incarnation of the name, as while a relist is delivered.
	store := fleet.slices.GetStore()
	require.NoError(t, store.Update(&production{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-recovery-1", UID: "earlier"}}))
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	require.Error(t, fleet.WaitForSlice(short, ns, "web-recovery-1"), "an earlier slice of the name is no fence")

	// Once the live slice's next event arrives, the index holds it.
	u, err := c.Dynamic.Resource(ResourceSliceGVR).Namespace(ns).Get(ctx, "web-recovery-1", metav1.GetOptions{})
	require.NoError(t, err)
	u.SetLabels(map[string]string{"touched": "yes"})
	_, err = c.Dynamic.Resource(ResourceSliceGVR).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, fleet.WaitForSlice(ctx, ns, "web-recovery-1"))
}

// runFleetIndex runs a fleet index, set up first by setup if any, until the test ends, and
// returns it once it holds every Composition.
func runFleetIndex(t *testing.T, c kubetest.Clients, setup func(*FleetIndex)) *FleetIndex {
	t.Helper()
	fleet, err := NewFleetIndex(c.Dynamic)
	require.NoError(t, err)
	if setup != nil {
		setup(fleet)
	}
	run, stop := context.WithCancel(context.Background())
	var running sync.WaitGroup
	running.Go(func() { fleet.Run(run) })
	t.Cleanup(func() { stop(); running.Wait() })
	require.True(t, fleet.WaitForCacheSync(testContext(t)))
	return fleet
}
