package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// The stories of design §5 step 3, design §6 (SharedLineage, AlreadyDecided) and design §6.3 on the real binary
// and API server, which is also the downstream cluster: publish applies each synthesis's objects
// before the controller records it, as eno-reconciler would. No Eno runs, so nothing is deleted
// downstream unless a test deletes it, standing in for Eno or for a user.

// overrideAnnotation is the lineage override of design §3.
const overrideAnnotation = "eno.azure.io/inventory-lineage"

// history is one test's namespace, its running controller and its Compositions.
type history struct {
	t   *testing.T
	c   kubetest.Clients
	ns  string
	ctl *controller
	// at hands out synthesis times one minute apart, in the past and increasing.
	at time.Time
}

func newHistory(t *testing.T, prefix string) *history {
	c := env.AdminClients(t)
	ns := c.NewNamespace(t, prefix)
	h := &history{t: t, c: c, ns: ns, at: time.Now().Add(-30 * time.Minute)}
	h.ctl = startController(t, "", "--composition-namespace="+ns)
	return h
}

// configMaps is a synthesis of ConfigMaps of the given names in the test's namespace.
func (h *history) configMaps(names ...string) synthesis {
	rs := make([]resource, len(names))
	for i, n := range names {
		rs[i] = resource{Manifest: object("v1", "ConfigMap", h.ns, n, map[string]string{"app": "history"}, nil, nil)}
	}
	h.at = h.at.Add(time.Minute)
	return newSynthesis(h.at, rs)
}

// create creates the Composition (with a lineage override unless lineage is "") and publishes
// syn; it waits for the decision and returns the Composition and the decision.
func (h *history) create(name, lineage string, syn synthesis) (*unstructured.Unstructured, domain.Decision) {
	h.t.Helper()
	annotations := map[string]string{optInAnnotation: "enabled"}
	if lineage != "" {
		annotations[overrideAnnotation] = lineage
	}
	comp, err := kubetest.CreateComposition(testContext(h.t), h.c.Dynamic, domain.Composition{Namespace: h.ns, Name: name, Annotations: annotations})
	require.NoError(h.t, err)
	publish(h.t, h.c, comp, syn)
	return comp, waitForDecision(h.t, h.c, h.ns, name, syn.UUID)
}

// remove deletes the Composition (orphaning: nothing downstream is touched) and waits until
// it is gone.
func (h *history) remove(name string) {
	h.t.Helper()
	client := h.c.Dynamic.Resource(compositionGVR).Namespace(h.ns)
	require.NoError(h.t, client.Delete(testContext(h.t), name, metav1.DeleteOptions{}))
	waitFor(h.t, "composition "+name+" to be gone", func(ctx context.Context) error {
		_, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}

// tombstones reads a recovery slice: the identities it tombstones, sorted.
func (h *history) tombstones(slice string) []string {
	h.t.Helper()
	u, err := h.c.Dynamic.Resource(sliceGVR).Namespace(h.ns).Get(testContext(h.t), slice, metav1.GetOptions{})
	require.NoError(h.t, err, "the decision names tombstone slice %s", slice)
	items, _, err := unstructured.NestedSlice(u.Object, "spec", "resources")
	require.NoError(h.t, err)
	var out []string
	for _, it := range items {
		m := it.(map[string]any)
		require.Equal(h.t, true, m["deleted"], "slice %s holds a resource that is not a tombstone", slice)
		var obj unstructured.Unstructured
		require.NoError(h.t, obj.UnmarshalJSON([]byte(m["manifest"].(string))))
		out = append(out, obj.GetKind()+"/"+obj.GetNamespace()+"/"+obj.GetName())
	}
	slices.Sort(out)
	return out
}

// noRecoverySlices asserts that nothing was handed to Eno in the namespace: no slice of this
// controller's, and no synthesis naming one.
func (h *history) noRecoverySlices() {
	h.t.Helper()
	list, err := h.c.Dynamic.Resource(sliceGVR).Namespace(h.ns).List(testContext(h.t), metav1.ListOptions{})
	require.NoError(h.t, err)
	for _, s := range list.Items {
		assert.NotContains(h.t, s.GetName(), "-recovery-", "recovery slice %s was published", s.GetName())
	}
}

// configMap reads a downstream ConfigMap; ok is false when it does not exist.
func (h *history) configMap(name string) (corev1.ConfigMap, bool) {
	h.t.Helper()
	cm, err := h.c.Kube.CoreV1().ConfigMaps(h.ns).Get(testContext(h.t), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return corev1.ConfigMap{}, false
	}
	require.NoError(h.t, err)
	return *cm, true
}

func (h *history) id(name string) string { return "ConfigMap/" + h.ns + "/" + name }

// recreateByHand deletes the downstream ConfigMap and creates it again, as a user would, in a
// second later than the history was written (design §6.3 compares whole seconds), and checks
// that its creationTimestamp is later than the history's write time.
func (h *history) recreateByHand(name string, written time.Time) {
	h.t.Helper()
	ctx := testContext(h.t)
	for !time.Now().Truncate(time.Second).After(written) {
		time.Sleep(100 * time.Millisecond)
	}
	err := h.c.Kube.CoreV1().ConfigMaps(h.ns).Delete(ctx, name, metav1.DeleteOptions{})
	require.True(h.t, err == nil || apierrors.IsNotFound(err), "%v", err)
	created, err := h.c.Kube.CoreV1().ConfigMaps(h.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"made-by": "hand"}},
	}, metav1.CreateOptions{})
	require.NoError(h.t, err)
	require.True(h.t, created.CreationTimestamp.After(written),
		"the hand-made %s (created %s) is newer than the history (written %s)", name, created.CreationTimestamp.UTC(), written)
}

