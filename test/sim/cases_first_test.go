package sim

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// The first synthesis after the plan (issue 37 item 6; seed 30 of the run, 44 of
// today's): a Composition created before the hand-off, not synthesized yet, will produce an
// orphan identically. Its first slice is the only trace, so the hand-off waits for it, and past
// the bound is held for review naming it. A Composition created after the fence is K4window.
func init() { cases = append(cases, firstSynthesisCases...) }

var firstSynthesisCases = []namedCase{
	{
		name: "FirstSynthesisAfterThePlan",
		points: []string{"another composition, not synthesized yet, will produce an orphan", "A waits for its first synthesis, nothing created",
			"A handed off the rest once it was synthesized"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			_, took := takeover(w)
			reach(t, w, "another composition, not synthesized yet, will produce an orphan", took)
			w.freshCaches()
			reach(t, w, "A waits for its first synthesis, nothing created", waitsFor(a.reconcile(w.ref).err, "team/other") && len(recoverySlices(w)) == 0)
			w.settle("eno synthesizes the other composition")
			w.freshCaches()
			reach(t, w, "A handed off the rest once it was synthesized", a.reconcile(w.ref).err == nil && len(recoverySlices(w)) == 1 && !handedOff(w, cmRef("app", "orphan-a")))
			w.settle("eno carries the hand-off")
		},
	},
	{
		name: "FirstSynthesisOverdue",
		points: []string{"another composition, not synthesized yet, will produce an orphan", "A held the recovery for review past the bound, naming it",
			"A handed off the rest once it was synthesized"},
		script: func(t *testing.T, w *World) {
			a, o, d := pastTheBound(t, w)
			reach(t, w, "A held the recovery for review past the bound, naming it", o.err == nil && o.res.RequeueAfter == w.opts.RecheckInterval &&
				d.Outcome == domain.OutcomeHeldForReview && d.Reason == domain.ReasonFirstSynthesisPending && len(recoverySlices(w)) == 0 &&
				w.events.warned(string(liveComposition(t, w).GetUID()), domain.OutcomeHeldForReview.String()))
			w.settle("eno synthesizes the other composition")
			w.freshCaches()
			reach(t, w, "A handed off the rest once it was synthesized", a.reconcile(w.ref).err == nil && len(recoverySlices(w)) == 1 && !handedOff(w, cmRef("app", "orphan-a")))
			w.settle("eno carries the hand-off")
		},
	},
	{
		// The review's F1: an approval written for a plan that never named the Composition
		// must not pass it once it is past the bound.
		name: "ApprovedPastFirstSynthesis",
		points: []string{"another composition, not synthesized yet, will produce an orphan", "A held the recovery for review past the bound, naming it",
			"an operator approved the held recovery", "the approval does not pass the unsynthesized composition", "A handed off the rest once it was synthesized"},
		script: func(t *testing.T, w *World) {
			a, o, d := pastTheBound(t, w)
			reach(t, w, "A held the recovery for review past the bound, naming it", o.err == nil && d.Reason == domain.ReasonFirstSynthesisPending)
			reach(t, w, "an operator approved the held recovery", approve(t, w))
			w.freshCaches()
			o = a.reconcile(w.ref)
			d = decisionOf(t, w)
			reach(t, w, "the approval does not pass the unsynthesized composition", o.err == nil &&
				d.Outcome == domain.OutcomeHeldForReview && d.Reason == domain.ReasonFirstSynthesisPending && len(recoverySlices(w)) == 0)
			w.settle("eno synthesizes the other composition")
			w.freshCaches()
			reach(t, w, "A handed off the rest once it was synthesized", a.reconcile(w.ref).err == nil && len(recoverySlices(w)) == 1 && !handedOff(w, cmRef("app", "orphan-a")))
			w.settle("eno carries the hand-off")
		},
	},
}

// pastTheBound brings another Composition that will produce an orphan, leaves it unsynthesized
// past the bound, and has replica A reconcile: what A did and decided.
func pastTheBound(t *testing.T, w *World) (*replica, *outcome, domain.Decision) {
	a := w.replicas[0]
	w.settle("eno synthesizes the recreated composition")
	_, took := takeover(w)
	reach(t, w, "another composition, not synthesized yet, will produce an orphan", took)
	w.clock.Advance(15 * w.opts.RecheckInterval)
	w.freshCaches()
	o := a.reconcile(w.ref)
	return a, o, decisionOf(t, w)
}

// waitsFor reports whether err is the hand-off waiting for ref's first synthesis.
func waitsFor(err error, ref string) bool {
	var pending *domain.FirstSynthesisPendingError
	return errors.As(err, &pending) && len(pending.Compositions) == 1 && pending.Compositions[0].String() == ref
}

// TestFirstSynthesisSeeds replays the random schedules that found the first synthesis after the
// plan: they must find nothing now.
func TestFirstSynthesisSeeds(t *testing.T) {
	for _, seed := range []uint64{30, 44} {
		out, err := Differential(seed, 300)
		require.NoError(t, err)
		require.Empty(t, out.Violations, "seed %d\n%s", seed, out.Recovery.Trace())
	}
}
