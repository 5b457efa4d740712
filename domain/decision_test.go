package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

func TestDecisionEncodeKeyOrder(t *testing.T) {
	src := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		d    domain.Decision
		want string
	}{
		{"recovered", domain.Decision{
			SynthesisUUID: synUUID, Outcome: domain.OutcomeRecovered, Reason: domain.ReasonApproved,
			Message: "3 of 4 <resources> & more", SourceSynthesisUUID: oldSynUUID, SourceSynthesisTimestamp: &src,
			Tombstones: 3, TombstoneSlice: "web-recovery-11111111", DecidedAt: now, RecoveredFrom: oldSynUUID,
		}, `{"synthesisUUID":"11111111-2222-3333-4444-555555555555","outcome":"Recovered","reason":"Approved",` +
			`"message":"3 of 4 \u003cresources\u003e \u0026 more","sourceSynthesisUUID":"00000000-aaaa-bbbb-cccc-dddddddddddd",` +
			`"sourceSynthesisTimestamp":"2025-06-01T10:00:00Z","tombstones":3,"tombstoneSlice":"web-recovery-11111111",` +
			`"decidedAt":"2025-06-01T12:00:00Z","recoveredFrom":"00000000-aaaa-bbbb-cccc-dddddddddddd"}`},
		{"no inventory keeps every key", domain.Decision{
			SynthesisUUID: synUUID, Outcome: domain.OutcomeNoInventory, DecidedAt: now,
		}, `{"synthesisUUID":"11111111-2222-3333-4444-555555555555","outcome":"NoInventory","reason":"","message":"",` +
			`"sourceSynthesisUUID":"","sourceSynthesisTimestamp":null,"tombstones":0,"tombstoneSlice":"","decidedAt":"2025-06-01T12:00:00Z","recoveredFrom":""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.d.Encode()
			assert.Equal(t, tt.want, got)
			back, err := domain.ParseDecision(got)
			require.NoError(t, err)
			assert.Equal(t, tt.d, back)
			assert.Equal(t, got, back.Encode())
		})
	}
}

func TestDecisionRoundTripEveryOutcome(t *testing.T) {
	src := synTime
	for _, o := range []domain.Outcome{domain.OutcomeNoInventory, domain.OutcomeInventoryInvalid,
		domain.OutcomeNothingToRecover, domain.OutcomeRecovered, domain.OutcomeHeldForReview} {
		t.Run(o.String(), func(t *testing.T) {
			d := domain.Decision{SynthesisUUID: synUUID, Outcome: o, Reason: "r", Message: "m",
				SourceSynthesisUUID: oldSynUUID, SourceSynthesisTimestamp: &src, Tombstones: 7, TombstoneSlice: "s", DecidedAt: now}
			back, err := domain.ParseDecision(d.Encode())
			require.NoError(t, err)
			assert.Equal(t, d, back)
			assert.True(t, d.SameAs(back))
		})
	}
}

func TestDecisionFromPlanRoundTrips(t *testing.T) {
	snap := snapshotOf(t, goldenEntries(), oldCompUID)
	p := plan(t, composition(), snap, producing(t, 0), 1)
	p.Decision.TombstoneSlice = domain.RecoverySliceName("web", synUUID, "0123456789abcdef", 0)
	back, err := domain.ParseDecision(p.Decision.Encode())
	require.NoError(t, err)
	assert.Equal(t, p.Decision, back)
}

func TestParseDecisionErrors(t *testing.T) {
	for name, s := range map[string]string{
		"empty":              "",
		"garbage":            "{",
		"array":              "[]",
		"unknown outcome":    `{"synthesisUUID":"x","outcome":"Done"}`,
		"outcome wrong type": `{"synthesisUUID":"x","outcome":1}`,
		"missing uuid":       `{"outcome":"Recovered"}`,
		"missing outcome":    `{"synthesisUUID":"x"}`,
		"empty outcome":      `{"synthesisUUID":"x","outcome":""}`,
		"bad time":           `{"synthesisUUID":"x","outcome":"Recovered","decidedAt":"now"}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := domain.ParseDecision(s)
			assert.Error(t, err)
		})
	}
}

func TestOutcome(t *testing.T) {
	tests := []struct {
		name     string
		o        domain.Outcome
		finished bool
	}{
		{"NoInventory", domain.OutcomeNoInventory, true},
		{"InventoryInvalid", domain.OutcomeInventoryInvalid, true},
		{"NothingToRecover", domain.OutcomeNothingToRecover, true},
		{"Recovered", domain.OutcomeRecovered, true},
		{"HeldForReview", domain.OutcomeHeldForReview, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.name, tt.o.String())
			assert.Equal(t, tt.finished, tt.o.Finished())
			var got domain.Outcome
			require.NoError(t, got.UnmarshalText([]byte(tt.name)))
			assert.Equal(t, tt.o, got)
			assert.False(t, tt.o.IsZero())
		})
	}
	var zero domain.Outcome
	assert.True(t, zero.IsZero())
	assert.False(t, zero.Finished())
	assert.EqualError(t, zero.UnmarshalText([]byte("recovered")), `unknown recovery outcome "recovered"`)
	assert.True(t, zero.IsZero(), "an unknown name leaves it unset")
}

func TestDecisionSameAs(t *testing.T) {
	a := domain.Decision{SynthesisUUID: synUUID, Outcome: domain.OutcomeRecovered, Tombstones: 2, DecidedAt: now}
	b := a
	b.DecidedAt = now.Add(time.Hour)
	assert.True(t, a.SameAs(b), "the time of the decision does not matter")
	b.Tombstones = 3
	assert.False(t, a.SameAs(b))
	b = a
	b.TombstoneSlice = "x"
	assert.False(t, a.SameAs(b))
}

func TestCompositionDecision(t *testing.T) {
	c := composition()
	_, ok := c.Decision()
	assert.False(t, ok)
	_, ok = c.FinishedDecision()
	assert.False(t, ok)

	d := domain.Decision{SynthesisUUID: synUUID, Outcome: domain.OutcomeNothingToRecover, DecidedAt: now}
	c.Annotations[domain.AnnotationDecision] = d.Encode()
	got, ok := c.Decision()
	require.True(t, ok)
	assert.Equal(t, d, got)
	got, ok = c.FinishedDecision()
	require.True(t, ok)
	assert.Equal(t, d, got)

	c.Synthesis.UUID = "resynthesized"
	_, ok = c.Decision()
	assert.True(t, ok, "the decision still parses")
	_, ok = c.FinishedDecision()
	assert.False(t, ok, "but it is for another synthesis")

	c = composition()
	c.Annotations[domain.AnnotationDecision] = domain.Decision{SynthesisUUID: synUUID, Outcome: domain.OutcomeHeldForReview}.Encode()
	_, ok = c.FinishedDecision()
	assert.False(t, ok)
	c.Synthesis = nil
	_, ok = c.FinishedDecision()
	assert.False(t, ok)
}