// writtenAt is a snapshot's write time as design §6.3 defines it: the newest managedFields time
// of our entry owning f:data, over the snapshot's Secrets.
func writtenAt(t *testing.T, secrets []corev1.Secret) time.Time {
	t.Helper()
	var newest time.Time
	for _, s := range secrets {
		for _, mf := range s.ManagedFields {
			if mf.Manager == domain.FieldManager && mf.Time != nil && mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:data"`) && mf.Time.After(newest) {
				newest = mf.Time.UTC()
			}
		}
	}
	require.False(t, newest.IsZero(), "the snapshot's Secrets carry a managedFields time for their data")
	return newest
}

// A sibling's newer snapshot does not win (design §5 step 3). west and east share a lineage
// override; east recorded later and has since been deleted (orphaning its objects), so no
// other Composition of the lineage lives (design §6, SharedLineage). When west is recreated, it
// recovers from its own predecessor's snapshot: its own orphan is tombstoned, east's objects
// are not.
func TestSiblingsNewerSnapshotDoesNotWin(t *testing.T) {
	h := newHistory(t, "sibling")
	lineage := h.ns // a DNS label of its own per run

	west, d := h.create("west", lineage, h.configMaps("west-a", "west-b"))
	require.Equal(t, "NoInventory", d.Outcome.String(), d.Message)
	westFirst := d.SynthesisUUID
	waitForSnapshot(t, h.c, "kube-system", lineage, string(west.GetUID()), westFirst)

	// east has no history of its own: west's is a living sibling's (SharedLineage). Its decision
	// is finished, so east records; the lineage's newest snapshot is now east's.
	east, d := h.create("east", lineage, h.configMaps("east-a", "east-b"))
	require.Equal(t, "InventoryInvalid", d.Outcome.String(), d.Message)
	require.Equal(t, "SharedLineage", d.Reason)
	snap, _ := waitForSnapshot(t, h.c, "kube-system", lineage, string(east.GetUID()), d.SynthesisUUID)
	require.Equal(t, "east", snap.Meta().CompositionName, "east's snapshot is the lineage's newest")

	h.remove("east")
	h.remove("west")
	_, d = h.create("west", lineage, h.configMaps("west-a"))
	assert.Equal(t, "Recovered", d.Outcome.String(), d.Message)
	assert.Equal(t, westFirst, d.SourceSynthesisUUID, "west recovers from its own predecessor, not from east's newer snapshot")
	assert.Equal(t, 1, d.Tombstones)
	assert.Equal(t, []string{h.id("west-b")}, h.tombstones(d.TombstoneSlice), "west's own orphan, and nothing of east's")
	for _, name := range []string{"east-a", "east-b"} {
		_, ok := h.configMap(name)
		assert.True(t, ok, "east's %s is untouched", name)
	}
	h.ctl.Stop(t)
}

