package app_test

import (
	"testing"

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
		f.reader.ListSlicesReturns([]domain.ResourceSlice{other}, nil)
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
