package sim

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// The history's evidence cases (issue 26, item 3): each is a script, like those in cases.
func init() { cases = append(cases, historyCases...) }

// historyAfterRestore is K5's script: an orphan is written after the history, then someone
// else's write to the inventory Secrets (move) would make the history look newer than the
// write. Recovery must not tombstone the written orphan.
func historyAfterRestore(move func(w *World) (string, bool), moved string) func(t *testing.T, w *World) {
	return func(t *testing.T, w *World) {
		a := w.replicas[0]
		w.settle("eno synthesizes the recreated composition")
		w.clock.Advance(5e9)
		_, edited := editOrphan(w)
		reach(t, w, "an orphan was written after the history", edited)
		w.clock.Advance(5e9)
		_, ok := move(w)
		reach(t, w, moved, ok)
		w.clock.Advance(5e9)
		w.freshCaches()
		reach(t, w, "A decided", a.reconcile(w.ref).err == nil)
		w.settle("eno carries the hand-off")
	}
}

var historyCases = []namedCase{
	{
		// K5: a restore by another field manager re-creates the inventory Secrets; their only
		// managedFields entry is the restorer's, at the time of the restore.
		name:   "K5a",
		points: []string{"an orphan was written after the history", "velero re-created the inventory secrets", "A decided"},
		script: historyAfterRestore(recreateInventory, "velero re-created the inventory secrets"),
	},
	{
		// K5: the inventory Secrets' managedFields are stripped: no write is known.
		name:   "K5b",
		points: []string{"an orphan was written after the history", "the inventory secrets' managedFields were stripped", "A decided"},
		script: historyAfterRestore(stripInventoryManagedFields, "the inventory secrets' managedFields were stripped"),
	},
	{
		// K5: another field manager writes the same inventory back into the Secrets' data,
		// encoded differently, and takes the data over.
		name:   "K5c",
		points: []string{"an orphan was written after the history", "another manager rewrote the inventory data", "A decided"},
		script: historyAfterRestore(rewriteInventory, "another manager rewrote the inventory data"),
	},
	{
		// K6a: a Composition of another shard carries the lineage (a copied override) and is about
		// to produce an orphan. This shard's cache never holds it; the live list across every
		// shard does, and the history is refused as SharedLineage.
		name:   "K6a",
		points: []string{"a copy of the lineage lives in another shard", "A decided", "A refused the shared history"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			_, copied := copyLineageElsewhere(w)
			reach(t, w, "a copy of the lineage lives in another shard", copied)
			w.freshCaches()
			reach(t, w, "A decided", a.reconcile(w.ref).err == nil)
			w.settle("eno carries the hand-off and synthesizes the copy")
			comp, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Get(t.Context(), w.ref.Name, metav1.GetOptions{})
			require.NoError(t, err)
			reach(t, w, "A refused the shared history", strings.Contains(comp.GetAnnotations()[domain.AnnotationDecision], domain.ReasonSharedLineage.String()))
		},
	},
	{
		// K7: the old incarnation's last synthesis disabled an orphan-to-be and never became Ready,
		// so the snapshot records it enabled. Recovery must keep it.
		name:   "K7",
		story:  func() Story { s := DefaultStory(); s.BeforeDeletion = disableLater; return s },
		points: []string{"A handed off"},
		script: reconcileAfterPrologue("A handed off"),
	},
	{
		// K7 through a tombstone: the synthesis recording skips carries a tombstone disabled in its
		// old manifest, which Eno skips; the snapshot must be marked for it too.
		name:   "K7c",
		story:  func() Story { s := DefaultStory(); s.BeforeDeletion = disableThenDrop; return s },
		points: []string{"A handed off"},
		script: reconcileAfterPrologue("A handed off"),
	},
	{
		// K7 with K5: an orphan is edited by hand before the mark is written. The mark must
		// not move the history's write time past the edit.
		name:   "K7b",
		story:  func() Story { s := DefaultStory(); s.BeforeDeletion = disableLaterAfterAnEdit; return s },
		points: []string{"A decided"},
		script: reconcileAfterPrologue("A decided"),
	},
}

// reconcileAfterPrologue is the script of a case whose story did its work before the deletion:
// Eno synthesizes the recreated Composition, replica A reconciles it once (reaching point), and
// Eno carries what it handed over.
func reconcileAfterPrologue(point string) func(t *testing.T, w *World) {
	return func(t *testing.T, w *World) {
		a := w.replicas[0]
		w.settle("eno synthesizes the recreated composition")
		w.freshCaches()
		reach(t, w, point, a.reconcile(w.ref).err == nil)
		w.settle("eno carries the hand-off")
	}
}
