package reliability_test

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
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

// verdict is what design §5 reads in the state a crash left behind.
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
	// passHandoff: the Composition was recreated (new UID) with new resources; the pass hands
	// the orphans' tombstones to Eno (design §6.2): publish the recovery slice, commit it to the
	// synthesis, write the Recovered decision, ensure the slice, request a resynthesis. It
	// records nothing: a synthesis decided Recovered is never recorded.
	passHandoff = "hand-off"
	// passRecordAfterHandoff: after a complete hand-off, Eno's next synthesis (carrying the
	// tombstones) was reconciled downstream; the pass decides it (AlreadyDecided), then
	// replaces the snapshot chunk by chunk.
	passRecordAfterHandoff = "record after hand-off"
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
	case "":
	default:
		where = fmt.Sprintf("at write %d (%s)", p.failAt, p.op)
	}
	return fmt.Sprintf("%s %s crash %s", p.pass, p.shape.name, where)
}

// handoffPoints are the write positions of the hand-off pass, the same for every shape: the
// old snapshot is all there is until Eno's next synthesis is recorded.
func handoffPoints(sh shape) []crashPoint {
	return []crashPoint{
		{passHandoff, sh, 0, memory.OpArmTombstones, -1, readsOld},
		{passHandoff, sh, 1, memory.OpCreateRecoverySlice, -1, readsOld},
		{passHandoff, sh, 2, memory.OpAppendRecoverySlice, -1, readsOld},
		{passHandoff, sh, 3, memory.OpWriteDecision, -1, readsOld},
		{passHandoff, sh, 4, memory.OpRequestResynthesis, -1, readsOld},
		{passHandoff, sh, 5, "", -1, readsOld},
	}
}

// replacementPoints are the write positions of a pass that decides, then replaces the
// snapshot of shape sh.
func replacementPoints(pass string, sh shape) []crashPoint {
	switch sh {
	case oneToThree:
		return []crashPoint{
			{pass, sh, 0, memory.OpWriteDecision, -1, readsOld},
			{pass, sh, 1, memory.OpUpdateChunk, 0, readsOld},
			{pass, sh, 2, memory.OpCreateChunk, 1, readsInvalid},
			{pass, sh, 3, memory.OpCreateChunk, 2, readsInvalid},
			{pass, sh, 4, "", -1, readsNew},
		}
	case threeToOne:
		return []crashPoint{
			{pass, sh, 0, memory.OpWriteDecision, -1, readsOld},
			{pass, sh, 1, memory.OpUpdateChunk, 0, readsOld},
			{pass, sh, 2, "", -1, readsNew}, // chunks 1 and 2 of the old snapshot are left over, and ignored
		}
	case threeToThree:
		return []crashPoint{
			{pass, sh, 0, memory.OpWriteDecision, -1, readsOld},
			{pass, sh, 1, memory.OpUpdateChunk, 0, readsOld},
			{pass, sh, 2, memory.OpUpdateChunk, 1, readsInvalid},
			{pass, sh, 3, memory.OpUpdateChunk, 2, readsInvalid},
			{pass, sh, 4, "", -1, readsNew},
		}
	}
	panic("unknown shape " + sh.name)
}

// afterHandoffPoints are replacementPoints with the hand-off's end between the decision and the
// first chunk: the carrying synthesis is Ready, so its arming annotation becomes "done".
func afterHandoffPoints(sh shape) []crashPoint {
	points := replacementPoints(passRecordAfterHandoff, sh)
	out := []crashPoint{points[0], {passRecordAfterHandoff, sh, 1, memory.OpArmTombstones, -1, readsOld}}
	for _, p := range points[1:] {
		p.failAt++
		out = append(out, p)
	}
	return out
}

var (
	crashPasses = []string{passReplace, passHandoff, passRecordAfterHandoff}
	crashShapes = []shape{oneToThree, threeToOne, threeToThree}
)

// crashPoints enumerates every write position of every pass and shape, plus "after the last".
var crashPoints = func() []crashPoint {
	var out []crashPoint
	for _, pass := range crashPasses {
		for _, sh := range crashShapes {
			switch pass {
			case passHandoff:
				out = append(out, handoffPoints(sh)...)
			case passRecordAfterHandoff:
				out = append(out, afterHandoffPoints(sh)...)
			default:
				out = append(out, replacementPoints(pass, sh)...)
			}
		}
	}
	return out
}()

