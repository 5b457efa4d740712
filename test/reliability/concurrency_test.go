package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

const (
	// concurrentChunkBytes spreads each synthesis's 8 resources over 3 chunks, so replacements
	// take several writes and racing instances can interleave inside one.
	concurrentChunkBytes = 512
	// publications is how many syntheses the synthesizer publishes while the controllers run;
	// every recreateEvery-th one recreates the Composition instead.
	publications  = 90
	recreateEvery = 4
	// maxPassesPerInstance bounds an instance's loop should the synthesizer stall.
	maxPassesPerInstance = 20000
	// stableRounds bounds the quiescent passes that must converge.
	stableRounds = 10
)

var concurrentRefs = []domain.CompositionRef{
	{Namespace: "team-c", Name: "alpha"},
	{Namespace: "team-c", Name: "beta"},
	{Namespace: "team-d", Name: "alpha"},
}

// generation is what synthesis number g of a Composition produces: six resources every
// synthesis keeps and two that the next synthesis drops. A recreation therefore orphans 2 of
// the 8 resources the old snapshot lists, under the deletion guard's default of one half.
func generation(g int) []string {
	out := []string{"keep-0", "keep-1", "keep-2", "keep-3", "keep-4", "keep-5"}
	return append(out, fmt.Sprintf("gen-%03d-a", g), fmt.Sprintf("gen-%03d-b", g))
}

func TestConcurrentControllers(t *testing.T) {
	for _, instances := range []int{2, 4, 8} {
		t.Run(fmt.Sprintf("%d instances", instances), func(t *testing.T) {
			runConcurrentControllers(t, instances)
		})
	}
}

// outcomes tallies what the instances' passes returned.
type outcomes struct {
	mu                                       sync.Mutex
	ok, conflict, alreadyExists, stale, gone int
	unexpected                               []string
}

func (o *outcomes) add(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var stale *app.StaleCompositionError
	var slice *domain.SliceError
	switch {
	case err == nil:
		o.ok++
	case errors.Is(err, ports.ErrConflict):
		o.conflict++
	case errors.Is(err, ports.ErrAlreadyExists):
		o.alreadyExists++
	case errors.As(err, &stale):
		o.stale++
	case errors.Is(err, ports.ErrNotFound), errors.As(err, &slice) && slice.Problem == domain.SliceTerminating:
		// The synthesizer deleted the Composition to recreate it between the recheck and a write,
		// or before its slices were read: they are being deleted with it (design §4 stops there).
		o.gone++
	default:
		o.unexpected = append(o.unexpected, err.Error())
	}
}

