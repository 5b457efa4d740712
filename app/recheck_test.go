package app_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// A decision without tombstones is written only after its own live recheck (design §6): a
// Composition that changed since the plan gets no decision.
func TestRecoverRechecksBeforeADecisionWithoutTombstones(t *testing.T) {
	rs := resources(9)
	for desc, change := range map[string]func(c domain.Composition) domain.Composition{
		"recreated":      recreated,
		"opt-in removed": func(c domain.Composition) domain.Composition { c.Annotations = nil; return c },
		"lineage changed": func(c domain.Composition) domain.Composition {
			c.Annotations = map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationLineageOverride: "elsewhere"}
			return c
		},
		"resynthesized": resynthesized,
		"review annotation set": func(c domain.Composition) domain.Composition {
			c.Annotations = map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationReview: "reject:" + synthID}
			return c
		},
	} {
		t.Run(desc, func(t *testing.T) {
			f := recoveryFixture(t, rs[:5], rs) // nothing orphaned: NothingToRecover/NoOrphans
			f.guard.LiveCompositionStub = nil
			f.guard.LiveCompositionReturns(change(f.comp), nil)
			_, err := f.service(t).Recover(ctx(t), f.comp)
			var stale *app.StaleCompositionError
			require.ErrorAs(t, err, &stale)
			assert.Zero(t, f.decisions.WriteDecisionCallCount())
		})
	}
}

// The case: the cache says reject:S and the live object says approve:S. A finished
// Rejected written from the cache would let recording replace the history the operator just
// approved recovering from; the recheck stops it, and the next pass plans from the live value.
func TestRecoverStaleRejectAgainstALiveApprove(t *testing.T) {
	rs := resources(9)
	f := recoveryFixture(t, rs, rs[:2]) // 7 of 9 orphaned: over the deletion guard
	cached := f.comp
	cached.Annotations = map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationReview: "reject:" + synthID}
	f.comp.Annotations = map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationReview: "approve:" + synthID}

	_, err := f.service(t).Recover(ctx(t), cached)
	var stale *app.StaleCompositionError
	require.ErrorAs(t, err, &stale)
	assert.Contains(t, err.Error(), "review annotation changed")
	assert.Zero(t, f.decisions.WriteDecisionCallCount(), "no Rejected from the cached annotation")
	assert.Zero(t, f.sink.PublishTombstonesCallCount())

	// The next pass reads the live object: approved, so the 7 are handed to Eno.
	res, err := f.service(t).Recover(ctx(t), f.comp)
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeRecovered, res.Plan.Decision.Outcome)
	assert.Equal(t, domain.ReasonApproved, res.Plan.Decision.Reason)
	assert.Equal(t, 7, res.Plan.Decision.Tombstones)
}
