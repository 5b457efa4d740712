package domain_test

import (
	"testing"

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
		Annotations: h.SliceAnnotations(0, 1), Resources: h.Resources}, ts
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

func TestNewHandoffNeedsTheWriteTime(t *testing.T) {
	_, err := domain.NewHandoff(domain.RecoveryPlan{
		Decision:   domain.Decision{SynthesisUUID: synUUID, Outcome: domain.OutcomeRecovered, Tombstones: 1},
		Tombstones: []domain.Tombstone{{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a"}}},
	})
	assert.Error(t, err)
}