func runConcurrentControllers(t *testing.T, instances int) {
	w := newWorld(t, concurrentChunkBytes, domain.DefaultMaxTombstoneFraction)
	w.yield = true
	ctx := t.Context() // discards logs: thousands of passes would drown a failure's output

	latest := map[domain.CompositionRef]domain.Composition{}
	for i, ref := range concurrentRefs {
		latest[ref] = w.create(ref, true, generation(i)...)
	}

	svcs := make([]*app.Service, instances)
	for i := range svcs {
		svcs[i] = w.service()
	}

	var (
		passes      atomic.Int64
		hot         atomic.Int64 // the Composition published last: half of all passes go there
		running     atomic.Int64
		synthDone   atomic.Bool
		res         outcomes
		recreations int
		forced      int
		publishErrs []error
		wg          sync.WaitGroup
	)
	for id, svc := range svcs {
		running.Add(1)
		wg.Go(func() {
			defer running.Add(-1)
			for i := 0; i < maxPassesPerInstance && !synthDone.Load(); i++ {
				ref := concurrentRefs[(id+i)%len(concurrentRefs)]
				if i%2 == 0 {
					ref = concurrentRefs[hot.Load()]
				}
				_, err := svc.Reconcile(ctx, ref)
				res.add(err)
				passes.Add(1)
				runtime.Gosched()
			}
		})
	}
	// The synthesizer: Eno's new synthesis of a Composition, sometimes of a whole new
	// incarnation, reconciled downstream at once. After each it yields until the instances
	// made a few passes, so every synthesis meets the controllers before the next replaces it;
	// then Eno acts on every force-resynthesis annotation the controllers set (design §6.2).
	wg.Go(func() {
		defer synthDone.Store(true)
		for p := range publications {
			ref := concurrentRefs[p%len(concurrentRefs)]
			hot.Store(int64(p % len(concurrentRefs)))
			gen := len(concurrentRefs) + p
			if p%recreateEvery == recreateEvery-1 {
				latest[ref] = w.recreate(ref, true, generation(gen)...)
				recreations++
			} else {
				comp, err := w.resynthesize(ref, true, generation(gen)...)
				if err != nil {
					publishErrs = append(publishErrs, err)
					return
				}
				latest[ref] = comp
			}
			target := passes.Load() + int64(2*instances)
			for passes.Load() < target && running.Load() > 0 {
				runtime.Gosched()
			}
			for _, r := range concurrentRefs {
				did, err := w.enoFollows(r)
				if err != nil {
					publishErrs = append(publishErrs, err)
					return
				}
				if did {
					forced++
				}
			}
		}
	})
	wg.Wait()
	require.Empty(t, publishErrs)
	require.Empty(t, res.unexpected, "only conflicts, AlreadyExists, stale-Composition aborts and writes to, or slices of, a deleted Composition are expected")
	racing := w.audit.report()

	// Quiescent: every instance passes over every Composition, and Eno acts on what they asked
	// for, until a round writes nothing and Eno has nothing to do.
	stable := false
	for round := 0; round < stableRounds && !stable; round++ {
		before, failed, enoActed := w.audit.writes(), 0, false
		for _, svc := range svcs {
			for _, ref := range concurrentRefs {
				if _, err := svc.Reconcile(ctx, ref); err != nil {
					t.Logf("quiescent round %d: %v", round, err)
					failed++
				}
			}
		}
		for _, ref := range concurrentRefs {
			did, err := w.enoFollows(ref)
			require.NoError(t, err)
			if did {
				forced++
				enoActed = true
			}
		}
		stable = failed == 0 && !enoActed && w.audit.writes() == before
	}
	require.True(t, stable, "the controllers and Eno did not converge within %d quiescent rounds", stableRounds)
	final := w.audit.report()

	// The end state is each Composition's newest synthesis, recorded completely and
	// consistently. That is the last publication's, or, when it was decided Recovered (never
	// recorded), Eno's next synthesis carrying its tombstones, with the same output.
	leftovers := 0
	for _, ref := range concurrentRefs {
		live := w.live(ref)
		require.Equal(t, latest[ref].UID, live.UID, "%s", ref)
		require.Equal(t, w.lastSynthesis(ref), live.SynthesisUUID(), "%s", ref)
		if live.SynthesisUUID() != latest[ref].SynthesisUUID() {
			assert.Equal(t, latest[ref].SynthesisUUID(), live.Annotations[domain.AnnotationForceResynthesis],
				"%s: only a forced resynthesis of the last publication follows it", ref)
		}
		lineage, err := domain.LineageOf(live)
		require.NoError(t, err)
		snap, err := w.readSnapshot(lineage)
		require.NoError(t, err, "%s", ref)
		assert.True(t, domain.SnapshotMatches(snap, live), "%s: snapshot of %s/%s, composition %s/%s",
			ref, snap.CompositionUID(), snap.SynthesisUUID(), live.UID, live.SynthesisUUID())
		var got []string
		for _, e := range snap.Inventory().Entries() {
			got = append(got, e.Name)
		}
		want := generation(len(concurrentRefs) + lastPublication(ref))
		sort.Strings(want)
		assert.Equal(t, want, got, "%s", ref)
		d, decided := live.FinishedDecision()
		assert.True(t, decided, "%s: its newest synthesis has a finished decision", ref)
		assert.NotEqual(t, domain.OutcomeRecovered, d.Outcome, "%s: a Recovered synthesis is never the recorded end state", ref)

		// Eno deleted nothing a Composition still produces: all of it is downstream.
		downstream := w.downstream(ref.Namespace)
		for _, name := range want {
			assert.Contains(t, downstream, domain.ResourceID{Kind: "ConfigMap", Namespace: ref.Namespace, Name: name}.String(), "%s", ref)
		}
	}
	for _, ns := range []string{"team-c", "team-d"} {
		for _, id := range w.downstream(ns) {
			if !strings.Contains(id, "/keep-") && !producedNow(w, id) {
				leftovers++
			}
		}
	}

	// A synthesis decided Recovered is never recorded; Eno deletes only orphans.
	assert.Empty(t, w.audit.recordedRecovered())
	assert.Empty(t, w.badDeletions())

	// Every Secret update carried the resourceVersion its instance had read.
	assert.Empty(t, final.unguarded)

	// No duplicate decisions: one finished decision per incarnation and synthesis, ever.
	for key, n := range w.audit.finishedDecisions() {
		assert.Equal(t, 1, n, "composition %s synthesis %s has %d finished decisions", key[0], key[1], n)
	}

	// Every committed recovery slice belongs to the Recovered decision of its own synthesis,
	// unless Eno moved on first; every Recovered decision names its committed slice.
	recovered := 0
	for _, d := range final.decisions {
		if d.Decision.Outcome == domain.OutcomeRecovered {
			recovered++
		}
	}
	book := w.checkHandoffs(&final)
	assert.Positive(t, recovered, "recreations under way produced recoveries")
	assert.Equal(t, recovered, book.decided)

	byOutcome := map[string]int{}
	for _, d := range final.decisions {
		byOutcome[d.Decision.Outcome.String()]++
	}
	t.Logf("%d instances: %d racing passes (%d ok, %d conflicts, %d AlreadyExists, %d stale aborts, %d writes to a deleted Composition); %d publications, %d recreations, %d forced resyntheses by Eno",
		instances, passes.Load(), res.ok, res.conflict, res.alreadyExists, res.stale, res.gone, publications, recreations, forced)
	t.Logf("Eno deleted %d downstream objects (its own diffs and the tombstones handed to it), none that a Composition still produces; %d orphans were left downstream (history never recorded or untrusted)",
		len(w.deletedObjects()), leftovers)
	t.Logf("store while racing: %d creates, %d updates, %d update conflicts, %d AlreadyExists; decisions: %d written (%d while racing), %d conflicts, by outcome %v; %d publications of tombstones into %d recovery slices; hand-offs %+v",
		racing.creates, racing.updates, racing.chunkConflicts, racing.alreadyExists,
		len(final.decisions), len(racing.decisions), final.decisionConflicts, byOutcome, len(final.publishes), len(w.recoverySlices()), book)
}

