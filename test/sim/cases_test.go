package sim

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// A case is a script: a schedule pinned to semantic points of the hand-off, not a seed, so it
// keeps testing the same interleaving when the code's requests change. It reports each point
// it reached with reach, and fails when one cannot be reached.
type namedCase struct {
	name  string
	story func() Story
	// points the script must reach, in order.
	points []string
	script func(t *testing.T, w *World)
	// namedSkip is the Warning that names the orphans a case's operator action leaves (a pause
	// while Eno carries the hand-off): with it written, orphans may remain.
	namedSkip string
}

// decide runs r through its commit to its decision write, and reports whether both landed.
func decide(r *replica) bool {
	return r.runUntil(Request.IsCommit) && r.step(Proceed).IsCommit() &&
		r.runUntil(Request.IsCompositionWrite) && r.step(Proceed).IsCompositionWrite()
}

func reach(t *testing.T, w *World, point string, ok bool) {
	t.Helper()
	require.True(t, ok, "the script did not reach %q\n%s", point, w.Trace())
	w.points = append(w.points, point)
	w.logf("POINT: %s", point)
}

var cases = []namedCase{
	{
		name:   "K1",
		points: []string{"B planned, before its create", "an orphan was written after B planned", "A decided", "the named slice vanished", "B's stale create landed", "A finished"},
		script: func(t *testing.T, w *World) {
			a, b := w.replicas[0], w.replicas[1]
			w.settle("eno synthesizes the recreated composition")
			b.start(w.ref)
			reach(t, w, "B planned, before its create", b.runUntil(Request.IsSliceCreate))
			_, edited := editOrphan(w)
			reach(t, w, "an orphan was written after B planned", edited)
			a.start(w.ref)
			reach(t, w, "A decided", decide(a))
			_, gone := deleteRecoverySlice(w)
			reach(t, w, "the named slice vanished", gone)
			b.step(Proceed)
			reach(t, w, "B's stale create landed", len(recoverySlices(w)) == 1)
			b.finish()
			a.finish()
			reach(t, w, "A finished", a.last.err == nil)
			w.settle("eno carries the hand-off")
		},
	},
	{
		name:   "K2",
		points: []string{"A decided, before its resynthesis request", "an orphan was written after A planned", "B's pending watch ran", "the slice vanished", "A finished without writing the slice again"},
		script: func(t *testing.T, w *World) {
			a, b := w.replicas[0], w.replicas[1]
			w.settle("eno synthesizes the recreated composition")
			a.start(w.ref)
			reach(t, w, "A decided, before its resynthesis request", decide(a))
			_, edited := editOrphan(w)
			reach(t, w, "an orphan was written after A planned", edited)
			w.freshCaches()
			b.start(w.ref)
			b.finish()
			reach(t, w, "B's pending watch ran", b.last.err == nil)
			_, gone := deleteRecoverySlice(w)
			reach(t, w, "the slice vanished", gone)
			a.finish()
			reach(t, w, "A finished without writing the slice again", len(recoverySlices(w)) == 0)
			w.settle("eno carries the hand-off")
		},
	},
	{
		name:   "N2",
		story:  func() Story { s := DefaultStory(); s.NewDeletes = true; return s },
		points: []string{"the hand-off is committed and forced", "the composition is deleted mid-hand-off"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			o := a.reconcile(w.ref)
			reach(t, w, "the hand-off is committed and forced", o.err == nil && len(recoverySlices(w)) == 1)
			_, deleted := deleteComposition(w)
			reach(t, w, "the composition is deleted mid-hand-off", deleted)
			w.settle("eno deletes the composition")
		},
	},
	{
		name:   "K4a",
		points: []string{"another composition took an orphan over, identical", "A handed off"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			_, took := takeover(w)
			w.settle("eno synthesizes the other composition")
			reach(t, w, "another composition took an orphan over, identical", took)
			reach(t, w, "A handed off", a.reconcile(w.ref).err == nil)
			w.settle("eno carries the hand-off")
		},
	},
	{
		name:   "K4b",
		points: []string{"A committed", "another composition took an orphan over, identical", "A's pending watch disarmed the hand-off"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			a.start(w.ref)
			reach(t, w, "A committed", a.runUntil(Request.IsCommit) && a.step(Proceed).IsCommit())
			a.finish()
			_, took := takeover(w)
			w.clock.Advance(6e9)
			w.freshCaches()
			dispatched, _ := w.eno.Dispatch(t.Context(), w.ref.Namespace, "other")
			executed, _ := w.eno.Execute(t.Context(), w.ref.Namespace, "other")
			reach(t, w, "another composition took an orphan over, identical", took && dispatched && executed)
			w.freshCaches()
			o := a.reconcile(w.ref)
			comp, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Get(t.Context(), w.ref.Name, metav1.GetOptions{})
			require.NoError(t, err)
			reach(t, w, "A's pending watch disarmed the hand-off", o.err == nil && comp.GetAnnotations()[domain.AnnotationArmed] == domain.ArmedOff)
			w.settle("eno synthesizes the other composition and carries the hand-off")
		},
	},
	{
		name:   "N6",
		points: []string{"A published, before its commit", "cleanup checked the slice live: unnamed", "A committed", "A decided", "cleanup deleted the committed slice", "its finalizer was released", "Eno resynthesized without the slice"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			a.start(w.ref)
			reach(t, w, "A published, before its commit", a.runUntil(Request.IsCommit))
			slice := recoverySlices(w)[0].GetName()
			w.clock.Advance(6e9)
			w.freshCaches()
			checked, _ := w.eno.CleanupCheck(t.Context(), w.ref.Namespace, slice)
			confirmed, _ := w.eno.CleanupConfirm(t.Context(), w.ref.Namespace, slice)
			reach(t, w, "cleanup checked the slice live: unnamed", checked && confirmed)
			reach(t, w, "A committed", a.step(Proceed).IsCommit())
			reach(t, w, "A decided", a.runUntil(Request.IsCompositionWrite) && a.step(Proceed).IsCompositionWrite())
			deleted, _ := w.eno.CleanupDelete(t.Context(), w.ref.Namespace, slice)
			reach(t, w, "cleanup deleted the committed slice", deleted)
			released, _ := w.eno.CleanupCheck(t.Context(), w.ref.Namespace, slice)
			w.collect()
			reach(t, w, "its finalizer was released", released && len(recoverySlices(w)) == 0)
			w.clock.Advance(6e9)
			w.freshCaches()
			forced, _ := w.eno.SliceStatus(t.Context(), w.ref.Namespace, w.ref.Name)
			dispatched, _ := w.eno.Dispatch(t.Context(), w.ref.Namespace, w.ref.Name)
			executed, _ := w.eno.Execute(t.Context(), w.ref.Namespace, w.ref.Name)
			reach(t, w, "Eno resynthesized without the slice", forced && dispatched && executed)
			a.finish()
		},
	},
}

