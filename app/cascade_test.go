package app_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// R1 (design §6.3): an orphaned Namespace is never handed to Eno, approved or not; the decision's
// message, a Warning naming it and a metric give the command to delete it after looking, and the
// rest of the orphans are handed over.
func TestRecoverListsACascadingOrphan(t *testing.T) {
	nsRes := res{apiVersion: "v1", kind: "Namespace", name: "shared"}
	rs := append(resources(9), nsRes)
	f := recoveryFixture(t, rs, rs[:7])
	f.cfg.MaxTombstoneFraction = 1
	f.comp.Annotations[domain.AnnotationReview] = "approve:" + synthID
	res, err := f.service(t).Recover(ctx(t), f.comp)
	require.NoError(t, err)
	d := writtenDecision(t, f)
	assert.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
	assert.Equal(t, []string{"ConfigMap/team-a/cm-07", "ConfigMap/team-a/cm-08"}, tombstoneIDs(res.Plan.Tombstones))
	assert.Contains(t, d.Message, "never handed to Eno, delete after looking: kubectl delete namespace shared")
	var events []string
	for i := range f.events.Count() {
		if _, warning, reason, msg := f.events.At(i); warning && reason == "CascadingKind" {
			events = append(events, msg)
		}
	}
	assert.Equal(t, []string{"Namespace/shared is an orphan: deleting it also deletes every object in the namespace; never handed to Eno, after looking: kubectl delete namespace shared"}, events)
	require.Equal(t, 1, f.metrics.TombstoneAlertCallCount())
	reason, n := f.metrics.TombstoneAlertArgsForCall(0)
	assert.Equal(t, "CascadingKind", reason)
	assert.Equal(t, 1, n)
}

// read outage (design §6.3): a pass canceled while it reads is an error, never a set of failed reads to
// keep: nothing is decided.
func TestRecoverCanceledWhileReadingDecidesNothing(t *testing.T) {
	rs := resources(9)
	f := recoveryFixture(t, rs, rs[:6])
	f.cfg.MaxTombstoneFraction = 1
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	old := domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Writes: enoWrote(historyWritten.Add(-time.Hour)), UID: testUID}
	canceling := false
	f.downstream.ObserveObjectCalls(func(_ context.Context, e domain.Entry) (domain.Observation, error) {
		if e.Name == "cm-07" {
			if canceling {
				cancel()
				return domain.Observation{}, context.Canceled
			}
			return domain.Observation{}, errors.New("503 service unavailable")
		}
		return old, nil
	})
	// Two plans fail to read cm-07, so the third would keep it as unreadable, but is canceled.
	svc := f.service(t)
	for range 2 {
		_, err := svc.Recover(ctx(t), f.comp)
		require.Error(t, err)
	}
	canceling = true
	_, err := svc.Recover(c, f.comp)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, f.decisions.WriteDecisionCallCount())
	assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
}

// identical takeover at planning (design §6.3): an object another Composition's slice applies is dropped as
// ProducedElsewhere from the one slice list the plan reads, never handed over.
func TestRecoverDropsWhatAnotherCompositionProduces(t *testing.T) {
	rs := resources(9)
	f := recoveryFixture(t, rs, rs[:7])
	f.cfg.MaxTombstoneFraction = 1
	f.fleetSlices = []domain.ResourceSlice{takenOver("cm-07")}
	res, err := f.service(t).Recover(ctx(t), f.comp)
	require.NoError(t, err)
	d := writtenDecision(t, f)
	assert.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
	assert.Equal(t, []string{"ConfigMap/team-a/cm-08"}, tombstoneIDs(res.Plan.Tombstones))
	assert.Contains(t, d.Message, "1 ProducedElsewhere (first ConfigMap/team-a/cm-07: resource slice team-b/other-00000001-0 of another composition produces it)")
}

// Item 4 of issue 37 (design §6.3): an orphan no eno-reconciler in use loads (Config.ResourceFilter)
// is never handed over; the decision names it, and the rest are handed over.
func TestRecoverKeepsWhatNoReconcilerTakes(t *testing.T) {
	rs := resources(9)
	f := recoveryFixture(t, rs, rs[:7])
	f.cfg.MaxTombstoneFraction = 1
	f.cfg.ResourceFilter = func(manifest string, _ domain.Composition) error {
		if strings.Contains(manifest, `"name":"cm-07"`) {
			return errors.New("no --resource-filter matches")
		}
		return nil
	}
	res, err := f.service(t).Recover(ctx(t), f.comp)
	require.NoError(t, err)
	d := writtenDecision(t, f)
	assert.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
	assert.Equal(t, []string{"ConfigMap/team-a/cm-08"}, tombstoneIDs(res.Plan.Tombstones))
	assert.Contains(t, d.Message, "1 NoReconcilerTakesIt (first ConfigMap/team-a/cm-07: no --resource-filter matches)")
}