// The table has no gaps: every pass and shape has the positions 0..n, the last one "after the
// last write" and only that one. crash checks each position against the writes the pass
// really attempts, and the last one against their count.
func TestCrashPointsCoverEveryWritePosition(t *testing.T) {
	for _, pass := range crashPasses {
		for _, sh := range crashShapes {
			var got []int
			var ops []string
			for _, p := range crashPoints {
				if p.pass == pass && p.shape == sh {
					got = append(got, p.failAt)
					ops = append(ops, p.op)
				}
			}
			require.NotEmpty(t, got, "%s %s has no crash points", pass, sh.name)
			want := make([]int, len(got))
			for i := range want {
				want[i] = i
			}
			assert.Equal(t, want, got, "%s %s: positions in order, without gaps", pass, sh.name)
			assert.Empty(t, ops[len(ops)-1], "%s %s ends after the last write", pass, sh.name)
			assert.NotContains(t, ops[:len(ops)-1], "", "%s %s: only the last point is after the last write", pass, sh.name)
		}
	}
	var handoffOps []string
	for _, p := range handoffPoints(oneToThree) {
		handoffOps = append(handoffOps, p.op)
	}
	assert.Equal(t, []string{memory.OpArmTombstones, memory.OpCreateRecoverySlice, memory.OpAppendRecoverySlice, memory.OpWriteDecision,
		memory.OpRequestResynthesis, ""}, handoffOps, "every write of the hand-off (design §6.2)")
}

