package domain_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// design §6.3 (read outage): a failed read is kept as Unreadable when another read of the plan was
// answered; when every read failed, nothing is decided and the plan is retried.
func TestReadOutage(t *testing.T) {
	a := domain.ResourceID{Kind: "ConfigMap", Namespace: "ns", Name: "a"}
	b := domain.ResourceID{Kind: "ConfigMap", Namespace: "ns", Name: "b"}
	failed := domain.Observation{State: domain.ObjectReadFailed, Detail: "reading it failed: 503"}
	tests := []struct {
		name     string
		observed map[domain.ResourceID]domain.Observation
		outage   bool
	}{
		{"nothing read", nil, false},
		{"every read answered", map[domain.ResourceID]domain.Observation{a: {State: domain.ObjectPresent}, b: {State: domain.ObjectAbsent}}, false},
		{"one failed, one present", map[domain.ResourceID]domain.Observation{a: failed, b: {State: domain.ObjectPresent}}, false},
		{"one failed, one gone", map[domain.ResourceID]domain.Observation{a: failed, b: {State: domain.ObjectAbsent}}, false},
		{"one failed, one forbidden: the server answered", map[domain.ResourceID]domain.Observation{a: failed, b: {State: domain.ObjectUnreadable, Detail: "forbidden"}}, false},
		{"the only read failed", map[domain.ResourceID]domain.Observation{b: failed}, true},
		{"every read failed", map[domain.ResourceID]domain.Observation{a: failed, b: failed}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := domain.ReadOutage(tt.observed)
			if !tt.outage {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), fmt.Sprintf("every one of the %d downstream reads of the plan failed", len(tt.observed)))
			assert.Contains(t, err.Error(), "503")
		})
	}
}

// design §6.3 (read outage): in a plan, a failed read with another answered is dropped as Unreadable and
// the rest is published; with every read failed the plan is an error, retried.
func TestPlanRecoveryReadFailures(t *testing.T) {
	self := composition()
	own := recordedBy(t, "team-a", "web", "uid-pred", "s-pred", synTime, 2)
	snap, err := domain.ReadSnapshotFor(self, own, now, 0, domain.AdoptWithinNamespace)
	require.NoError(t, err)
	ids := []domain.ResourceID{entriesN(2)[0].ID(), entriesN(2)[1].ID()}
	old := domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Writes: enoWrote(historyWritten.Add(-time.Hour)), UID: testUID}
	failed := domain.Observation{State: domain.ObjectReadFailed, Detail: "reading it failed: 503"}
	in := domain.RecoveryInput{Composition: self, Snapshot: snap, Synthesis: producing(t, 0), MaxTombstoneFraction: 1, Now: now}

	in.Observed = map[domain.ResourceID]domain.Observation{ids[0]: failed, ids[1]: old}
	p, err := domain.PlanRecovery(in)
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeRecovered, p.Decision.Outcome)
	assert.Equal(t, []domain.ResourceID{ids[1]}, tombstoneIDs(p.Tombstones))
	assert.Contains(t, p.Decision.Message, "1 Unreadable (first ConfigMap/ns/cm-000: reading it failed: 503)")

	in.Observed = map[domain.ResourceID]domain.Observation{ids[0]: failed, ids[1]: failed}
	_, err = domain.PlanRecovery(in)
	require.ErrorContains(t, err, "every one of the 2 downstream reads of the plan failed")
}
