package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// The sequences of issue 36, as scripts. Each is an open sequence until issue 37 fixes it.
func init() { cases = append(cases, reviewCases...) }

// openSequence is a sequence today's code gets wrong: its named case must keep being caught,
// and a random schedule's finding that matches it is counted as found, not as new.
type openSequence struct {
	why     string
	matches func(w *World, v Violation) bool
}

// openSequences are the sequences today's code gets wrong, by the name of their case. Moving a
// name out of this table makes its case a must-pass case, and makes a random schedule that
// finds it fail.
var openSequences = map[string]openSequence{
	"R3identical": {why: "an object another tool applied unchanged before the history is deleted", matches: coManagedBeforeHistory},
	"IdenticalTakeover": {why: "an object another tool applied unchanged after the history is deleted: the simulated server, like an Update, writes nothing (issue 37 item 1)",
		matches: func(_ *World, v Violation) bool {
			return writtenByOther(v) && strings.Contains(v.Detail, "written identically by "+gitOpsManager)
		}},
	// SliceLostStuck (seeds 72, 456; 1902, 1946 with a pause), triaged as a model error and
	// closed: the object "never existed" in the recovery run because Eno, whose steps share the
	// schedule with the replicas, had not created it when its Composition was deleted or paused;
	// the plain run, with no replicas, got there first. Nothing was lost: OnlyWithRecovery skips
	// what no Composition alive and unpaused at the end produces; a living Composition's output
	// never created still fails.
	// Found by seeds 231 and 250 once BareOrphan was fixed: a tool (kubectl) writes a bare orphan
	// with identical content; the server records nothing, as kube-apiserver records no entry for
	// an identical apply to an object with no field to own (design §6.2, "What the check cannot
	// see"), so Eno deletes it. Not scripted.
	"BareTakeover": {why: "an identical write by another tool to a bare orphan leaves no trace, and Eno deletes it", matches: func(w *World, v Violation) bool {
		return writtenByOther(v) && strings.Contains(v.Detail, "written identically by") &&
			slices.ContainsFunc(w.oracle.Orphans(), func(r enomodel.Ref) bool { return r.String() == v.Object && w.oracle.bare(r) })
	}},
	// The residual of the first synthesis after the plan (design §6.4): a Composition created
	// after the hand-off's last fence, or a synthesized one whose next synthesis starts producing
	// an orphan, and Eno deletes the orphan before the watch's disarm reaches Eno's cache, or
	// before that Composition's first synthesis. One unsynthesized at the fence makes the hand-off
	// wait (FirstSynthesisAfterThePlan); an object another Composition produced before the fence
	// is no window: the plan and the fence must keep it, so such a finding fails.
	// A known residual (design §6.2, "what the check cannot see"): the precondition reads Eno's
	// cached Composition, so a deletion or pause that reaches Eno's cache after its DELETE does
	// not stop it. Found by seeds 1285 and 1649 of the first full make sim.
	"EnoCacheLag": {why: "a Composition's deletion or pause that Eno's cache does not show yet does not stop a tombstone", matches: func(_ *World, v Violation) bool {
		return (v.Rule == RuleOwnerDeleting || v.Rule == RuleOwnerPaused) && strings.HasSuffix(v.Detail, enoCacheBehind)
	}},
	"K4window": {why: "a Composition that starts producing an orphan after the last fence may lose it to Eno first (design §6.4)", matches: k4Window},
}

func k4Window(w *World, v Violation) bool {
	if !((v.Rule == RuleProducedByLiving || v.Rule == RuleOnlyWithRecovery) && strings.Contains(v.Detail, "produced by") ||
		writtenByOther(v) && strings.Contains(v.Detail, " by eno for ")) || strings.HasPrefix(v.Object, "Namespace ") {
		return false
	}
	ref, ok := w.oracle.refNamed(v.Object)
	if !ok {
		return false
	}
	fenced := w.truth.fencedBefore(w.truth.enoDeleted(ref))
	if fenced < 0 {
		return false // no hand-off before the deletion: no fence, no window
	}
	for _, first := range w.truth.producersSince(ref, w.oracle.old) {
		if first >= 0 && first <= fenced {
			return false
		}
	}
	return true
}

// coManagedBeforeHistory: another tool applied the object unchanged before the history, which
// leaves no trace on the object (R3identical). A co-manager that changed it left an entry, and
// ManagedElsewhere must keep the object.
func coManagedBeforeHistory(_ *World, v Violation) bool {
	return writtenByOther(v) && strings.Contains(v.Detail, "written identically by") && strings.Contains(v.Detail, "(before the history)")
}

