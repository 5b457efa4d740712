package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

type labelEquals struct{ key, value string }

func (l labelEquals) Matches(labels map[string]string) bool { return labels[l.key] == l.value }

func policy() domain.Policy {
	return domain.Policy{Enabled: true, Scope: domain.Scope{Namespace: "team-a", Selector: labelEquals{"shard", "a"}}}
}

func withDecision(outcome domain.Outcome, uuid string) func(*domain.Composition) {
	return func(c *domain.Composition) {
		c.Annotations[domain.AnnotationDecision] = domain.Decision{SynthesisUUID: uuid, Outcome: outcome, DecidedAt: now}.Encode()
	}
}

// Rules shared by recording and recovery: each case breaks exactly one of them.
var baseIneligible = []struct {
	name   string
	policy func(*domain.Policy)
	mutate func(*domain.Composition)
	want   domain.IneligibleReason
}{
	{"disabled", func(p *domain.Policy) { p.Enabled = false }, nil, domain.IneligibleDisabled},
	{"other namespace", nil, func(c *domain.Composition) { c.Namespace = "team-b" }, domain.IneligibleOutOfScope},
	{"selector does not match", nil, func(c *domain.Composition) { c.Labels["shard"] = "b" }, domain.IneligibleOutOfScope},
	{"no labels", nil, func(c *domain.Composition) { c.Labels = nil }, domain.IneligibleOutOfScope},
	{"not opted in", nil, func(c *domain.Composition) { delete(c.Annotations, domain.AnnotationOptIn) }, domain.IneligibleNotOptedIn},
	{"opt-in value not enabled", nil, func(c *domain.Composition) { c.Annotations[domain.AnnotationOptIn] = "true" }, domain.IneligibleNotOptedIn},
	{"opt-in value uppercase", nil, func(c *domain.Composition) { c.Annotations[domain.AnnotationOptIn] = "Enabled" }, domain.IneligibleNotOptedIn},
	{"deleting", nil, func(c *domain.Composition) { c.Deleting = true }, domain.IneligibleDeleting},
	{"invalid lineage override", nil, func(c *domain.Composition) { c.Annotations[domain.AnnotationLineageOverride] = "Web" }, domain.IneligibleInvalidLineage},
	{"empty lineage override", nil, func(c *domain.Composition) { c.Annotations[domain.AnnotationLineageOverride] = "" }, domain.IneligibleInvalidLineage},
	{"no synthesis", nil, func(c *domain.Composition) { c.Synthesis = nil }, domain.IneligibleNotSynthesized},
	{"synthesis without UUID", nil, func(c *domain.Composition) { c.Synthesis.UUID = "" }, domain.IneligibleNotSynthesized},
	{"synthesis not finished", nil, func(c *domain.Composition) { c.Synthesis.Synthesized = time.Time{} }, domain.IneligibleNotSynthesized},
}

func check(t *testing.T, err error, want domain.IneligibleReason) {
	t.Helper()
	var ie *domain.IneligibleError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, want, ie.Reason, "%v", err)
	assert.Contains(t, err.Error(), want.String())
}

