package resilience_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// A slice of another Composition created just before a plan, producing one of the orphans, is
// seen by that plan through the fleet index (no list): the orphan is kept, the others are handed
// to Eno (design §6.3).
func TestPlanSeesASliceCreatedJustBeforeIt(t *testing.T) {
	ctx := kubetest.Context(t, 2*time.Minute)
	s := prepareFaultScenario(t, ctx)
	svc := newService(t, env.AdminConfig(), serviceOptions{maxChunkBytes: crashChunkBytes})
	taken := s.old.Resources[0]
	// Synthesized: one Eno has not synthesized would hold the hand-off (design §6.3, first syntheses).
	created, err := kubetest.CreateComposition(ctx, s.c.Dynamic, domain.Composition{Namespace: s.ns, Name: "other",
		Synthesis: &domain.Synthesis{UUID: "33333333-0000-4000-8000-000000000003", Synthesized: time.Now(), Slices: []string{"other-slice"}}})
	require.NoError(t, err)
	other := domain.Composition{Namespace: s.ns, Name: "other", UID: string(created.GetUID())}
	_, err = kubetest.CreateSliceOwnedBy(ctx, s.c.Dynamic, domain.ResourceSlice{Namespace: s.ns, Name: "other-slice",
		Resources: []domain.SliceResource{{Manifest: taken.manifest()}}}, &other)
	require.NoError(t, err)

	_, err = svc.Reconcile(ctx, s.ref)
	require.NoError(t, err)
	live, err := liveComposition(ctx, s.c, s.ref)
	require.NoError(t, err)
	d, ok := live.Decision()
	require.True(t, ok)
	assert.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
	assert.Equal(t, len(s.tombstones)-1, d.Tombstones, "the orphan another produces is kept")
	ids, _, err := tombstoneSliceIDs(ctx, s.c, s.ns, d.TombstoneSlice)
	require.NoError(t, err)
	assert.NotContains(t, ids, taken.id())
}