// design §6, SharedLineage, on the real API server: two live Compositions share a lineage
// override and the second has no history of its own. The only history is the first's, which
// lists every object of the first as absent from the second: nothing is published.
func TestSharedLineageOfALivingSiblingPublishesNothing(t *testing.T) {
	h := newHistory(t, "shared")
	lineage := h.ns

	first, d := h.create("first", lineage, h.configMaps("first-a", "first-b", "first-c"))
	require.Equal(t, "NoInventory", d.Outcome.String(), d.Message)
	waitForSnapshot(t, h.c, "kube-system", lineage, string(first.GetUID()), d.SynthesisUUID)

	_, d = h.create("second", lineage, h.configMaps("second-a"))
	assert.Equal(t, "InventoryInvalid", d.Outcome.String(), d.Message)
	assert.Equal(t, "SharedLineage", d.Reason)
	assert.Contains(t, d.Message, h.ns+"/first")
	assert.Zero(t, d.Tombstones)
	assert.Empty(t, d.TombstoneSlice)
	assert.Empty(t, d.RecoveredFrom, "a SharedLineage refusal never blocks a later recovery")
	refused := waitForEvent(t, h.c, h.ns, "second", "InventoryInvalid")
	assert.Equal(t, "Warning", refused.Type)
	assert.Contains(t, refused.Message, "SharedLineage")
	h.noRecoverySlices()
	for _, name := range []string{"first-a", "first-b", "first-c"} {
		_, ok := h.configMap(name)
		assert.True(t, ok, "the living sibling's %s is untouched", name)
	}
	h.ctl.Stop(t)
}

// A hand-made object is not deleted (design §6.3). After the snapshot is written, one of its
// objects is deleted and re-created by hand, and another is deleted for good. The recreated
// Composition produces neither: the hand-made one is newer than the history and the gone one
// is NotFound, so only the real orphan is tombstoned, and only it is counted by the guard
// (three of four entries would be held over the default guard of one half).
func TestHandMadeObjectIsNotDeleted(t *testing.T) {
	h := newHistory(t, "handmade")
	first, d := h.create("app", "", h.configMaps("keep", "hand", "gone", "orphan"))
	require.Equal(t, "NoInventory", d.Outcome.String(), d.Message)
	_, secrets := waitForSnapshot(t, h.c, "kube-system", lineageOf(h.ns, "app"), string(first.GetUID()), d.SynthesisUUID)
	source := d.SynthesisUUID
	written := writtenAt(t, secrets)

	h.recreateByHand("hand", written)
	require.NoError(t, h.c.Kube.CoreV1().ConfigMaps(h.ns).Delete(testContext(t), "gone", metav1.DeleteOptions{}))

	h.remove("app")
	_, d = h.create("app", "", h.configMaps("keep"))
	assert.Equal(t, "Recovered", d.Outcome.String(), d.Message)
	assert.Equal(t, source, d.SourceSynthesisUUID)
	assert.Equal(t, 1, d.Tombstones, "neither the hand-made nor the gone object is counted")
	assert.Equal(t, []string{h.id("orphan")}, h.tombstones(d.TombstoneSlice))
	assert.Contains(t, d.Message, "dropped 2")
	assert.Contains(t, d.Message, "1 CreatedAfterHistory (first "+h.id("hand"))
	assert.Contains(t, d.Message, "1 NotFound (first "+h.id("gone")+")")
	event := waitForEvent(t, h.c, h.ns, "app", "Recovered")
	assert.Contains(t, event.Message, "CreatedAfterHistory", "the event says what was dropped")
	cm, ok := h.configMap("hand")
	require.True(t, ok)
	assert.Equal(t, "hand", cm.Labels["made-by"], "the hand-made object is still there")
	h.ctl.Stop(t)
}

