package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// A hand-off waits while a Composition of the fleet has no synthesis yet, and past the wait is
// held for review naming it (design §6.3, first synthesis after the plan).
func TestPlanRecoveryAwaitsFirstSyntheses(t *testing.T) {
	const wait = 15 * time.Minute
	other := domain.CompositionRef{Namespace: "team-b", Name: "split-1"}
	late := domain.CompositionRef{Namespace: "team-c", Name: "split-2"}
	young, old := now.Add(-time.Minute), now.Add(-wait)
	tests := []struct {
		name          string
		unsynthesized map[domain.CompositionRef]time.Time
		produced      int // of 4; 1 and fraction 0.5 trip the guard
		review        string
		waits         []domain.CompositionRef
		outcome       domain.Outcome
		reason        string
		named         []string
	}{
		{name: "every composition synthesized", produced: 3, outcome: domain.OutcomeRecovered},
		{name: "one created a minute ago waits", unsynthesized: map[domain.CompositionRef]time.Time{other: young}, produced: 3, waits: []domain.CompositionRef{other}},
		{name: "one past the wait is held, named", unsynthesized: map[domain.CompositionRef]time.Time{other: old}, produced: 3,
			outcome: domain.OutcomeHeldForReview, reason: domain.ReasonFirstSynthesisPending, named: []string{"team-b/split-1", "reject:" + synUUID, "approve: does not pass it", "15m0s"}},
		{name: "held and over the guard says both", unsynthesized: map[domain.CompositionRef]time.Time{other: old}, produced: 1,
			outcome: domain.OutcomeHeldForReview, reason: domain.ReasonFirstSynthesisPending, named: []string{"team-b/split-1", "over the guard of 0.5"}},
		{name: "an approval does not pass the overdue", unsynthesized: map[domain.CompositionRef]time.Time{other: old}, produced: 3, review: "approve:" + synUUID,
			outcome: domain.OutcomeHeldForReview, reason: domain.ReasonFirstSynthesisPending, named: []string{"team-b/split-1"}},
		{name: "an approval passes the guard alone", produced: 1, review: "approve:" + synUUID, outcome: domain.OutcomeRecovered, reason: domain.ReasonApproved},
		{name: "an approval with an overdue and a young one is held", unsynthesized: map[domain.CompositionRef]time.Time{other: old, late: young}, produced: 3,
			review: "approve:" + synUUID, outcome: domain.OutcomeHeldForReview, reason: domain.ReasonFirstSynthesisPending, named: []string{"team-b/split-1"}},
		{name: "rejected hands nothing over", unsynthesized: map[domain.CompositionRef]time.Time{other: old}, produced: 3, review: "reject:" + synUUID,
			outcome: domain.OutcomeNothingToRecover, reason: domain.ReasonRejected},
		{name: "its own composition is no other", unsynthesized: map[domain.CompositionRef]time.Time{composition().Ref(): young}, produced: 3, outcome: domain.OutcomeRecovered},
		{name: "nothing to hand over waits for nobody", unsynthesized: map[domain.CompositionRef]time.Time{other: young}, produced: 4,
			outcome: domain.OutcomeNothingToRecover, reason: domain.ReasonNoOrphans},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := composition()
			if tt.review != "" {
				c.Annotations = map[string]string{domain.AnnotationReview: tt.review}
			}
			in := domain.RecoveryInput{Composition: c, Snapshot: snapshotOf(t, entriesN(4), oldCompUID), Synthesis: producing(t, tt.produced),
				MaxTombstoneFraction: 0.5, Now: now, Unsynthesized: tt.unsynthesized, FirstSynthesisWait: wait}
			p, err := domain.PlanRecovery(in)
			require.NoError(t, err)
			if !p.Decided() {
				in.Observed = map[domain.ResourceID]domain.Observation{}
				for _, ts := range p.Verify {
					in.Observed[ts.Entry.ID()] = domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-24 * time.Hour), Writes: enoWrote(historyWritten.Add(-24 * time.Hour)), UID: testUID}
				}
				p, err = domain.PlanRecovery(in)
			}
			if tt.waits != nil {
				var pending *domain.FirstSynthesisPendingError
				require.True(t, errors.As(err, &pending), "%v", err)
				assert.Equal(t, tt.waits, pending.Compositions)
				assert.Contains(t, err.Error(), tt.waits[0].String())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.outcome, p.Decision.Outcome)
			assert.Equal(t, tt.reason, p.Decision.Reason)
			for _, s := range tt.named {
				assert.Contains(t, p.Decision.Message, s)
			}
			if tt.outcome == domain.OutcomeHeldForReview {
				assert.Empty(t, p.Tombstones, "nothing is handed over while held")
				assert.NotEmpty(t, p.Held)
			}
		})
	}
}

// Eno's scheduler synthesizes a Composition for the first time while it has no current
// synthesis, or one not synthesized, and never once it is being deleted.
func TestCompositionUnsynthesized(t *testing.T) {
	synthesized := composition()
	begun := composition()
	begun.Synthesis = &domain.Synthesis{UUID: "u"}
	deleting := domain.Composition{Namespace: "n", Name: "x", Deleting: true}
	assert.False(t, synthesized.Unsynthesized())
	assert.True(t, domain.Composition{Namespace: "n", Name: "x"}.Unsynthesized())
	assert.True(t, begun.Unsynthesized())
	assert.False(t, deleting.Unsynthesized())
}