// crashed is the state a crash left behind.
type crashed struct {
	w     *world
	first domain.Composition // the old incarnation's synthesis, recorded
	// second is the synthesis the crashed pass or its hand-off started from: the same
	// incarnation resynthesized, or the recreated one.
	second domain.Composition
	// next is the synthesis whose snapshot the crashed pass writes: second for a replacement,
	// Eno's synthesis after the hand-off for passRecordAfterHandoff; zero for passHandoff.
	next               domain.Composition
	oldNames, newNames []string
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
		c.next = c.second
	case passHandoff, passRecordAfterHandoff:
		c.second = w.recreate(crashRef, true, c.newNames...)
		require.NotEqual(t, c.first.UID, c.second.UID)
		assert.Equal(t, cmIDs(crashRef.Namespace, append(slices.Clone(c.oldNames), c.newNames[:len(c.newNames)-1]...)...),
			w.downstream(crashRef.Namespace), "the old incarnation's resources are orphaned downstream")
	}
	if p.pass == passRecordAfterHandoff {
		_, err = w.service().Reconcile(ctx, crashRef)
		require.NoError(t, err)
		d, ok := w.live(crashRef).FinishedDecision()
		require.True(t, ok)
		require.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
		did, err := w.enoFollows(crashRef)
		require.NoError(t, err)
		require.True(t, did, "the hand-off asked Eno for a new synthesis")
		c.next = w.live(crashRef)
		require.True(t, c.next.Synthesis.Ready)
	}
	downstreamBefore := w.downstream(crashRef.Namespace)

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
	assert.Equal(t, downstreamBefore, w.downstream(crashRef.Namespace), "the controller never deletes downstream; only Eno does")

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
	case memory.OpWriteDecision, memory.OpArmTombstones, memory.OpAppendRecoverySlice, memory.OpRequestResynthesis:
		want = crashRef.String()
	case memory.OpCreateRecoverySlice:
		family := crashRef.Namespace + "/" + domain.RecoverySliceFamily(crashRef.Name, c.second.SynthesisUUID())
		require.True(t, strings.HasPrefix(attempted[p.failAt], p.op+" "+family+"-"), "the write the crash hit: %s", attempted[p.failAt])
		return c
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
					assert.Equal(t, c.next.SynthesisUUID(), snap.SynthesisUUID())
					assert.Equal(t, c.next.UID, snap.CompositionUID())
				case readsInvalid:
					reason, ok := domain.InvalidReasonOf(err)
					require.True(t, ok, "a half-written replacement reads as InventoryInvalid, got %v", err)
					assert.Equal(t, domain.ReasonMissingChunk, reason)
				}
				live := c.w.live(crashRef)
				// A decision never points at nothing, and a Recovered one at a slice its synthesis names.
				if d, ok := live.Decision(); ok && d.TombstoneSlice != "" {
					require.Len(t, c.w.recoverySlices(), 1)
					assert.Equal(t, d.TombstoneSlice, c.w.recoverySlices()[0].Name)
					if d.SynthesisUUID == live.SynthesisUUID() {
						assert.True(t, live.NamesSlice(d.TombstoneSlice), "the synthesis names the slice its decision points at")
					}
				}
				// Once a recovery slice is named the synthesis is not Ready, as soon as Eno's slice
				// status sees it, until Eno's next one is.
				if len(live.NamedRecoverySlices()) > 0 {
					c.w.enoSliceStatus(crashRef)
					live = c.w.live(crashRef)
					assert.False(t, live.Synthesis.Ready, "naming a slice cleared Ready, as Eno does")
				}
				assert.Empty(t, c.w.audit.recordedRecovered(), "a synthesis decided Recovered is never recorded")
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
// (the old or the new one alone) or as InventoryInvalid, that it tombstoned exactly the absent
// entries whose objects are still downstream (design §6.3: an object Eno already deleted, by its
// own diff or through an earlier hand-off, is NotFound and dropped), and that Eno then deleted
// exactly those.
func recoverRecreated(t *testing.T, c crashed, after verdict) {
	ctx := logr.NewContext(t.Context(), testr.New(t))
	w := c.w
	slicesBefore := w.recoverySlices()
	third := w.recreate(crashRef, true, "shared", "fresh")
	downstreamBefore := w.downstream(crashRef.Namespace)
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
	for _, s := range slicesBefore {
		assert.Equal(t, s.ControllerUID, c.second.UID, "the recovery slices left were the recreated incarnation's")
	}
	assert.Len(t, w.recoverySlices(), len(published), "those were collected with it; no other recovery slice was written")

	var from domain.Composition
	var fromNames []string
	switch after {
	case readsInvalid:
		assert.Equal(t, domain.OutcomeInventoryInvalid, d.Outcome)
		assert.Equal(t, domain.ReasonMissingChunk.String(), d.Reason)
		assert.Zero(t, d.Tombstones)
		assert.Empty(t, d.TombstoneSlice)
		assert.Empty(t, published, "no tombstones from untrusted history")
		w.settle(ctx, w.service(), crashRef)
		assert.Equal(t, downstreamBefore, w.downstream(crashRef.Namespace), "nothing is deleted on untrusted history")
		assert.Empty(t, w.badDeletions())
		return
	case readsOld:
		from, fromNames = c.first, c.oldNames
	case readsNew:
		from, fromNames = c.next, c.newNames
	}
	absent := cmIDs(crashRef.Namespace, minus(fromNames, []string{"shared", "fresh"})...)
	want := slices.DeleteFunc(slices.Clone(absent), func(id string) bool { return !slices.Contains(downstreamBefore, id) })
	assert.Equal(t, from.SynthesisUUID(), d.SourceSynthesisUUID, "the snapshot recovery read")
	if gone := len(absent) - len(want); gone > 0 {
		assert.Contains(t, d.Message, fmt.Sprintf("dropped %d: %d NotFound", gone, gone), "the objects Eno already deleted are dropped, and the message says so")
	}
	if len(want) == 0 {
		assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome, d.Message)
		assert.Equal(t, domain.ReasonNoOrphans, d.Reason, "every absent entry's object is gone: nothing is left to delete")
		assert.Zero(t, d.Tombstones)
		assert.Empty(t, published, "no tombstone for an object that no longer exists")
		w.settle(ctx, w.service(), crashRef)
		assert.Equal(t, downstreamBefore, w.downstream(crashRef.Namespace), "nothing more is deleted")
		assert.Empty(t, w.badDeletions())
		return
	}
	require.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
	require.Len(t, published, 1)
	assert.Equal(t, published[0].Name, d.TombstoneSlice)
	assert.Equal(t, len(want), d.Tombstones)
	assert.Equal(t, want, tombstoneIDs(t, published[0]), "tombstones come from the %s alone", after)

	// Eno's next synthesis carries the tombstones and deletes exactly those objects.
	w.settle(ctx, w.service(), crashRef)
	assert.Equal(t, minus(downstreamBefore, want), w.downstream(crashRef.Namespace), "Eno deleted exactly the tombstoned objects")
	assert.Empty(t, w.badDeletions())
	assert.Empty(t, w.audit.recordedRecovered(), "a synthesis decided Recovered is never recorded")
}

