package sim

import (
	"errors"
	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// UnverifiedWhileFirstSynthesisPends (the review of the plan's early wait, sequence B): one
// orphan edited by hand, every other unreadable, while another Composition awaits its first synthesis. A plan that hands
// nothing over does not wait: A decides Unverified at once, and once the other is synthesized A
// hands nothing over: the decision is finished.
var _ = func() bool {
	firstSynthesisCases = append(firstSynthesisCases, namedCase{
		name: "UnverifiedWhileFirstSynthesisPends",
		points: []string{"an operator edited one orphan", "every read of the other orphans fails with 503", "another composition awaits its first synthesis",
			"A decided Unverified at once, handing nothing over", "the other was synthesized", "A handed nothing over later"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			edited, ok := editOrphan(w)
			reach(t, w, "an operator edited one orphan", ok)
			for _, ref := range w.oracle.Orphans() {
				if "edited "+ref.String() != edited {
					w.unavailable = append(w.unavailable, "/api/v1/namespaces/"+ref.Namespace+"/configmaps/"+ref.Name)
				}
			}
			reach(t, w, "every read of the other orphans fails with 503", len(w.unavailable) > 0)
			other := compositionObject(w.ref.Namespace, "other", true)
			_, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Create(t.Context(), other, metav1.CreateOptions{})
			reach(t, w, "another composition awaits its first synthesis", err == nil)
			w.freshCaches()
			var o *outcome
			for range 10 { // each object's reads fail until it is kept as unreadable
				if o = a.reconcile(w.ref); o.err == nil {
					break
				}
			}
			d := decisionOf(t, w)
			reach(t, w, "A decided Unverified at once, handing nothing over", o.err == nil &&
				d.Outcome == domain.OutcomeNothingToRecover && d.Reason == domain.ReasonUnverified && len(recoverySlices(w)) == 0)
			w.settle("eno synthesizes the other composition")
			reach(t, w, "the other was synthesized", !liveUnsynthesized(t, w, "other"))
			w.freshCaches()
			a.reconcile(w.ref)
			reach(t, w, "A handed nothing over later", len(recoverySlices(w)) == 0)
		},
	})
	return true
}()

// liveUnsynthesized reports whether Composition name has no synthesis yet, read live.
func liveUnsynthesized(t *testing.T, w *World, name string) bool {
	u, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	_, found, _ := unstructured.NestedString(u.Object, "status", "currentSynthesis", "synthesized")
	return !found
}
