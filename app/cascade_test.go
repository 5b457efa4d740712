package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// N1 (design §6.3): a Namespace that another Composition's slice deploys into is dropped as
// DeployedInto from the one slice list the plan reads, never held for review nor handed over;
// one nothing deploys into is held for review.
func TestRecoverKeepsANamespaceAnotherCompositionDeploysInto(t *testing.T) {
	nsRes := res{apiVersion: "v1", kind: "Namespace", name: "shared"}
	rs := append(resources(9), nsRes)
	t.Run("deployed into by another composition", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		f.cfg.MaxTombstoneFraction = 1
		other := domain.ResourceSlice{Namespace: "team-b", Name: "other-00000001-0", ControllerUID: "uid-other",
			Resources: []domain.SliceResource{{Manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"shared","name":"theirs"}}`}}}
		f.fleetSlices = []domain.ResourceSlice{other}
		res, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
		assert.Equal(t, []string{"ConfigMap/team-a/cm-07", "ConfigMap/team-a/cm-08"}, tombstoneIDs(res.Plan.Tombstones))
		assert.Contains(t, d.Message, "1 DeployedInto (first Namespace/shared: resource slice team-b/other-00000001-0 of another composition deploys ConfigMap/shared/theirs into it)")
	})
	t.Run("deployed into by nothing", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		f.cfg.MaxTombstoneFraction = 1
		res, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeHeldForReview, d.Outcome, d.Message)
		assert.Equal(t, domain.ReasonCascadingDeletion, d.Reason)
		assert.Empty(t, res.Plan.Tombstones)
		assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
	})
}

// N3 (design §6.3): a pass canceled while it reads is an error, never a set of failed reads to
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

// N1 after planning: an approved Namespace tombstone whose namespace another Composition starts
// deploying into is disarmed by the watch, as a takeover is (K4).
func TestPendingHandoffDisarmsWhenAnotherCompositionDeploysIntoANamespace(t *testing.T) {
	nsRes := res{apiVersion: "v1", kind: "Namespace", name: "shared"}
	rs := append(resources(9), nsRes)
	f := recoveryFixture(t, rs, rs[:7])
	f.cfg.MaxTombstoneFraction = 1
	f.comp.Annotations[domain.AnnotationReview] = "approve:" + synthID
	_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	d := writtenDecision(t, f)
	require.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
	require.Equal(t, 3, d.Tombstones, "approved: the Namespace is handed over")

	other := domain.ResourceSlice{Namespace: "team-b", Name: "other-00000001-0", ControllerUID: "uid-other",
		Resources: []domain.SliceResource{{Manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"shared","name":"theirs"}}`}}}
	f.fleetSlices = []domain.ResourceSlice{other}
	_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	require.Equal(t, 1, f.sink.DisarmTombstonesCallCount())
	assert.Equal(t, domain.ArmedOff, f.comp.Annotations[domain.AnnotationArmed])
	assert.True(t, warned(f, "HandoffDisarmed"))
}

// K4 at planning (design §6.3): an object another Composition's slice applies is dropped as
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
