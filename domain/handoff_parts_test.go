package domain_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Eno's executor cuts a synthesis into slices of at most maxSliceJsonBytes of manifest JSON
// (internal/execution/executor.go in Eno v0.2.17), measured as the sum of the manifests'
// lengths (internal/resource/slicing.go).
func TestMaxSliceManifestBytesIsEnosBudget(t *testing.T) {
	assert.Equal(t, 1024*512, domain.MaxSliceManifestBytes)
}

// sized is a tombstone whose manifest is exactly n bytes long.
func sized(n int) domain.SliceResource {
	return domain.SliceResource{Manifest: strings.Repeat("x", n), Deleted: true}
}

func partSizes(parts [][]domain.SliceResource) [][]int {
	out := make([][]int, len(parts))
	for i, p := range parts {
		for _, r := range p {
			out[i] = append(out[i], len(r.Manifest))
		}
	}
	return out
}

// A recovery slice holds at most Eno's slice budget of manifest JSON; the next tombstone starts
// the next slice (design §6.2 step 1).
func TestHandoffPartsCutAtTheBudget(t *testing.T) {
	const budget = domain.MaxSliceManifestBytes
	for _, tt := range []struct {
		name  string
		sizes []int
		want  [][]int
	}{
		{"one small tombstone", []int{100}, [][]int{{100}}},
		{"exactly the budget in one slice", []int{budget - 100, 100}, [][]int{{budget - 100, 100}}},
		{"one byte over starts a second slice", []int{budget - 100, 101}, [][]int{{budget - 100}, {101}}},
		{"one tombstone of exactly the budget", []int{budget, 1}, [][]int{{budget}, {1}}},
		{"a later tombstone that would fit an earlier slice does not go back", []int{budget - 10, 20, 5}, [][]int{{budget - 10}, {20, 5}}},
		{"several slices, each full up to the next tombstone", []int{budget / 2, budget / 2, budget / 2, budget / 2, budget / 2}, [][]int{{budget / 2, budget / 2}, {budget / 2, budget / 2}, {budget / 2}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := domain.Handoff{Decision: domain.Decision{SynthesisUUID: synUUID}}
			for _, n := range tt.sizes {
				h.Resources = append(h.Resources, sized(n))
			}
			parts, err := h.Parts()
			require.NoError(t, err)
			assert.Equal(t, tt.want, partSizes(parts))
			assert.Equal(t, h.Resources, slices.Concat(parts...), "every tombstone once, in order")
		})
	}
}

func TestHandoffPartsRefuseATombstoneOverTheBudget(t *testing.T) {
	h := domain.Handoff{Resources: []domain.SliceResource{sized(10), sized(domain.MaxSliceManifestBytes + 1)}}
	_, err := h.Parts()
	require.EqualError(t, err, fmt.Sprintf("the tombstone of resource 1 is %d bytes of manifest JSON, over the %d a recovery slice holds (Eno's slice budget); nothing was handed to Eno",
		domain.MaxSliceManifestBytes+1, domain.MaxSliceManifestBytes))

	_, err = domain.Handoff{}.Parts()
	assert.Error(t, err, "nothing to publish")
}

// largePlan is a Recovered plan of n tombstones whose manifests are about size bytes each.
func largePlan(n, size int) domain.RecoveryPlan {
	ts := make([]domain.Tombstone, n)
	for i := range ts {
		ts[i] = domain.Tombstone{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: fmt.Sprintf("cm-%04d", i),
			Annotations: map[string]string{"example.com/filler": strings.Repeat("o", size)}}, UID: testUID}
	}
	return domain.RecoveryPlan{
		Decision:       domain.Decision{SynthesisUUID: synUUID, Outcome: domain.OutcomeRecovered, Tombstones: n},
		Tombstones:     ts,
		HistoryWritten: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC),
	}
}

func TestNewHandoffCutsIntoParts(t *testing.T) {
	plan := largePlan(40, domain.MaxSliceManifestBytes/7)
	h, err := domain.NewHandoff(plan)
	require.NoError(t, err)
	parts, err := h.Parts()
	require.NoError(t, err)
	require.Len(t, parts, 7, "6 tombstones of a seventh of the budget fit a slice, with their identities")
	for i, p := range parts {
		n := 0
		for _, r := range p {
			n += len(r.Manifest)
		}
		assert.LessOrEqual(t, n, domain.MaxSliceManifestBytes, "slice %d", i)
	}
	assert.Equal(t, h.Resources, slices.Concat(parts...))
	assert.Equal(t, 40, h.DecisionFor("web-recovery-11111111").Tombstones, "the decision counts every tombstone")

	again, err := domain.NewHandoff(plan)
	require.NoError(t, err)
	assert.Equal(t, h, again, "deterministic: a retry publishes the same slices")

	_, err = domain.NewHandoff(largePlan(2, domain.MaxSliceManifestBytes))
	require.ErrorContains(t, err, "the tombstone of ConfigMap/team-a/cm-0000 is ")
}

// Each part is created as its own immutable slice, named from the hand-off's digest, and the
// slices read back, in part order, are the hand-off.
func TestHandoffRecoverySlicesReadBack(t *testing.T) {
	h, err := domain.NewHandoff(largePlan(2, domain.MaxSliceManifestBytes/2))
	require.NoError(t, err)
	c := composition()
	parts, err := h.Parts()
	require.NoError(t, err)
	require.Len(t, parts, 2)
	read := make([]domain.ResourceSlice, len(parts))
	for i := range parts {
		read[i], err = h.RecoverySlice(c, i)
		require.NoError(t, err)
		assert.Equal(t, domain.RecoverySliceName(c.Name, synUUID, h.Digest, i), read[i].Name)
		assert.Equal(t, c.UID, read[i].ControllerUID)
		n, ok := domain.PartsOf(read[i])
		assert.True(t, ok)
		assert.Equal(t, 2, n)
	}
	_, err = h.RecoverySlice(c, 2)
	assert.Error(t, err, "no such part")
	back, err := domain.HandoffFromSlices(c, read)
	require.NoError(t, err)
	assert.Equal(t, h, back)

	_, err = domain.HandoffFromSlices(c, nil)
	assert.Error(t, err)
	for _, bad := range []string{"", "2/2", "x/2", "-1/2"} {
		_, ok := domain.PartsOf(domain.ResourceSlice{Annotations: map[string]string{domain.AnnotationRecoveryPart: bad}})
		assert.False(t, ok, bad)
	}
}