// producedNow reports whether the current synthesis of any Composition produces the object.
func producedNow(w *world, id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, out := range w.output {
		for _, o := range out {
			if o.String() == id {
				return true
			}
		}
	}
	return false
}

// lastPublication is the index of the last publication for ref.
func lastPublication(ref domain.CompositionRef) int {
	last := -1
	for p := range publications {
		if concurrentRefs[p%len(concurrentRefs)] == ref {
			last = p
		}
	}
	return last
}

// TestSynthesisChangesMidReplacement changes the Composition under a recording pass, right
// before chunk write k: that write was already rechecked and lands, the recheck before the next
// one sees the change and stops the pass. What is left reads as InventoryInvalid or as one
// complete snapshot, and the following passes converge on the newest synthesis.
func TestSynthesisChangesMidReplacement(t *testing.T) {
	for _, change := range []string{"resynthesized", "recreated"} {
		for k := range 3 {
			t.Run(fmt.Sprintf("%s before chunk write %d", change, k), func(t *testing.T) {
				ctx := logr.NewContext(t.Context(), testr.New(t))
				w := newWorld(t, crashChunkBytes, 1.0)
				oldNames, newNames, newest := names("old", 8), names("new", 8), []string{"shared", "fresh"}
				w.create(crashRef, true, oldNames...)
				_, err := w.service().Reconcile(ctx, crashRef)
				require.NoError(t, err)
				second, err := w.resynthesize(crashRef, true, newNames...)
				require.NoError(t, err)

				var third domain.Composition
				chunkWrites := 0
				w.cluster.SetBeforeWrite(func(op, _ string) error {
					if op != memory.OpCreateChunk && op != memory.OpUpdateChunk {
						return nil
					}
					if chunkWrites == k {
						if change == "recreated" {
							third = w.recreate(crashRef, true, newest...)
						} else {
							var resynthErr error
							third, resynthErr = w.resynthesize(crashRef, true, newest...)
							require.NoError(t, resynthErr)
						}
					}
					chunkWrites++
					return nil
				})
				_, err = w.service().Reconcile(ctx, crashRef)
				w.cluster.SetBeforeWrite(nil)
				if k < 2 {
					var stale *app.StaleCompositionError
					require.ErrorAs(t, err, &stale, "the recheck before the next chunk write stops the pass")
					assert.Equal(t, k+1, chunkWrites, "no write after the change was seen")
					_, err := w.readSnapshot(crashLineage)
					reason, _ := domain.InvalidReasonOf(err)
					assert.Equal(t, domain.ReasonMissingChunk, reason, "the half-written snapshot reads as invalid")
				} else {
					require.NoError(t, err, "a change after the last recheck is seen by the next pass")
					assert.Equal(t, 3, chunkWrites)
					snap, err := w.readSnapshot(crashLineage)
					require.NoError(t, err)
					assert.Equal(t, second.SynthesisUUID(), snap.SynthesisUUID())
				}

				// The newest synthesis decides from what was left; it, or after a hand-off Eno's
				// next synthesis, records itself.
				w.settle(ctx, w.service(), crashRef)
				live := w.live(crashRef)
				require.Equal(t, third.UID, live.UID)
				require.Equal(t, w.lastSynthesis(crashRef), live.SynthesisUUID())
				d, ok := live.FinishedDecision()
				require.True(t, ok)
				switch {
				case k < 2 && change == "resynthesized":
					// The half-written snapshot is this incarnation's own: design §5 step 3 stops at
					// SameIncarnation before its validity is judged (design §6, order of evaluation).
					require.Equal(t, third.SynthesisUUID(), live.SynthesisUUID())
					assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome, d.Message)
					assert.Equal(t, domain.ReasonSameIncarnation, d.Reason)
				case k < 2:
					require.Equal(t, third.SynthesisUUID(), live.SynthesisUUID())
					assert.Equal(t, domain.OutcomeInventoryInvalid, d.Outcome, d.Message)
					assert.Equal(t, domain.ReasonMissingChunk.String(), d.Reason)
					assert.Equal(t, cmIDs(crashRef.Namespace, append(slices.Clone(newNames), "fresh")...), w.downstream(crashRef.Namespace),
						"nothing is deleted on untrusted history")
				case change == "recreated":
					var recovered []domain.Decision
					for _, r := range w.audit.report().decisions {
						if r.Decision.Outcome == domain.OutcomeRecovered {
							recovered = append(recovered, r.Decision)
						}
					}
					require.Len(t, recovered, 1)
					assert.Equal(t, third.SynthesisUUID(), recovered[0].SynthesisUUID)
					require.Len(t, w.recoverySlices(), 1)
					assert.Equal(t, cmIDs(crashRef.Namespace, minus(newNames, newest)...), tombstoneIDs(t, w.recoverySlices()[0]))
					require.NotEqual(t, third.SynthesisUUID(), live.SynthesisUUID(), "the Recovered synthesis is not recorded; Eno's next one is")
					assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome)
					assert.Equal(t, domain.ReasonAlreadyDecided, d.Reason)
				default:
					require.Equal(t, third.SynthesisUUID(), live.SynthesisUUID())
					assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome)
				}
				if k == 2 || change == "resynthesized" {
					// Eno deleted exactly the orphans: by its own diff, or through the hand-off.
					assert.Equal(t, cmIDs(crashRef.Namespace, newest...), w.downstream(crashRef.Namespace))
				}
				assert.Empty(t, w.badDeletions())
				assert.Empty(t, w.audit.recordedRecovered(), "a synthesis decided Recovered is never recorded")
				snap, err := w.readSnapshot(crashLineage)
				require.NoError(t, err)
				assert.True(t, domain.SnapshotMatches(snap, live))
				assert.Empty(t, w.audit.report().unguarded)
			})
		}
	}
}

