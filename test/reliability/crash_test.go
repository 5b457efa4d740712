package reliability_test

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// crashChunkBytes fits 3 of the scenarios' inventory entries per chunk: 3 resources make one
// chunk, 8 make three. The scenarios assert the counts, so a drift in sizes fails loudly.
const crashChunkBytes = 512

var (
	crashRef     = domain.CompositionRef{Namespace: "team-a", Name: "web"}
	crashLineage = domain.DefaultLineage(crashRef.Namespace, crashRef.Name)
	errCrash     = errors.New("controller process killed")
)

// shape is a snapshot replacement: the old synthesis's resources and chunks, then the new one's.
type shape struct {
	name                 string
	oldN, newN           int
	oldChunks, newChunks int
}

var (
	oneToThree   = shape{"1→3", 3, 8, 1, 3}
	threeToOne   = shape{"3→1", 8, 3, 3, 1}
	threeToThree = shape{"3→3", 8, 8, 3, 3}
)

// verdict is what SPEC §5 reads in the state a crash left behind.
type verdict string

const (
	readsOld     verdict = "old snapshot"
	readsNew     verdict = "new snapshot"
	readsInvalid verdict = "InventoryInvalid"
)

// The pass that crashes.
const (
	// passReplace: the same incarnation resynthesized; the pass decides (SameIncarnation),
	// then replaces the snapshot chunk by chunk.
	passReplace = "replace"
	// passRecreate: the Composition was recreated (new UID) with new resources; the pass
	// publishes tombstones, writes the decision, then replaces the snapshot.
	passRecreate = "recreate"
)

// crashPoint fails write number failAt of the pass (counting from 0) and every write after it,
// as a killed process would. op and chunk name that write; op "" means the pass has exactly
// failAt writes and completes: the crash comes after the last one.
type crashPoint struct {
	pass   string
	shape  shape
	failAt int
	op     string
	chunk  int
	after  verdict
}

func (p crashPoint) String() string {
	where := "after the last write"
	switch p.op {
	case memory.OpCreateChunk, memory.OpUpdateChunk:
		where = fmt.Sprintf("at write %d (%s of chunk %d)", p.failAt, p.op, p.chunk)
	case memory.OpWriteDecision, memory.OpPublishTombstones:
		where = fmt.Sprintf("at write %d (%s)", p.failAt, p.op)
	}
	return fmt.Sprintf("%s %s crash %s", p.pass, p.shape.name, where)
}

// crashPoints enumerates every write position of every replacement, plus "after the last".
var crashPoints = []crashPoint{
	{passReplace, oneToThree, 0, memory.OpWriteDecision, -1, readsOld},
	{passReplace, oneToThree, 1, memory.OpUpdateChunk, 0, readsOld},
	{passReplace, oneToThree, 2, memory.OpCreateChunk, 1, readsInvalid},
	{passReplace, oneToThree, 3, memory.OpCreateChunk, 2, readsInvalid},
	{passReplace, oneToThree, 4, "", -1, readsNew},

	{passReplace, threeToOne, 0, memory.OpWriteDecision, -1, readsOld},
	{passReplace, threeToOne, 1, memory.OpUpdateChunk, 0, readsOld},
	{passReplace, threeToOne, 2, "", -1, readsNew}, // chunks 1 and 2 of the old snapshot are left over, and ignored

	{passReplace, threeToThree, 0, memory.OpWriteDecision, -1, readsOld},
	{passReplace, threeToThree, 1, memory.OpUpdateChunk, 0, readsOld},
	{passReplace, threeToThree, 2, memory.OpUpdateChunk, 1, readsInvalid},
	{passReplace, threeToThree, 3, memory.OpUpdateChunk, 2, readsInvalid},
	{passReplace, threeToThree, 4, "", -1, readsNew},

	// Write 1 of these is the crash between publishing tombstones and writing the decision.
	{passRecreate, oneToThree, 0, memory.OpPublishTombstones, -1, readsOld},
	{passRecreate, oneToThree, 1, memory.OpWriteDecision, -1, readsOld},
	{passRecreate, oneToThree, 2, memory.OpUpdateChunk, 0, readsOld},
	{passRecreate, oneToThree, 3, memory.OpCreateChunk, 1, readsInvalid},
	{passRecreate, oneToThree, 4, memory.OpCreateChunk, 2, readsInvalid},
	{passRecreate, oneToThree, 5, "", -1, readsNew},

	{passRecreate, threeToOne, 0, memory.OpPublishTombstones, -1, readsOld},
	{passRecreate, threeToOne, 1, memory.OpWriteDecision, -1, readsOld},
	{passRecreate, threeToOne, 2, memory.OpUpdateChunk, 0, readsOld},
	{passRecreate, threeToOne, 3, "", -1, readsNew},

	{passRecreate, threeToThree, 0, memory.OpPublishTombstones, -1, readsOld},
	{passRecreate, threeToThree, 1, memory.OpWriteDecision, -1, readsOld},
	{passRecreate, threeToThree, 2, memory.OpUpdateChunk, 0, readsOld},
	{passRecreate, threeToThree, 3, memory.OpUpdateChunk, 1, readsInvalid},
	{passRecreate, threeToThree, 4, memory.OpUpdateChunk, 2, readsInvalid},
	{passRecreate, threeToThree, 5, "", -1, readsNew},
}

