package sim

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/app"
)

func init() { cases = append(cases, fleetCases...) }

// fleetCases lag the fleet index (design §6.3): the plan may read a stale index, the hand-off's
// fence may not.
var fleetCases = []namedCase{
	{
		name: "K4c",
		points: []string{"another composition took an orphan over, unseen by A's fleet index",
			"A's plan on the lagging index stopped at the fence, nothing named",
			"A's index caught up: A handed off the rest"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			lag := a.compRev
			_, took := takeover(w)
			w.settle("eno synthesizes the other composition")
			a.compRev = lag // the index lags behind the other composition's slice
			reach(t, w, "another composition took an orphan over, unseen by A's fleet index", took)
			o := a.reconcile(w.ref)
			var stale *app.StaleCompositionError
			reach(t, w, "A's plan on the lagging index stopped at the fence, nothing named",
				errors.As(o.err, &stale) && len(recoverySlices(w)) == 1 && namedRecoverySlices(t, w) == 0)
			o = a.reconcile(w.ref)
			reach(t, w, "A's index caught up: A handed off the rest", o.err == nil && namedRecoverySlices(t, w) == 1)
			w.settle("eno carries the hand-off")
		},
	},
}

// namedRecoverySlices counts the recovery slices the Composition's current synthesis names.
func namedRecoverySlices(t *testing.T, w *World) int {
	comp, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Get(t.Context(), w.ref.Name, metav1.GetOptions{})
	require.NoError(t, err)
	refs, _, _ := unstructured.NestedSlice(comp.Object, "status", "currentSynthesis", "resourceSlices")
	n := 0
	for _, r := range refs {
		if m, _ := r.(map[string]any); m != nil && strings.Contains(fmt.Sprint(m["name"]), "-recovery-") {
			n++
		}
	}
	return n
}
