package memory_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/Azure/eno-tombstone-recovery/adapters/contract"
	"github.com/Azure/eno-tombstone-recovery/adapters/memory"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const inventoryNamespace = "kube-system"

// testUID is the UID recovery saw of every object the tests hand over as a tombstone;
// firstUID is the UID a fresh Cluster gives the first object it creates.
const (
	testUID  = "0f1e2d3c-0000-4000-8000-000000000001"
	firstUID = "00000000-0000-4000-9000-000000000001"
)

// harness runs the contract suite on one fresh Cluster per case.
type harness struct{ c *memory.Cluster }

func newHarness(*testing.T) contract.Harness {
	return harness{c: memory.NewCluster(inventoryNamespace)}
}

func (h harness) InventoryNamespace() string                       { return h.c.InventoryNamespace() }
func (h harness) Store() ports.SnapshotStore                       { return h.c }
func (h harness) Namespace() string                                { return "team-a" }
func (h harness) CompositionReader() ports.CompositionReader       { return h.c }
func (h harness) LiveReader() ports.LiveReader                     { return h.c }
func (h harness) CompositionLister() ports.CompositionLister       { return h.c }
func (h harness) DecisionWriter() ports.DecisionWriter             { return h.c }
func (h harness) SliceReader() ports.SliceReader                   { return h.c }
func (h harness) FleetIndex() ports.FleetIndex                     { return h.c }
func (h harness) TombstoneSink() ports.TombstoneSink               { return h.c }
func (h harness) CreateSlice(_ testing.TB, s domain.ResourceSlice) { h.c.PutSlice(s) }

func (h harness) PutForeignSecret(t testing.TB, s domain.ChunkSecret) domain.ChunkSecret {
	t.Helper()
	stored, err := h.c.PutSecret(s)
	require.NoError(t, err)
	return stored
}

func (h harness) CreateComposition(t testing.TB, c domain.Composition) domain.Composition {
	t.Helper()
	_, err := h.c.GetComposition(t.Context(), c.Ref())
	require.ErrorIs(t, err, ports.ErrNotFound, "composition %s already exists", c.Ref())
	return h.c.PutComposition(c)
}

func (h harness) ReadSlice(t testing.TB, namespace, name string) domain.ResourceSlice {
	t.Helper()
	s, err := h.c.GetSlice(t.Context(), namespace, name)
	require.NoError(t, err)
	return s
}

func (h harness) ListSlices(_ testing.TB, namespace string) []domain.ResourceSlice {
	return h.c.Slices(namespace)
}

func (h harness) SliceOwnerUID(_ testing.TB, namespace, name string) string {
	return h.c.SliceOwner(namespace, name)
}

func (h harness) CreateOwnedSlice(_ testing.TB, s domain.ResourceSlice, owner domain.Composition) {
	h.c.PutOwnedSlice(s, owner.UID)
}

func (h harness) RemoveSlice(t testing.TB, namespace, name string) {
	t.Helper()
	require.NoError(t, h.c.DeleteSlice(namespace, name))
}

func (h harness) SetSynthesis(t testing.TB, ref domain.CompositionRef, s *domain.Synthesis, inFlight string) domain.Composition {
	t.Helper()
	comp, err := h.c.GetComposition(t.Context(), ref)
	require.NoError(t, err)
	comp.Synthesis, comp.InFlightSynthesis = s, inFlight
	stored, err := h.c.UpdateComposition(comp)
	require.NoError(t, err)
	return stored
}

func (h harness) SetAnnotation(t testing.TB, ref domain.CompositionRef, key, value string) domain.Composition {
	t.Helper()
	stored, err := h.c.SetAnnotation(ref, key, value)
	require.NoError(t, err)
	return stored
}

func (h harness) MarkSliceDeleting(t testing.TB, namespace, name string) {
	t.Helper()
	require.NoError(t, h.c.MarkSliceDeleting(namespace, name))
}

func (h harness) Eventually(t testing.TB, cond func() bool) {
	t.Helper()
	require.True(t, cond(), "the memory adapter has no cache, so the condition must hold at once")
}

func TestContract(t *testing.T) {
	contract.Run(t, newHarness)
}

func chunk(name, lineage, data string) domain.ChunkSecret {
	return domain.ChunkSecret{
		Namespace: inventoryNamespace,
		Name:      name,
		Type:      domain.SecretType,
		Labels:    map[string]string{domain.LabelManagedBy: domain.ManagedByValue, domain.LabelLineage: lineage},
		Data:      map[string][]byte{domain.SecretDataKey: []byte(data)},
	}
}

