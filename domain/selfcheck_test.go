package domain_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// An armed hand-off ends disarmed: done once a synthesis that names no recovery slice is Ready,
// off once the Composition leaves recovery; nothing else writes.
func TestRetirementOf(t *testing.T) {
	armed := func(value string, ready bool, named bool) domain.Composition {
		c := composition()
		c.Annotations = map[string]string{domain.AnnotationArmed: value}
		c.Synthesis.Ready = ready
		c.Synthesis.Slices = []string{"web-slice-0"}
		if named {
			c.Synthesis.Slices = append(c.Synthesis.Slices, domain.RecoverySliceName(c.Name, c.Synthesis.UUID, "0123456789abcdef", 0))
		}
		return c
	}
	ineligible := func(r domain.IneligibleReason) *domain.IneligibleError { return &domain.IneligibleError{Reason: r} }
	for _, tc := range []struct {
		name       string
		comp       domain.Composition
		ineligible *domain.IneligibleError
		want       string // "" is no write
	}{
		{"a Ready synthesis that carried the hand-off", armed("0123456789abcdef", true, false), nil, domain.ArmedDone},
		{"the carrying synthesis is not Ready yet", armed("0123456789abcdef", false, false), nil, ""},
		{"the decided synthesis names the recovery slices (a stale Ready)", armed("0123456789abcdef", true, true), nil, ""},
		{"not armed", armed("", true, false), nil, ""},
		{"already disarmed", armed(domain.ArmedOff, true, false), nil, ""},
		{"already done", armed(domain.ArmedDone, true, false), nil, ""},
		{"opted out while armed", armed("0123456789abcdef", false, true), ineligible(domain.IneligibleNotOptedIn), domain.ArmedOff},
		{"recovery disabled while armed", armed("0123456789abcdef", false, true), ineligible(domain.IneligibleDisabled), domain.ArmedOff},
		{"an unusable lineage while armed", armed("0123456789abcdef", false, true), ineligible(domain.IneligibleInvalidLineage), domain.ArmedOff},
		{"deleting: the precondition sees it", armed("0123456789abcdef", false, true), ineligible(domain.IneligibleDeleting), ""},
		{"out of scope: its shard watches it", armed("0123456789abcdef", false, true), ineligible(domain.IneligibleOutOfScope), ""},
		{"opted out, never armed", armed("", false, false), ineligible(domain.IneligibleNotOptedIn), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := domain.RetirementOf(tc.comp, tc.ineligible)
			assert.Equal(t, tc.want != "", ok)
			assert.Equal(t, tc.want, r.Value)
			if ok {
				assert.NotEmpty(t, r.Why)
			}
		})
	}
}
