package domain_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// pendingSlice is a recovery slice handing over tombstones of the named ConfigMaps, the second
// carrying overrides, written from a history of historyWritten.
func pendingSlice(t testing.TB, names ...string) (domain.ResourceSlice, []domain.Tombstone) {
	t.Helper()
	var ts []domain.Tombstone
	for i, n := range names {
		e := domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: n, Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{domain.AnnotationDeletionGroup: "1"}}
		if i == 1 {
			e.Annotations[domain.AnnotationOverrides] = `[{"path":"self.data.x","value":"y"}]`
		}
		ts = append(ts, domain.Tombstone{Entry: e, UID: testUID})
	}
	h, err := domain.NewHandoff(domain.RecoveryPlan{
		Decision:   domain.Decision{SynthesisUUID: synUUID, Outcome: domain.OutcomeRecovered, Tombstones: len(ts)},
		Tombstones: ts, HistoryWritten: historyWritten,
	})
	require.NoError(t, err)
	return domain.ResourceSlice{Namespace: "team-a", Name: "web-recovery-11111111", SynthesisUUID: synUUID, ControllerUID: compUID,
		Annotations: h.SliceAnnotations(), Resources: h.Resources}, ts
}

func TestParseTombstoneReadsBackWhatWasHandedOver(t *testing.T) {
	s, ts := pendingSlice(t, "a", "b")
	for i, r := range s.Resources {
		e, withdrawn, err := domain.ParseTombstone(r)
		require.NoError(t, err)
		assert.False(t, withdrawn)
		want := ts[i].Entry
		delete(want.Annotations, domain.AnnotationOverrides) // a tombstone drops the recorded overrides
		assert.Equal(t, want, e)
	}
	_, _, err := domain.ParseTombstone(domain.SliceResource{Manifest: s.Resources[0].Manifest})
	assert.Error(t, err, "a resource that is not a tombstone")
	_, _, err = domain.ParseTombstone(domain.SliceResource{Manifest: `{"apiVersion":"v1","kind":"ConfigMap"}`, Deleted: true})
	assert.Error(t, err, "a tombstone without a name")
}

// A withdrawn tombstone keeps its identity and recorded metadata, disables reconciliation and
// drops the overrides (Eno applies overrides before it reads the annotation).
func TestWithdrawn(t *testing.T) {
	_, ts := pendingSlice(t, "a", "b")
	r := domain.Withdrawn(ts[1].Entry)
	assert.True(t, r.Deleted)
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name        string            `json:"name"`
			Namespace   string            `json:"namespace"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Manifest), &m))
	assert.Equal(t, "v1", m.APIVersion)
	assert.Equal(t, "ConfigMap", m.Kind)
	assert.Equal(t, "b", m.Metadata.Name)
	assert.Equal(t, map[string]string{"app": "web"}, m.Metadata.Labels)
	assert.Equal(t, map[string]string{domain.AnnotationDeletionGroup: "1", domain.AnnotationDisableReconciliation: "true"}, m.Metadata.Annotations)
	e, withdrawn, err := domain.ParseTombstone(r)
	require.NoError(t, err)
	assert.True(t, withdrawn)
	assert.True(t, e.Disabled())
	assert.Equal(t, ts[1].Entry.Annotations[domain.AnnotationOverrides], `[{"path":"self.data.x","value":"y"}]`, "the entry given is not changed")
}

// The pending hand-off's recheck withdraws, in place, each tombstone whose object no longer
// passes the checks at the moment of deletion; the others, and those already withdrawn, stay.
func TestPlanWithdrawal(t *testing.T) {
	s, ts := pendingSlice(t, "a", "b", "c", "d")
	older := domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Changed: historyWritten.Add(-time.Hour), UID: testUID}
	observed := map[domain.ResourceID]domain.Observation{
		ts[0].Entry.ID(): older,
		ts[1].Entry.ID(): {State: domain.ObjectPresent, Created: historyWritten.Add(time.Minute), Changed: historyWritten.Add(time.Minute), UID: testUID}, // re-created since
		ts[2].Entry.ID(): {State: domain.ObjectUnreadable, Detail: "forbidden"},
		ts[3].Entry.ID(): older,
	}
	pending, err := domain.PendingTombstones(s)
	require.NoError(t, err)
	assert.Len(t, pending, 4)

	w, err := domain.PlanWithdrawal(s, observed)
	require.NoError(t, err)
	require.Len(t, w.Withdrawn, 2)
	assert.Equal(t, domain.DropNewer, w.Withdrawn[0].Reason)
	assert.Equal(t, domain.DropUnreadable, w.Withdrawn[1].Reason)
	require.Len(t, w.Resources, 4, "positions are kept")
	assert.Equal(t, s.Resources[0], w.Resources[0])
	assert.Equal(t, domain.Withdrawn(ts[1].Entry), w.Resources[1])
	assert.Equal(t, domain.Withdrawn(ts[2].Entry), w.Resources[2])
	assert.Equal(t, s.Resources[3], w.Resources[3])

	// Once written back, the withdrawn ones are no longer pending, and nothing more changes.
	s.Resources = w.Resources
	pending, err = domain.PendingTombstones(s)
	require.NoError(t, err)
	assert.Equal(t, []domain.ResourceID{ts[0].Entry.ID(), ts[3].Entry.ID()}, tombstoneIDs(pending))
	again, err := domain.PlanWithdrawal(s, observed)
	require.NoError(t, err)
	assert.Empty(t, again.Withdrawn)
}

// Without the history's write time on the slice no object can be told from one re-created
// since: every pending tombstone is withdrawn.
func TestPlanWithdrawalWithoutTheWriteTime(t *testing.T) {
	s, ts := pendingSlice(t, "a", "b")
	delete(s.Annotations, domain.AnnotationHistoryWritten)
	older := domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Changed: historyWritten.Add(-time.Hour), UID: testUID}
	w, err := domain.PlanWithdrawal(s, map[domain.ResourceID]domain.Observation{ts[0].Entry.ID(): older, ts[1].Entry.ID(): older})
	require.NoError(t, err)
	assert.Len(t, w.Withdrawn, 2)
	for _, d := range w.Withdrawn {
		assert.Equal(t, domain.DropUnknownWriteTime, d.Reason)
	}
}

func TestNewHandoffNeedsTheWriteTime(t *testing.T) {
	_, err := domain.NewHandoff(domain.RecoveryPlan{
		Decision:   domain.Decision{SynthesisUUID: synUUID, Outcome: domain.OutcomeRecovered, Tombstones: 1},
		Tombstones: []domain.Tombstone{{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a"}}},
	})
	assert.Error(t, err)
}