func mustLineage(t *testing.T, s string) domain.Lineage {
	t.Helper()
	l, err := domain.NewLineage(s)
	require.NoError(t, err)
	return l
}

func composition(name string) domain.Composition {
	return domain.Composition{
		Namespace:   "team-a",
		Name:        name,
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue},
		Synthesis:   &domain.Synthesis{UUID: "3f2a9c1e-0000-4000-8000-000000000001", Ready: true, Slices: []string{"s0"}},
	}
}

func TestResourceVersionIsOneCounterForEveryKind(t *testing.T) {
	c := memory.NewCluster(inventoryNamespace)
	ctx := t.Context()
	s, err := c.CreateChunk(ctx, chunk("a-0", "a", "[]"))
	require.NoError(t, err)
	assert.Equal(t, "1", s.ResourceVersion)
	comp := c.PutComposition(composition("web"))
	assert.Equal(t, "2", comp.ResourceVersion)
	c.PutSlice(domain.ResourceSlice{Namespace: "team-a", Name: "s0"})
	require.NoError(t, c.WriteDecision(ctx, comp, domain.Decision{SynthesisUUID: "x", Outcome: domain.OutcomeNoInventory}))
	got, err := c.GetComposition(ctx, comp.Ref())
	require.NoError(t, err)
	assert.Equal(t, "4", got.ResourceVersion)
	s, err = c.UpdateChunk(ctx, s)
	require.NoError(t, err)
	assert.Equal(t, "5", s.ResourceVersion)
}

func TestStoredStateCannotBeMutatedByCallers(t *testing.T) {
	c := memory.NewCluster(inventoryNamespace)
	ctx := t.Context()
	in := chunk("a-0", "a", "[]")
	out, err := c.CreateChunk(ctx, in)
	require.NoError(t, err)
	in.Data[domain.SecretDataKey][0] = 'X'
	in.Labels["mutated"] = "in"
	out.Data[domain.SecretDataKey][1] = 'Y'
	out.Annotations = map[string]string{"mutated": "out"}
	listed, err := c.ListChunks(ctx, mustLineage(t, "a"))
	require.NoError(t, err)
	listed[0].Labels["mutated"] = "listed"
	stored, err := c.GetSecret(inventoryNamespace, "a-0")
	require.NoError(t, err)
	assert.Equal(t, "[]", string(stored.Data[domain.SecretDataKey]))
	assert.NotContains(t, stored.Labels, "mutated")
	assert.Empty(t, stored.Annotations)

	comp := composition("web")
	put := c.PutComposition(comp)
	comp.Annotations["mutated"] = "in"
	comp.Synthesis.Slices[0] = "mutated"
	put.Synthesis.UUID = "mutated"
	got, err := c.LiveComposition(ctx, put.Ref())
	require.NoError(t, err)
	assert.NotContains(t, got.Annotations, "mutated")
	assert.Equal(t, []string{"s0"}, got.Synthesis.Slices)
	assert.Equal(t, "3f2a9c1e-0000-4000-8000-000000000001", got.Synthesis.UUID)

	slice := domain.ResourceSlice{Namespace: "team-a", Name: "s0", Resources: []domain.SliceResource{{Manifest: "{}"}}}
	c.PutSlice(slice)
	slice.Resources[0].Deleted = true
	read, err := c.GetSlice(ctx, "team-a", "s0")
	require.NoError(t, err)
	read.Resources[0].Manifest = "mutated"
	assert.Equal(t, []domain.SliceResource{{Manifest: "{}"}}, c.Slices("team-a")[0].Resources)
}

func TestListChunksIgnoresOtherNamespacesAndRefusesAnEmptyLineage(t *testing.T) {
	c := memory.NewCluster(inventoryNamespace)
	elsewhere := chunk("a-0", "a", "[]")
	elsewhere.Namespace = "default"
	_, err := c.PutSecret(elsewhere)
	require.NoError(t, err)
	_, err = c.CreateChunk(t.Context(), chunk("a-1", "a", "[]"))
	require.NoError(t, err)
	got, err := c.ListChunks(t.Context(), mustLineage(t, "a"))
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "a-1", got[0].Name)
	assert.Len(t, c.Secrets(), 2)

	_, err = c.ListChunks(t.Context(), domain.Lineage{})
	require.Error(t, err)
}

func TestCreateChunkRefusesAResourceVersionAndBadDataKeys(t *testing.T) {
	c := memory.NewCluster(inventoryNamespace)
	s := chunk("a-0", "a", "[]")
	s.ResourceVersion = "7"
	_, err := c.CreateChunk(t.Context(), s)
	require.Error(t, err)
	s = chunk("a-0", "a", "[]")
	s.Data["bad/key"] = nil
	_, err = c.CreateChunk(t.Context(), s)
	require.Error(t, err)
	assert.Empty(t, c.Secrets())
}

