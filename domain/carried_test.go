package domain_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

func TestCarriedRecoverySlices(t *testing.T) {
	c := composition()
	name := func(uuid string, part int) string {
		return domain.RecoverySliceName(c.Name, uuid, "0123456789abcdef", part)
	}
	c.PreviousSynthesis = &domain.Synthesis{UUID: oldSynUUID, Slices: []string{
		"web-slice-0", name(oldSynUUID, 0), name(oldSynUUID, 1),
		domain.RecoverySliceFamily(c.Name, oldSynUUID) + "x", // not of the family: no dash after it
		name(synUUID, 0), // the current synthesis's family, not the previous one's
	}}
	assert.Equal(t, []string{name(oldSynUUID, 0), name(oldSynUUID, 1)}, domain.CarriedRecoverySlices(c))
	c.PreviousSynthesis = nil
	assert.Empty(t, domain.CarriedRecoverySlices(c))
}

// Only this incarnation's hand-off of the previous synthesis is read back, without the
// tombstones that were withdrawn.
func TestCarriedTombstones(t *testing.T) {
	s, ts := pendingSlice(t, "a", "b")
	s.SynthesisUUID = oldSynUUID
	// As an earlier version withdrew a tombstone in place: disabled, no overrides.
	s.Resources[1] = domain.SliceResource{Manifest: manifestWith("b", map[string]string{domain.AnnotationDisableReconciliation: "true"}), Deleted: true}
	c := composition()
	c.PreviousSynthesis = &domain.Synthesis{UUID: oldSynUUID}
	got, err := domain.CarriedTombstones(c, s)
	require.NoError(t, err)
	assert.Equal(t, []domain.Tombstone{ts[0]}, got, "the withdrawn one left out")

	other := s
	other.ControllerUID = oldCompUID
	_, err = domain.CarriedTombstones(c, other)
	assert.Error(t, err)
	other = s
	other.SynthesisUUID = synUUID
	_, err = domain.CarriedTombstones(c, other)
	assert.Error(t, err)
	c.PreviousSynthesis = nil
	_, err = domain.CarriedTombstones(c, s)
	assert.Error(t, err)
}

func TestRemainingOrphans(t *testing.T) {
	_, ts := pendingSlice(t, "b", "a", "c", "d")
	observed := map[domain.ResourceID]domain.Observation{
		ts[0].Entry.ID(): {State: domain.ObjectPresent, Created: time.Now(), Writes: enoWrote(time.Now()), UID: testUID},
		ts[1].Entry.ID(): {State: domain.ObjectPresent, Created: time.Now(), Writes: enoWrote(time.Now()), UID: testUID},
		ts[2].Entry.ID(): {State: domain.ObjectAbsent},
		ts[3].Entry.ID(): {State: domain.ObjectUnreadable},
	}
	got := domain.RemainingOrphans(ts, observed)
	assert.Equal(t, []domain.ResourceID{ts[1].Entry.ID(), ts[0].Entry.ID()}, tombstoneIDs(got), "present ones, in canonical order")
}

// manifestWith is a ConfigMap's manifest in namespace ns with annotations.
func manifestWith(name string, annotations map[string]string) string {
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "ns", "annotations": annotations}})
	return string(b)
}
