package app_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// A decision without tombstones is written only after its own live recheck (SPEC §6): a
// Composition that changed since the plan gets no decision.
func TestRecoverRechecksBeforeADecisionWithoutTombstones(t *testing.T) {
	rs := resources(9)
	for desc, change := range map[string]func(c domain.Composition) domain.Composition{
		"recreated":      func(c domain.Composition) domain.Composition { c.UID = "uid-3"; return c },
		"opt-in removed": func(c domain.Composition) domain.Composition { c.Annotations = nil; return c },
		"lineage changed": func(c domain.Composition) domain.Composition {
			c.Annotations = map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationLineageOverride: "elsewhere"}
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