func TestDeleteSecretIsAnOperatorAction(t *testing.T) {
	c := memory.NewCluster(inventoryNamespace)
	_, err := c.CreateChunk(t.Context(), chunk("a-0", "a", "[]"))
	require.NoError(t, err)
	require.NoError(t, c.DeleteSecret(inventoryNamespace, "a-0"))
	require.ErrorIs(t, c.DeleteSecret(inventoryNamespace, "a-0"), ports.ErrNotFound)
	_, err = c.GetSecret(inventoryNamespace, "a-0")
	require.ErrorIs(t, err, ports.ErrNotFound)
}

func TestRecreatedCompositionGetsANewUID(t *testing.T) {
	c := memory.NewCluster(inventoryNamespace)
	first := c.PutComposition(composition("web"))
	require.NotEmpty(t, first.UID)
	replaced := c.PutComposition(composition("web"))
	assert.Equal(t, first.UID, replaced.UID, "replacing keeps the UID")
	require.NoError(t, c.DeleteComposition(first.Ref()))
	require.ErrorIs(t, c.DeleteComposition(first.Ref()), ports.ErrNotFound)
	_, err := c.GetComposition(t.Context(), first.Ref())
	require.ErrorIs(t, err, ports.ErrNotFound)
	second := c.PutComposition(composition("web"))
	assert.NotEqual(t, first.UID, second.UID)

	given := composition("api")
	given.UID = "given-uid"
	assert.Equal(t, "given-uid", c.PutComposition(given).UID)
}

func TestUpdateComposition(t *testing.T) {
	c := memory.NewCluster(inventoryNamespace)
	ctx := t.Context()
	comp := c.PutComposition(composition("web"))
	comp.Labels = map[string]string{"shard": "b"}
	updated, err := c.UpdateComposition(comp)
	require.NoError(t, err)
	assert.NotEqual(t, comp.ResourceVersion, updated.ResourceVersion)
	assert.Equal(t, "b", updated.Labels["shard"])

	_, err = c.UpdateComposition(comp)
	require.ErrorIs(t, err, ports.ErrConflict, "stale resourceVersion")
	other := updated
	other.UID = "someone-else"
	_, err = c.UpdateComposition(other)
	require.ErrorIs(t, err, ports.ErrConflict, "UID is immutable")
	missing := composition("missing")
	missing.ResourceVersion = "1"
	_, err = c.UpdateComposition(missing)
	require.ErrorIs(t, err, ports.ErrNotFound)

	deleting, err := c.MarkCompositionDeleting(updated.Ref())
	require.NoError(t, err)
	assert.True(t, deleting.Deleting)
	deleting.Deleting = false
	again, err := c.UpdateComposition(deleting)
	require.NoError(t, err)
	assert.True(t, again.Deleting, "an update cannot undo a deletion")

	annotated, err := c.SetAnnotation(updated.Ref(), domain.AnnotationReview, "approve:x")
	require.NoError(t, err)
	assert.Equal(t, "approve:x", annotated.Annotations[domain.AnnotationReview])
	live, err := c.LiveComposition(ctx, updated.Ref())
	require.NoError(t, err)
	assert.Equal(t, annotated, live)
	_, err = c.SetAnnotation(missing.Ref(), "k", "v")
	require.ErrorIs(t, err, ports.ErrNotFound)
	_, err = c.MarkCompositionDeleting(missing.Ref())
	require.ErrorIs(t, err, ports.ErrNotFound)
	assert.Len(t, c.Compositions(), 1)
}

func TestWriteDecisionWithoutResourceVersionIsAConflict(t *testing.T) {
	c := memory.NewCluster(inventoryNamespace)
	comp := c.PutComposition(composition("web"))
	comp.ResourceVersion = ""
	err := c.WriteDecision(t.Context(), comp, domain.Decision{SynthesisUUID: "x", Outcome: domain.OutcomeNoInventory})
	require.ErrorIs(t, err, ports.ErrConflict)
}