// crashed is the state a crash left behind.
type crashed struct {
	w             *world
	first, second domain.Composition // the incarnation and synthesis before and during the crashed pass
	oldNames      []string
	newNames      []string
}

func names(prefix string, n int) []string {
	out := make([]string, 0, n)
	for i := range n - 1 {
		out = append(out, fmt.Sprintf("%s-%02d", prefix, i))
	}
	// One resource every synthesis produces, so no snapshot is all tombstones.
	return append(out, "shared")
}

// crash records the old snapshot, starts the pass and kills it at p.
func crash(t *testing.T, p crashPoint) crashed {
	t.Helper()
	ctx := logr.NewContext(t.Context(), testr.New(t))
	// The deletion guard is off: these scenarios are about which history is read, and the
	// recreated Compositions below drop almost everything on purpose.
	w := newWorld(t, crashChunkBytes, 1.0)
	c := crashed{w: w, oldNames: names("old", p.shape.oldN), newNames: names("new", p.shape.newN)}

	c.first = w.create(crashRef, true, c.oldNames...)
	_, err := w.service().Reconcile(ctx, crashRef)
	require.NoError(t, err)
	snap, err := w.readSnapshot(crashLineage)
	require.NoError(t, err)
	require.Equal(t, c.first.SynthesisUUID(), snap.SynthesisUUID())
	require.Equal(t, p.shape.oldChunks, snap.Meta().ChunkCount, "the old snapshot's chunk count")

	switch p.pass {
	case passReplace:
		c.second, err = w.resynthesize(crashRef, true, c.newNames...)
		require.NoError(t, err)
	case passRecreate:
		c.second = w.recreate(crashRef, true, c.newNames...)
		require.NotEqual(t, c.first.UID, c.second.UID)
	}

	var mu sync.Mutex
	var attempted []string
	w.cluster.SetBeforeWrite(func(op, name string) error {
		mu.Lock()
		defer mu.Unlock()
		attempted = append(attempted, op+" "+name)
		if len(attempted) > p.failAt {
			return errCrash
		}
		return nil
	})
	_, err = w.service().Reconcile(ctx, crashRef)
	w.cluster.SetBeforeWrite(nil)

	if p.op == "" {
		require.NoError(t, err)
		require.Len(t, attempted, p.failAt, "the table names every write of the pass: %v", attempted)
		return c
	}
	require.ErrorIs(t, err, errCrash)
	require.Len(t, attempted, p.failAt+1, "a crashed pass attempts nothing after the failed write: %v", attempted)
	var want string
	switch p.op {
	case memory.OpCreateChunk, memory.OpUpdateChunk:
		want = inventoryNamespace + "/" + domain.ChunkName(crashRef.Name, crashLineage, p.chunk)
	case memory.OpWriteDecision:
		want = crashRef.String()
	case memory.OpPublishTombstones:
		want = crashRef.Namespace + "/" + domain.RecoverySliceName(crashRef.Name, c.second.SynthesisUUID())
	}
	require.Equal(t, p.op+" "+want, attempted[p.failAt], "the write the crash hit")
	return c
}

func TestCrashDuringSnapshotReplacement(t *testing.T) {
	for _, p := range crashPoints {
		t.Run(p.String(), func(t *testing.T) {
			t.Run("state left behind", func(t *testing.T) {
				c := crash(t, p)
				snap, err := c.w.readSnapshot(crashLineage)
				switch p.after {
				case readsOld:
					require.NoError(t, err)
					assert.Equal(t, c.first.SynthesisUUID(), snap.SynthesisUUID())
					assert.Equal(t, c.first.UID, snap.CompositionUID())
				case readsNew:
					require.NoError(t, err)
					assert.Equal(t, c.second.SynthesisUUID(), snap.SynthesisUUID())
					assert.Equal(t, c.second.UID, snap.CompositionUID())
				case readsInvalid:
					reason, ok := domain.InvalidReasonOf(err)
					require.True(t, ok, "a half-written replacement reads as InventoryInvalid, got %v", err)
					assert.Equal(t, domain.ReasonMissingChunk, reason)
				}
				// A decision never points at nothing.
				if d, ok := c.w.live(crashRef).Decision(); ok && d.TombstoneSlice != "" {
					require.Len(t, c.w.recoverySlices(), 1)
					assert.Equal(t, d.TombstoneSlice, c.w.recoverySlices()[0].Name)
				}
			})
			t.Run("recreated composition recovers from one complete snapshot or none", func(t *testing.T) {
				c := crash(t, p)
				recoverRecreated(t, c, p.after)
			})
			t.Run("next pass completes the snapshot", func(t *testing.T) {
				c := crash(t, p)
				completeAfterCrash(t, c, p)
			})
		})
	}
}