// TestNamedCases runs every script, then the drain, and judges it as a random schedule is
// judged (a named case has no plain run: every true orphan left counts as present in both). A
// case in openSequences must still be caught, by a finding its class matches; every other case
// must show no finding at all.
func TestNamedCases(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := Options{Seed: 1}
			if c.story != nil {
				opts.Story = c.story()
			}
			w, err := New(opts)
			require.NoError(t, err)
			defer w.Close()
			c.script(t, w)
			w.Drain(4)
			w.oracle.Finish()
			assert.Equal(t, c.points, w.points, "the points the script reached")
			findings := w.oracle.Violations()
			if c.namedSkip != "" {
				comp, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Get(t.Context(), w.ref.Name, metav1.GetOptions{})
				require.NoError(t, err)
				assert.True(t, w.events.warned(string(comp.GetUID()), c.namedSkip), "the orphans left are not named by a %s warning\n%s", c.namedSkip, w.Trace())
			} else {
				findings = append(findings, w.oracle.Leftovers(func(enomodel.Ref) bool { return true })...)
			}
			open, isOpen := openSequences[c.name]
			if !isOpen {
				assert.Empty(t, findings, "a wrong deletion, or a true orphan left with no true reason\n%s", w.Trace())
				return
			}
			caught := slices.ContainsFunc(findings, func(v Violation) bool { return open.matches(w, v) })
			assert.True(t, caught, "open sequence %s (%s) is no longer caught: if issue 37 fixed it, move it out of openSequences; else the oracle lost it\nfindings %v\n%s", c.name, open.why, findings, w.Trace())
			t.Logf("open sequence %s caught, as today's code gets it wrong: %v", c.name, findings)
		})
	}
}