func TestSlicesAdmin(t *testing.T) {
	c := memory.NewCluster(inventoryNamespace)
	ctx := t.Context()
	c.PutSlice(domain.ResourceSlice{Namespace: "team-a", Name: "s1", SynthesisUUID: "u"})
	c.PutSlice(domain.ResourceSlice{Namespace: "team-a", Name: "s0", SynthesisUUID: "u"})
	c.PutSlice(domain.ResourceSlice{Namespace: "team-b", Name: "s0", SynthesisUUID: "u"})
	require.NoError(t, c.MarkSliceDeleting("team-a", "s0"))
	got, err := c.GetSlice(ctx, "team-a", "s0")
	require.NoError(t, err)
	assert.True(t, got.Deleting)
	names := func(ss []domain.ResourceSlice) (out []string) {
		for _, s := range ss {
			out = append(out, s.Namespace+"/"+s.Name)
		}
		return out
	}
	assert.Equal(t, []string{"team-a/s0", "team-a/s1"}, names(c.Slices("team-a")))
	assert.Equal(t, []string{"team-a/s0", "team-a/s1", "team-b/s0"}, names(c.Slices("")))
	require.NoError(t, c.DeleteSlice("team-a", "s0"))
	require.ErrorIs(t, c.DeleteSlice("team-a", "s0"), ports.ErrNotFound)
	require.ErrorIs(t, c.MarkSliceDeleting("team-a", "s0"), ports.ErrNotFound)
	_, err = c.GetSlice(ctx, "team-a", "s0")
	require.ErrorIs(t, err, ports.ErrNotFound)
	assert.Empty(t, c.SliceOwner("team-a", "s1"), "slices Eno writes have no owner here")
}

func TestCreateRecoverySlice(t *testing.T) {
	handoffFor := func(comp domain.Composition, names ...string) domain.Handoff {
		ts := make([]domain.Tombstone, len(names))
		for i, n := range names {
			ts[i] = domain.Tombstone{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: n}, UID: testUID}
		}
		h, err := domain.NewHandoff(domain.RecoveryPlan{
			Decision:       domain.Decision{SynthesisUUID: comp.SynthesisUUID(), Outcome: domain.OutcomeRecovered, Tombstones: len(ts)},
			Tombstones:     ts,
			HistoryWritten: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC),
		})
		require.NoError(t, err)
		return h
	}

	t.Run("refuses a Composition without synthesis or UID, or a hand-off for another synthesis", func(t *testing.T) {
		c := memory.NewCluster(inventoryNamespace)
		comp := c.PutComposition(composition("web"))
		h := handoffFor(comp, "old")
		noSynthesis := comp
		noSynthesis.Synthesis = nil
		_, err := c.CreateRecoverySlice(t.Context(), noSynthesis, h, 0)
		require.Error(t, err)
		noUID := comp
		noUID.UID = ""
		_, err = c.CreateRecoverySlice(t.Context(), noUID, h, 0)
		require.Error(t, err)
		other := h
		other.Decision.SynthesisUUID = "another"
		_, err = c.CreateRecoverySlice(t.Context(), comp, other, 0)
		require.Error(t, err)
		assert.Empty(t, c.Slices(""))
	})

	t.Run("refuses a terminating slice and one owned by another incarnation", func(t *testing.T) {
		c := memory.NewCluster(inventoryNamespace)
		old := c.PutComposition(composition("web"))
		name, err := c.CreateRecoverySlice(t.Context(), old, handoffFor(old, "old"), 0)
		require.NoError(t, err)

		require.NoError(t, c.DeleteComposition(old.Ref()))
		recreated := c.PutComposition(composition("web")) // same synthesis UUID only in this test
		_, err = c.CreateRecoverySlice(t.Context(), recreated, handoffFor(recreated, "old"), 0)
		require.ErrorIs(t, err, ports.ErrAlreadyExists, "the old incarnation's slice is never taken")
		assert.Equal(t, old.UID, c.SliceOwner("team-a", name))

		require.NoError(t, c.MarkSliceDeleting("team-a", name))
		_, err = c.CreateRecoverySlice(t.Context(), old, handoffFor(old, "old"), 0)
		require.ErrorIs(t, err, ports.ErrAlreadyExists)
	})

	t.Run("naming clears readiness, as Eno does for a slice without status", func(t *testing.T) {
		c := memory.NewCluster(inventoryNamespace)
		comp := c.PutComposition(composition("web"))
		require.True(t, comp.Synthesis.Ready)
		name, err := c.CreateRecoverySlice(t.Context(), comp, handoffFor(comp, "old"), 0)
		require.NoError(t, err)
		named, err := c.AppendRecoverySlice(t.Context(), comp, name)
		require.NoError(t, err)
		live, err := c.LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.False(t, live.Synthesis.Ready)
		assert.Equal(t, live, named)
	})
}

