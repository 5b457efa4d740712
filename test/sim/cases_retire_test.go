package sim

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// The cases of a hand-off that outlives its watch: a tombstone Eno skipped stays in the synthesis
// that carried it, and Eno looks at it again on every reload (design §6.2, "A hand-off ends
// disarmed").
func init() {
	cases = append(cases,
		namedCase{
			name: "L1",
			points: []string{"A handed off", "Eno carried the hand-off while the composition was paused", "A saw the carrying synthesis Ready",
				"another composition took an orphan over, identical", "the composition was unpaused and eno-reconciler reloaded"},
			// Eno skipped the orphans while the Composition was paused: they remain, said out loud.
			namedSkip: "OrphansRemain",
			script: func(t *testing.T, w *World) {
				a := w.replicas[0]
				w.settle("eno synthesizes the recreated composition")
				reach(t, w, "A handed off", a.reconcile(w.ref).err == nil && len(recoverySlices(w)) == 1)
				_, paused := pauseComposition(w)
				w.settle("eno carries the hand-off while the composition is paused")
				reach(t, w, "Eno carried the hand-off while the composition was paused", paused && w.ready())
				w.freshCaches()
				reach(t, w, "A saw the carrying synthesis Ready", a.reconcile(w.ref).err == nil)
				_, took := takeover(w)
				w.settle("eno synthesizes the other composition")
				reach(t, w, "another composition took an orphan over, identical", took)
				reach(t, w, "the composition was unpaused and eno-reconciler reloaded", setAnnotation(t, w, domain.AnnotationDisableReconciliation, nil))
				w.procs[0].Restart()
				w.settle("eno-reconciler reloads the current synthesis")
			},
		},
		namedCase{
			name:   "L2",
			points: []string{"A handed off", "the composition opted out", "another composition took an orphan over, identical", "A saw the opt-out"},
			script: func(t *testing.T, w *World) {
				a := w.replicas[0]
				w.settle("eno synthesizes the recreated composition")
				reach(t, w, "A handed off", a.reconcile(w.ref).err == nil && len(recoverySlices(w)) == 1)
				reach(t, w, "the composition opted out", setAnnotation(t, w, domain.AnnotationOptIn, nil))
				_, took := takeover(w)
				w.clock.Advance(6e9)
				w.freshCaches()
				dispatched, _ := w.eno.Dispatch(t.Context(), w.ref.Namespace, "other")
				executed, _ := w.eno.Execute(t.Context(), w.ref.Namespace, "other")
				reach(t, w, "another composition took an orphan over, identical", took && dispatched && executed)
				w.freshCaches()
				reach(t, w, "A saw the opt-out", a.reconcile(w.ref).err == nil)
				w.settle("eno carries the hand-off")
			},
		},
	)
}

// setAnnotation sets (or, with nil, removes) one annotation of the story's Composition as an
// operator would, and reports whether it landed.
func setAnnotation(t *testing.T, w *World, key string, value *string) bool {
	t.Helper()
	v := "null"
	if value != nil {
		v = fmt.Sprintf("%q", *value)
	}
	_, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Patch(t.Context(), w.ref.Name,
		types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%s}}}`, key, v), metav1.PatchOptions{})
	require.NoError(t, err)
	return true
}