// completeAfterCrash runs the next normal passes of the same Composition, with Eno reacting to
// them, and checks that they leave the newest synthesis's snapshot complete, a decision for
// every synthesis written once, and downstream exactly what the Composition produces.
func completeAfterCrash(t *testing.T, c crashed, p crashPoint) {
	ctx := logr.NewContext(t.Context(), testr.New(t))
	w := c.w
	slicesAfterCrash := w.recoverySlices()
	w.settle(ctx, w.service(), crashRef)

	live := w.live(crashRef)
	assert.Equal(t, w.lastSynthesis(crashRef), live.SynthesisUUID(), "nothing but Eno makes syntheses")
	snap, err := w.readSnapshot(crashLineage)
	require.NoError(t, err)
	assert.Equal(t, live.SynthesisUUID(), snap.SynthesisUUID())
	assert.Equal(t, c.second.UID, snap.CompositionUID())
	assert.Equal(t, p.shape.newChunks, snap.Meta().ChunkCount, "the new snapshot's chunk count")
	assert.True(t, domain.SnapshotMatches(snap, live))
	var got []string
	for _, e := range snap.Inventory().Entries() {
		got = append(got, e.ID().String())
	}
	sort.Strings(got)
	assert.Equal(t, cmIDs(crashRef.Namespace, c.newNames...), got)

	finished := w.audit.finishedDecisions()
	assert.Equal(t, 1, finished[[2]string{c.second.UID, c.second.SynthesisUUID()}],
		"exactly one finished decision for the new synthesis, across the crash and the retry")
	d, ok := live.FinishedDecision()
	require.True(t, ok)
	assert.Equal(t, c.first.SynthesisUUID(), d.SourceSynthesisUUID)
	switch p.pass {
	case passReplace:
		assert.Equal(t, c.second.SynthesisUUID(), live.SynthesisUUID())
		assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome)
		assert.Equal(t, domain.ReasonSameIncarnation, d.Reason)
		assert.Empty(t, w.recoverySlices())
	case passHandoff, passRecordAfterHandoff:
		// The recreated synthesis was decided Recovered and never recorded; Eno's next one,
		// which carried the tombstones, was decided once more and recorded.
		require.NotEqual(t, c.second.SynthesisUUID(), live.SynthesisUUID(), "Eno made its next synthesis")
		assert.Equal(t, 1, finished[[2]string{live.UID, live.SynthesisUUID()}], "one finished decision for Eno's next synthesis")
		assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome, d.Message)
		assert.Equal(t, domain.ReasonAlreadyDecided, d.Reason)
		assert.Equal(t, c.first.SynthesisUUID(), d.RecoveredFrom)
		var recovered []domain.Decision
		for _, r := range w.audit.report().decisions {
			if r.Decision.Outcome == domain.OutcomeRecovered {
				recovered = append(recovered, r.Decision)
			}
		}
		require.Len(t, recovered, 1, "one Recovered decision, for the recreated synthesis")
		assert.Equal(t, c.second.SynthesisUUID(), recovered[0].SynthesisUUID)
		recovery := w.recoverySlices()
		require.Len(t, recovery, 1, "a retried hand-off reuses its slice")
		if len(slicesAfterCrash) == 1 {
			assert.Equal(t, slicesAfterCrash[0].Resources, recovery[0].Resources, "the slice created before the crash is reused unchanged")
			assert.Equal(t, slicesAfterCrash[0].Annotations, recovery[0].Annotations, "the slice created before the crash is reused unchanged")
		}
		want := cmIDs(crashRef.Namespace, minus(c.oldNames, c.newNames)...)
		assert.Equal(t, recovery[0].Name, recovered[0].TombstoneSlice)
		assert.Equal(t, len(want), recovered[0].Tombstones)
		assert.Equal(t, want, tombstoneIDs(t, recovery[0]))
		assert.Equal(t, live.Annotations[domain.AnnotationForceResynthesis], c.second.SynthesisUUID(),
			"the resynthesis was requested for the decided synthesis, never a newer one")
	}
	assert.Empty(t, w.audit.recordedRecovered(), "a synthesis decided Recovered is never recorded")
	// Eno deleted exactly the orphans: what the old incarnation deployed and the new one does not.
	assert.Equal(t, cmIDs(crashRef.Namespace, c.newNames...), w.downstream(crashRef.Namespace))
	assert.Empty(t, w.badDeletions())

	// Complete means complete: the pass after that is the fast path and writes nothing.
	before := w.audit.writes()
	res, err := w.service().Reconcile(ctx, crashRef)
	require.NoError(t, err)
	require.NotNil(t, res.Recording)
	assert.True(t, res.Recording.Unchanged)
	assert.Equal(t, before, w.audit.writes())
	did, err := w.enoFollows(crashRef)
	require.NoError(t, err)
	assert.False(t, did, "no resynthesis loop")
	assert.Empty(t, w.audit.report().unguarded)
}