// TestSynthesisChangesMidHandoff changes the Composition under the hand-off pass (design §6.2),
// right before each of its writes: Eno promotes a new synthesis of the same incarnation (same
// output), or the Composition is recreated. The write that follows was already rechecked and
// lands; the recheck before the next one sees the change. Then the controllers and Eno go on
// until nothing changes, and the end state must hold: the newest synthesis recorded, no
// Recovered synthesis recorded, Eno having deleted only orphans.
func TestSynthesisChangesMidHandoff(t *testing.T) {
	ops := []string{memory.OpArmTombstones, memory.OpCreateRecoverySlice, memory.OpAppendRecoverySlice, memory.OpWriteDecision, memory.OpRequestResynthesis}
	for _, change := range []string{"resynthesized", "recreated"} {
		for _, op := range ops {
			t.Run(fmt.Sprintf("%s before %s", change, op), func(t *testing.T) {
				ctx := logr.NewContext(t.Context(), testr.New(t))
				w := newWorld(t, crashChunkBytes, 1.0)
				oldNames, newNames, newest := names("old", 8), names("new", 3), []string{"shared", "fresh"}
				first := w.create(crashRef, true, oldNames...)
				_, err := w.service().Reconcile(ctx, crashRef)
				require.NoError(t, err)
				second := w.recreate(crashRef, true, newNames...)

				changed := false
				w.cluster.SetBeforeWrite(func(o, _ string) error {
					if o != op || changed {
						return nil
					}
					changed = true
					if change == "recreated" {
						w.recreate(crashRef, true, newest...)
						return nil
					}
					_, err := w.resynthesize(crashRef, true, newNames...)
					require.NoError(t, err)
					return nil
				})
				_, err = w.service().Reconcile(ctx, crashRef)
				w.cluster.SetBeforeWrite(nil)
				require.True(t, changed, "the pass reached %s", op)
				t.Logf("the pass that saw the change: %v", err)

				w.settle(ctx, w.service(), crashRef)
				live := w.live(crashRef)
				require.Equal(t, w.lastSynthesis(crashRef), live.SynthesisUUID())
				snap, err := w.readSnapshot(crashLineage)
				require.NoError(t, err)
				assert.True(t, domain.SnapshotMatches(snap, live), "the newest synthesis is recorded")
				d, ok := live.FinishedDecision()
				require.True(t, ok)
				assert.NotEqual(t, domain.OutcomeRecovered, d.Outcome)
				assert.Empty(t, w.audit.recordedRecovered(), "a synthesis decided Recovered is never recorded")
				assert.Empty(t, w.badDeletions())
				assert.Empty(t, w.audit.report().unguarded)

				// Eno deleted exactly the orphans the history it was handed knew of.
				switch change {
				case "resynthesized":
					assert.Equal(t, second.UID, live.UID)
					assert.Equal(t, cmIDs(crashRef.Namespace, newNames...), w.downstream(crashRef.Namespace))
				case "recreated":
					// The second incarnation was never recorded: its own resources stay orphaned.
					want := append(slices.Clone(newNames[:len(newNames)-1]), newest...)
					assert.Equal(t, cmIDs(crashRef.Namespace, want...), w.downstream(crashRef.Namespace))
				}
				assert.Equal(t, first.SynthesisUUID(), d.RecoveredFrom, "the recovery from the old snapshot is on record")

				// Only a change right before step 3 leaves a committed slice undecided.
				final := w.audit.report()
				book := w.checkHandoffs(&final)
				if book.superseded > 0 {
					assert.Equal(t, memory.OpWriteDecision, op, "only a change right before step 3 leaves a committed slice undecided")
				}
				var outcomes []string
				for _, r := range final.decisions {
					outcomes = append(outcomes, r.Decision.Outcome.String()+"/"+r.Decision.Reason)
				}
				t.Logf("decisions: %v; hand-offs: %+v", outcomes, book)
			})
		}
	}
}