// The same snapshot used twice is harmless (design §6, "One recovery per incarnation"; design §6.3). An
// incarnation recovers from U_A; Eno deletes the orphans; the incarnation is deleted before it
// records a snapshot of its own, and one orphan is re-created meanwhile. The next incarnation
// may read U_A again, but the re-created object is newer than U_A and the deleted one is gone:
// nothing is tombstoned.
func TestSameSnapshotUsedTwiceIsHarmless(t *testing.T) {
	h := newHistory(t, "twice")
	lineage := lineageOf(h.ns, "app")
	names := []string{"keep-1", "keep-2", "keep-3", "b", "c"}
	first, d := h.create("app", "", h.configMaps(names...))
	require.Equal(t, "NoInventory", d.Outcome.String(), d.Message)
	_, secrets := waitForSnapshot(t, h.c, "kube-system", lineage, string(first.GetUID()), d.SynthesisUUID)
	uA := d.SynthesisUUID
	written := writtenAt(t, secrets)

	h.remove("app")
	second, d := h.create("app", "", h.configMaps("keep-1", "keep-2", "keep-3"))
	require.Equal(t, "Recovered", d.Outcome.String(), d.Message)
	require.Equal(t, uA, d.SourceSynthesisUUID)
	require.Equal(t, []string{h.id("b"), h.id("c")}, h.tombstones(d.TombstoneSlice))
	assert.Equal(t, uA, d.RecoveredFrom)
	// Eno's next synthesis carries the tombstones and deletes both objects (no Eno runs here).
	for _, name := range []string{"b", "c"} {
		require.NoError(t, h.c.Kube.CoreV1().ConfigMaps(h.ns).Delete(testContext(t), name, metav1.DeleteOptions{}))
	}
	// The incarnation is deleted before it records: a synthesis decided Recovered is never
	// recorded, so U_A is still the newest snapshot.
	h.remove("app")
	snap, err := domain.ReadHistory(chunkSecrets(mustList(t, h.c, lineage)), time.Now(), 0).Verdict()
	require.NoError(t, err)
	require.Equal(t, uA, snap.SynthesisUUID())
	require.NotEqual(t, string(second.GetUID()), snap.CompositionUID())
	// Someone re-creates b since.
	h.recreateByHand("b", written)

	_, d = h.create("app", "", h.configMaps("keep-1", "keep-2", "keep-3"))
	assert.Equal(t, "NothingToRecover", d.Outcome.String(), d.Message)
	assert.Equal(t, "NoOrphans", d.Reason)
	assert.Equal(t, uA, d.SourceSynthesisUUID, "the new incarnation may read U_A again")
	assert.Zero(t, d.Tombstones)
	assert.Empty(t, d.TombstoneSlice)
	assert.Contains(t, d.Message, "1 NotFound (first "+h.id("c")+")")
	assert.Contains(t, d.Message, "1 CreatedAfterHistory (first "+h.id("b"))
	_, ok := h.configMap("b")
	assert.True(t, ok, "the object re-created since U_A is kept")
	list, err := h.c.Dynamic.Resource(sliceGVR).Namespace(h.ns).List(testContext(t), metav1.ListOptions{})
	require.NoError(t, err)
	recovery := 0
	for _, s := range list.Items {
		if strings.Contains(s.GetName(), "-recovery-") {
			recovery++
		}
	}
	assert.Equal(t, 1, recovery, "only the first recovery published a slice")
	h.ctl.Stop(t)
}