func writtenByOther(v Violation) bool {
	return v.Rule == RuleWrittenByOther || (v.Rule == RuleOnlyWithRecovery && strings.HasPrefix(v.Detail, "written"))
}

var reviewCases = []namedCase{
	{
		// R1: old-ns holds only orphans; the recovery is held, approved and handed off; then the
		// recreated Composition's synthesizer deploys a ConfigMap into old-ns. Eno's executor
		// carries the Namespace's tombstone into that synthesis and deletes it first.
		name:   "R1",
		story:  cascadeStory,
		points: []string{"A handed off the orphans and listed old-ns, never handing it over", "a later synthesis deploys into old-ns"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			reach(t, w, "A handed off the orphans and listed old-ns, never handing it over",
				a.reconcile(w.ref).err == nil && w.outcome == domain.OutcomeRecovered && !handedOff(w, nsRef("old-ns")))
			_, deployed := deployIntoNamespace(w)
			reach(t, w, "a later synthesis deploys into old-ns", deployed)
			w.settle("eno synthesizes again and carries the hand-off")
		},
	},
	{
		// R2: K3 written by a stale replica of the controller, under its own identity, then
		// eno-reconciler restarts: the release's slice policy (admissionPolicy) refuses the plain
		// tombstone, so nothing is named that a reload could act on, and orphan-a, written after
		// the history, stays. Without the policy Eno deletes it on the reload.
		name:   "R2",
		points: []string{"a stale replica tried to name a plain tombstone", "an orphan was written after the history", "A reconciled", "eno-reconciler restarted"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			named := nameStaleSlice(t, w, w.cp.Client(controllerManager), "orphan-a")
			reach(t, w, "a stale replica tried to name a plain tombstone", true)
			w.logf("the stale replica's slice named: %v", named)
			_, edited := editOrphan(w)
			reach(t, w, "an orphan was written after the history", edited)
			w.freshCaches()
			a.reconcile(w.ref)
			reach(t, w, "A reconciled", true)
			w.settle("eno acts on what is named")
			w.procs[0].Restart()
			reach(t, w, "eno-reconciler restarted", true)
			w.settle("eno-reconciler reloads the synthesis")
		},
	},
	{
		// R3: a GitOps tool applies orphan-a with its own labels after the first recording; the
		// old incarnation synthesizes again and is recorded, so the history postdates the write.
		name:   "R3",
		story:  func() Story { s := DefaultStory(); s.BeforeDeletion = comanagedBeforeHistory(false); return s },
		points: []string{"A handed off"},
		script: reconcileAfterPrologue("A handed off"),
	},
	{
		// R3 with identical content: the tool's apply changes nothing, and leaves no trace in
		// managedFields; the simulation saw it all the same.
		name:   "R3identical",
		story:  func() Story { s := DefaultStory(); s.BeforeDeletion = comanagedBeforeHistory(true); return s },
		points: []string{"A handed off"},
		script: reconcileAfterPrologue("A handed off"),
	},
	{
		// IdenticalTakeover: after the history, a GitOps tool applies orphan-a unchanged. The
		// write changes nothing, so nothing on the object says it happened.
		name:   "IdenticalTakeover",
		points: []string{"a tool applied an orphan unchanged", "A handed off"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			_, ok := comanage(true)(w)
			reach(t, w, "a tool applied an orphan unchanged", ok)
			w.freshCaches()
			reach(t, w, "A handed off", a.reconcile(w.ref).err == nil && len(recoverySlices(w)) == 1)
			w.settle("eno carries the hand-off")
		},
	},
	{
		// BareOrphan: an orphan ConfigMap with no data has no managedFields; nobody but Eno ever
		// wrote it, so it must go, or be kept for a true reason.
		name:   "BareOrphan",
		story:  bareStory,
		points: []string{"A decided"},
		script: reconcileAfterPrologue("A decided"),
	},
	{
		// K4window (seed 30's class): after the hand-off, another Composition is created whose
		// synthesizer produces orphan-a; Eno deletes orphan-a before that first synthesis.
		name:   "K4window",
		points: []string{"A handed off", "another composition will produce an orphan", "Eno deleted it before that composition's first synthesis"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			reach(t, w, "A handed off", a.reconcile(w.ref).err == nil && len(recoverySlices(w)) == 1)
			_, took := takeover(w)
			reach(t, w, "another composition will produce an orphan", took)
			w.settleOnly(w.ref.Name)
			reach(t, w, "Eno deleted it before that composition's first synthesis", !exists(w, cmRef("app", "orphan-a")))
			w.settle("eno synthesizes the other composition")
		},
	},
}