func TestBeforeWriteHook(t *testing.T) {
	c := memory.NewCluster(inventoryNamespace)
	ctx := t.Context()
	comp := c.PutComposition(composition("web"))
	injected := errors.New("injected API error")
	var ops []string
	c.SetBeforeWrite(func(op, name string) error {
		ops = append(ops, op+" "+name)
		return injected
	})
	_, err := c.CreateChunk(ctx, chunk("a-0", "a", "[]"))
	require.ErrorIs(t, err, injected)
	_, err = c.UpdateChunk(ctx, chunk("a-0", "a", "[]"))
	require.ErrorIs(t, err, injected)
	require.ErrorIs(t, c.WriteDecision(ctx, comp, domain.Decision{SynthesisUUID: "x", Outcome: domain.OutcomeNoInventory}), injected)
	h := domain.Handoff{Decision: domain.Decision{SynthesisUUID: comp.SynthesisUUID()}, Resources: []domain.SliceResource{{Manifest: "{}", Deleted: true}}, Digest: "0123456789abcdef"}
	_, err = c.CreateRecoverySlice(ctx, comp, h, 0)
	require.ErrorIs(t, err, injected)
	assert.Equal(t, []string{
		memory.OpCreateChunk + " kube-system/a-0",
		memory.OpUpdateChunk + " kube-system/a-0",
		memory.OpWriteDecision + " team-a/web",
		memory.OpCreateRecoverySlice + " team-a/" + domain.RecoverySliceName("web", comp.SynthesisUUID(), h.Digest, 0),
	}, ops)
	assert.Empty(t, c.Secrets())
	assert.Empty(t, c.Slices(""))

	// The hook runs unlocked, so it can change the Cluster: here the Composition is recreated
	// between the caller's read and its write, and the write sees the conflict.
	c.SetBeforeWrite(func(op, _ string) error {
		if op == memory.OpWriteDecision {
			require.NoError(t, c.DeleteComposition(comp.Ref()))
			c.PutComposition(composition("web"))
		}
		return nil
	})
	require.ErrorIs(t, c.WriteDecision(ctx, comp, domain.Decision{SynthesisUUID: "x", Outcome: domain.OutcomeNoInventory}), ports.ErrConflict)

	c.SetBeforeWrite(nil)
	_, err = c.CreateChunk(ctx, chunk("a-0", "a", "[]"))
	require.NoError(t, err)
}

func TestCancelledContextFailsEveryPort(t *testing.T) {
	c := memory.NewCluster(inventoryNamespace)
	comp := c.PutComposition(composition("web"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.ListChunks(ctx, mustLineage(t, "a"))
	require.ErrorIs(t, err, context.Canceled)
	_, err = c.CreateChunk(ctx, chunk("a-0", "a", "[]"))
	require.ErrorIs(t, err, context.Canceled)
	_, err = c.GetComposition(ctx, comp.Ref())
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, c.WriteDecision(ctx, comp, domain.Decision{}), context.Canceled)
	_, err = c.GetSlice(ctx, "team-a", "s0")
	require.ErrorIs(t, err, context.Canceled)
	_, err = c.CreateRecoverySlice(ctx, comp, domain.Handoff{Decision: domain.Decision{SynthesisUUID: comp.SynthesisUUID()}, Resources: []domain.SliceResource{{Manifest: "{}", Deleted: true}}, Digest: "0123456789abcdef"}, 0)
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, c.Secrets())
}

func TestEvents(t *testing.T) {
	c := memory.NewCluster(inventoryNamespace)
	comp := composition("web")
	c.Normal(comp, "Recorded", "snapshot written")
	c.Warning(comp, "InventoryInvalid", "missing chunk")
	events := c.Events()
	assert.Equal(t, []memory.Event{
		{Composition: comp.Ref(), Reason: "Recorded", Message: "snapshot written"},
		{Composition: comp.Ref(), Warning: true, Reason: "InventoryInvalid", Message: "missing chunk"},
	}, events)
	events[0].Reason = "mutated"
	assert.Equal(t, "Recorded", c.Events()[0].Reason)
}

func TestConcurrentUseIsSafe(t *testing.T) {
	c := memory.NewCluster(inventoryNamespace)
	comp := c.PutComposition(composition("web"))
	lineage := mustLineage(t, "a")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			_, _ = c.ListChunks(context.Background(), lineage)
			_, _ = c.LiveComposition(context.Background(), comp.Ref())
			c.Normal(comp, "r", "m")
		}
	}()
	for i := range 100 {
		_, err := c.PutSecret(chunk("a-"+strconv.Itoa(i), "a", "[]"))
		require.NoError(t, err)
	}
	<-done
	assert.Len(t, c.Secrets(), 100)
	assert.Len(t, c.Events(), 100)
}