// The old name re-created after a rename (design §6, "A lineage that a living Composition shares
// is not ours to clean"). old-name is renamed to new-name: its successor inherits the lineage
// override, recovers nothing (it produces everything) and records its own snapshots under the
// new name. When old-name is re-created producing less, its own stale snapshot is the
// candidate, and it lists objects the living successor now manages: recovery reads the
// successor live, finds it, and decides SharedLineage. Nothing is handed to Eno, nothing is
// deleted, and the successor's history is left as it was.
func TestRenamedSuccessorKeepsTheOldNamesHistory(t *testing.T) {
	h := newHistory(t, "successor")
	lineage := h.ns
	old, d := h.create("old-name", lineage, h.configMaps("x", "y"))
	require.Equal(t, "NoInventory", d.Outcome.String(), d.Message)
	waitForSnapshot(t, h.c, "kube-system", lineage, string(old.GetUID()), d.SynthesisUUID)

	h.remove("old-name")
	successor, d := h.create("new-name", lineage, h.configMaps("x", "y"))
	require.Equal(t, "NothingToRecover", d.Outcome.String(), d.Message)
	require.Equal(t, "NoOrphans", d.Reason, "a rename whose successor produces everything")
	waitForSnapshot(t, h.c, "kube-system", lineage, string(successor.GetUID()), d.SynthesisUUID)
	before := mustList(t, h.c, lineage)
	var successors []corev1.Secret
	for _, s := range before {
		if s.Annotations["eno.azure.io/composition-name"] == "new-name" {
			successors = append(successors, s)
		}
	}
	require.NotEmpty(t, successors)
	stale := 0
	for _, s := range before {
		if s.Annotations["eno.azure.io/composition-name"] == "old-name" {
			stale++
		}
	}
	require.NotZero(t, stale, "the old name's stale snapshot is still there: the successor's Secrets have names of their own")

	_, d = h.create("old-name", lineage, h.configMaps("x"))
	assert.Equal(t, "InventoryInvalid", d.Outcome.String(), d.Message)
	assert.Equal(t, "SharedLineage", d.Reason)
	assert.Contains(t, d.Message, h.ns+"/new-name (exists)")
	assert.Contains(t, d.Message, "give each Composition its own lineage")
	assert.Zero(t, d.Tombstones)
	assert.Empty(t, d.TombstoneSlice)
	refused := waitForEvent(t, h.c, h.ns, "old-name", "InventoryInvalid")
	assert.Equal(t, "Warning", refused.Type)
	assert.Contains(t, refused.Message, "SharedLineage")
	h.noRecoverySlices()
	_, ok := h.configMap("y")
	assert.True(t, ok, "the object the successor manages is not deleted")
	after := mustList(t, h.c, lineage)
	for _, want := range successors {
		i := slices.IndexFunc(after, func(s corev1.Secret) bool { return s.Name == want.Name })
		require.GreaterOrEqual(t, i, 0, "secret %s", want.Name)
		assertSameSecret(t, want, after[i])
	}
	h.ctl.Stop(t)
}

// The rename case (design §5 step 3, design §6 SharedLineage): a Composition is deleted and another is
// created under a new name with the same lineage override. No snapshot is its own, so all the
// lineage's are candidates; the source Composition is NotFound, so the history is a
// predecessor's and recovery proceeds.
func TestRenameRecoversFromThePredecessor(t *testing.T) {
	h := newHistory(t, "rename")
	lineage := h.ns
	old, d := h.create("old-name", lineage, h.configMaps("x", "y"))
	require.Equal(t, "NoInventory", d.Outcome.String(), d.Message)
	waitForSnapshot(t, h.c, "kube-system", lineage, string(old.GetUID()), d.SynthesisUUID)
	source := d.SynthesisUUID

	h.remove("old-name")
	_, d = h.create("new-name", lineage, h.configMaps("x"))
	assert.Equal(t, "Recovered", d.Outcome.String(), d.Message)
	assert.Equal(t, source, d.SourceSynthesisUUID)
	assert.Equal(t, []string{h.id("y")}, h.tombstones(d.TombstoneSlice))
	h.ctl.Stop(t)
}

func mustList(t *testing.T, c kubetest.Clients, lineage string) []corev1.Secret {
	t.Helper()
	secrets, err := listInventory(testContext(t), c, "kube-system", lineage)
	require.NoError(t, err)
	return secrets
}