// recoverRecreated recreates the Composition once more, with different resources, and checks
// that its recovery read the history the crash left behind as exactly one complete snapshot
// (the old or the new one alone) or as InventoryInvalid.
func recoverRecreated(t *testing.T, c crashed, after verdict) {
	ctx := logr.NewContext(t.Context(), testr.New(t))
	w := c.w
	slicesBefore := w.recoverySlices()
	third := w.recreate(crashRef, true, "shared", "fresh")
	_, err := w.service().Reconcile(ctx, crashRef)
	require.NoError(t, err)

	d, ok := w.live(crashRef).Decision()
	require.True(t, ok, "recovery decided")
	require.Equal(t, third.SynthesisUUID(), d.SynthesisUUID)
	var published []domain.ResourceSlice
	for _, s := range w.recoverySlices() {
		if s.SynthesisUUID == third.SynthesisUUID() {
			published = append(published, s)
		}
	}
	assert.Len(t, w.recoverySlices(), len(slicesBefore)+len(published), "no other recovery slice was touched")

	var from domain.Composition
	var fromNames []string
	switch after {
	case readsInvalid:
		assert.Equal(t, domain.OutcomeInventoryInvalid, d.Outcome)
		assert.Equal(t, domain.ReasonMissingChunk.String(), d.Reason)
		assert.Zero(t, d.Tombstones)
		assert.Empty(t, d.TombstoneSlice)
		assert.Empty(t, published, "no tombstones from untrusted history")
		return
	case readsOld:
		from, fromNames = c.first, c.oldNames
	case readsNew:
		from, fromNames = c.second, c.newNames
	}
	want := cmIDs(crashRef.Namespace, minus(fromNames, []string{"shared", "fresh"})...)
	require.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
	assert.Equal(t, from.SynthesisUUID(), d.SourceSynthesisUUID, "the snapshot recovery read")
	require.Len(t, published, 1)
	assert.Equal(t, published[0].Name, d.TombstoneSlice)
	assert.Equal(t, len(want), d.Tombstones)
	assert.Equal(t, want, tombstoneIDs(t, published[0]), "tombstones come from the %s alone", after)
}

// completeAfterCrash runs the next normal pass of the same Composition and checks that it
// leaves the new snapshot complete and the decision for the new synthesis written once.
func completeAfterCrash(t *testing.T, c crashed, p crashPoint) {
	ctx := logr.NewContext(t.Context(), testr.New(t))
	w := c.w
	slicesAfterCrash := w.recoverySlices()
	_, err := w.service().Reconcile(ctx, crashRef)
	require.NoError(t, err)

	live := w.live(crashRef)
	snap, err := w.readSnapshot(crashLineage)
	require.NoError(t, err)
	assert.Equal(t, c.second.SynthesisUUID(), snap.SynthesisUUID())
	assert.Equal(t, c.second.UID, snap.CompositionUID())
	assert.Equal(t, p.shape.newChunks, snap.Meta().ChunkCount, "the new snapshot's chunk count")
	assert.True(t, domain.SnapshotMatches(snap, live))
	var got []string
	for _, e := range snap.Inventory().Entries() {
		got = append(got, e.ID().String())
	}
	sort.Strings(got)
	assert.Equal(t, cmIDs(crashRef.Namespace, c.newNames...), got)

	assert.Equal(t, 1, w.audit.finishedDecisions()[[2]string{c.second.UID, c.second.SynthesisUUID()}],
		"exactly one finished decision for the new synthesis, across the crash and the retry")
	d, ok := live.FinishedDecision()
	require.True(t, ok)
	assert.Equal(t, c.first.SynthesisUUID(), d.SourceSynthesisUUID)
	switch p.pass {
	case passReplace:
		assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome)
		assert.Equal(t, domain.ReasonSameIncarnation, d.Reason)
		assert.Empty(t, w.recoverySlices())
	case passRecreate:
		require.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
		recovery := w.recoverySlices()
		require.Len(t, recovery, 1, "a retried publication reuses its slice")
		if len(slicesAfterCrash) == 1 {
			assert.Equal(t, slicesAfterCrash[0], recovery[0], "the slice published before the crash is reused unchanged")
		}
		want := cmIDs(crashRef.Namespace, minus(c.oldNames, c.newNames)...)
		assert.Equal(t, recovery[0].Name, d.TombstoneSlice)
		assert.Equal(t, len(want), d.Tombstones)
		assert.Equal(t, want, tombstoneIDs(t, recovery[0]))
	}

	// Complete means complete: the pass after that is the fast path and writes nothing.
	before := w.audit.writes()
	res, err := w.service().Reconcile(ctx, crashRef)
	require.NoError(t, err)
	require.NotNil(t, res.Recording)
	assert.True(t, res.Recording.Unchanged)
	assert.Equal(t, before, w.audit.writes())
	assert.Empty(t, w.audit.report().unguarded)
}