func TestCheckRecovery(t *testing.T) {
	for _, tt := range baseIneligible {
		t.Run(tt.name, func(t *testing.T) {
			p, c := policy(), composition()
			if tt.policy != nil {
				tt.policy(&p)
			}
			if tt.mutate != nil {
				tt.mutate(&c)
			}
			check(t, p.CheckRecovery(c), tt.want)
			check(t, p.Ineligible(c), tt.want)
		})
	}
	decided := []struct {
		name    string
		outcome domain.Outcome
	}{
		{"NoInventory", domain.OutcomeNoInventory},
		{"InventoryInvalid", domain.OutcomeInventoryInvalid},
		{"NothingToRecover", domain.OutcomeNothingToRecover},
		{"Recovered", domain.OutcomeRecovered},
	}
	for _, tt := range decided {
		t.Run("finished decision "+tt.name, func(t *testing.T) {
			c := composition()
			withDecision(tt.outcome, synUUID)(&c)
			check(t, policy().CheckRecovery(c), domain.IneligibleDecided)
			assert.Nil(t, policy().Ineligible(c))
		})
	}
	eligible := []struct {
		name   string
		mutate func(*domain.Composition)
	}{
		{"no decision", func(*domain.Composition) {}},
		{"not Ready yet", func(c *domain.Composition) { c.Synthesis.Ready = false }},
		{"held for review", withDecision(domain.OutcomeHeldForReview, synUUID)},
		{"decision for an older synthesis", withDecision(domain.OutcomeRecovered, oldSynUUID)},
		{"unparseable decision", func(c *domain.Composition) { c.Annotations[domain.AnnotationDecision] = "{" }},
		{"valid lineage override", func(c *domain.Composition) { c.Annotations[domain.AnnotationLineageOverride] = "shared" }},
	}
	for _, tt := range eligible {
		t.Run("eligible: "+tt.name, func(t *testing.T) {
			c := composition()
			tt.mutate(&c)
			assert.NoError(t, policy().CheckRecovery(c))
			assert.Nil(t, policy().Ineligible(c))
		})
	}
}

func TestCheckRecording(t *testing.T) {
	finished := withDecision(domain.OutcomeNoInventory, synUUID)
	for _, tt := range baseIneligible {
		t.Run(tt.name, func(t *testing.T) {
			p, c := policy(), composition()
			finished(&c)
			if tt.policy != nil {
				tt.policy(&p)
			}
			if tt.mutate != nil {
				tt.mutate(&c)
			}
			check(t, p.CheckRecording(c), tt.want)
		})
	}
	waits := []struct {
		name   string
		mutate func(*domain.Composition)
		want   domain.IneligibleReason
	}{
		{"not Ready", func(c *domain.Composition) { finished(c); c.Synthesis.Ready = false }, domain.IneligibleNotReady},
		{"no decision", func(*domain.Composition) {}, domain.IneligibleAwaitsDecision},
		{"held for review is not finished", withDecision(domain.OutcomeHeldForReview, synUUID), domain.IneligibleAwaitsDecision},
		{"decision for another synthesis", withDecision(domain.OutcomeRecovered, oldSynUUID), domain.IneligibleAwaitsDecision},
		// Eno's next synthesis carries the tombstones and is recorded once Ready (design §6.2).
		{"a synthesis decided Recovered is never recorded", withDecision(domain.OutcomeRecovered, synUUID), domain.IneligibleRecovered},
		{"unparseable decision", func(c *domain.Composition) { c.Annotations[domain.AnnotationDecision] = "nope" }, domain.IneligibleAwaitsDecision},
		{"decision with unknown outcome", func(c *domain.Composition) {
			c.Annotations[domain.AnnotationDecision] = `{"synthesisUUID":"` + synUUID + `","outcome":"Done"}`
		}, domain.IneligibleAwaitsDecision},
	}
	for _, tt := range waits {
		t.Run(tt.name, func(t *testing.T) {
			c := composition()
			tt.mutate(&c)
			check(t, policy().CheckRecording(c), tt.want)
		})
	}
	for _, o := range []domain.Outcome{domain.OutcomeNoInventory, domain.OutcomeInventoryInvalid, domain.OutcomeNothingToRecover} {
		t.Run("eligible after "+o.String(), func(t *testing.T) {
			c := composition()
			withDecision(o, synUUID)(&c)
			assert.NoError(t, policy().CheckRecording(c))
		})
	}
}

func TestScopeContains(t *testing.T) {
	c := composition()
	assert.True(t, domain.Scope{}.Contains(c), "empty scope holds everything")
	assert.True(t, domain.Scope{Selector: domain.Everything}.Contains(c))
	assert.True(t, domain.Scope{Namespace: "team-a"}.Contains(c))
	assert.False(t, domain.Scope{Namespace: "team-b"}.Contains(c))
	assert.False(t, domain.Scope{Selector: labelEquals{"shard", "b"}}.Contains(c))
}