// observeFirst runs before once, right before the first object read of design §6.3.
type observeFirst struct {
	ports.DownstreamReader
	once   sync.Once
	before func()
}

func (o *observeFirst) ObserveObject(ctx context.Context, e domain.Entry) (domain.Observation, error) {
	o.once.Do(o.before)
	return o.DownstreamReader.ObserveObject(ctx, e)
}

// TestPlanMeetsACommittedHandoff races two passes over a recreated Composition. Pass B reads
// it and plans; while B reads the orphans downstream, pass A hands them to Eno and dies right
// after the commit point, and eno-reconciler, loading the synthesis after the append, deletes
// them (design §6.2: a slice appended under the same UUID takes effect whenever the synthesis is
// loaded). B then finds the orphans gone. The synthesis is committed to the hand-off, so B
// must not write its own decision: the next pass resumes the hand-off and decides Recovered.
func TestPlanMeetsACommittedHandoff(t *testing.T) {
	ctx := logr.NewContext(t.Context(), testr.New(t))
	w := newWorld(t, crashChunkBytes, 1.0)
	oldNames, newNames := names("old", 8), names("new", 3)
	first := w.create(crashRef, true, oldNames...)
	_, err := w.service().Reconcile(ctx, crashRef)
	require.NoError(t, err)
	second := w.recreate(crashRef, true, newNames...)

	raced := false
	b := w.service(func(d *app.Deps) {
		d.Downstream = &observeFirst{DownstreamReader: d.Downstream, before: func() {
			raced = true
			w.cluster.SetBeforeWrite(func(op, _ string) error {
				if op == memory.OpWriteDecision {
					return errCrash
				}
				return nil
			})
			_, err := w.service().Reconcile(ctx, crashRef)
			w.cluster.SetBeforeWrite(nil)
			require.ErrorIs(t, err, errCrash, "pass A dies at step 3")
			committed := w.live(crashRef).NamedRecoverySlices()
			require.NotEmpty(t, committed, "pass A named its slice")
			_, err = w.enoReconcile(crashRef)
			require.NoError(t, err)
			t.Logf("pass A committed %s; Eno deleted %v", committed, w.deletedObjects())
		}}
	})
	_, err = b.Reconcile(ctx, crashRef)
	require.True(t, raced, "pass B read the orphans downstream")
	var stale *app.StaleCompositionError
	require.ErrorAs(t, err, &stale, "pass B finds the synthesis committed to a hand-off since it read it")
	_, decided := w.live(crashRef).Decision()
	assert.False(t, decided, "pass B wrote no decision")

	w.settle(ctx, w.service(), crashRef)
	report := w.audit.report()
	book := w.checkHandoffs(&report)
	assert.Equal(t, handoffBook{decided: 1}, book)
	var got []string
	for _, r := range w.audit.report().decisions {
		if r.Decision.SynthesisUUID == second.SynthesisUUID() {
			got = append(got, r.Decision.Outcome.String())
		}
	}
	assert.Equal(t, []string{domain.OutcomeRecovered.String()}, got, "the recreated synthesis has one decision: Recovered")
	live := w.live(crashRef)
	d, ok := live.FinishedDecision()
	require.True(t, ok)
	assert.Equal(t, first.SynthesisUUID(), d.RecoveredFrom)
	assert.Equal(t, cmIDs(crashRef.Namespace, newNames...), w.downstream(crashRef.Namespace))
	assert.Empty(t, w.badDeletions())
}
