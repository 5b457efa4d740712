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
	var tooLarge *domain.TombstoneTooLargeError
	require.ErrorAs(t, err, &tooLarge)
	assert.Equal(t, domain.TombstoneTooLargeError{Tombstone: "resource 1", Bytes: domain.MaxSliceManifestBytes + 1, Limit: domain.MaxSliceManifestBytes}, *tooLarge)

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
	var tooLarge *domain.TombstoneTooLargeError
	require.ErrorAs(t, err, &tooLarge)
	assert.Equal(t, "ConfigMap/team-a/cm-0000", tooLarge.Tombstone)
}

// A hand-off read back keeps the cut its slices were written with: a withdrawal grows or
// shrinks a manifest, and cutting again could move a tombstone into another slice.
func TestHandoffFromSlicesKeepsTheirCut(t *testing.T) {
	h, err := domain.NewHandoff(largePlan(3, 100))
	require.NoError(t, err)
	c := composition()
	part := func(name string, rs ...domain.SliceResource) domain.ResourceSlice {
		return domain.ResourceSlice{Namespace: "team-a", Name: name, SynthesisUUID: synUUID, ControllerUID: c.UID,
			Annotations: h.SliceAnnotations(), Resources: rs}
	}
	back, err := domain.HandoffFromSlices(c, []domain.ResourceSlice{
		part("web-recovery-11111111", h.Resources[0]),
		part("web-recovery-11111111-1", h.Resources[1], h.Resources[2]),
	})
	require.NoError(t, err)
	assert.Equal(t, h.Resources, back.Resources)
	assert.Equal(t, h.Decision, back.Decision)
	parts, err := back.Parts()
	require.NoError(t, err)
	assert.Equal(t, [][]domain.SliceResource{h.Resources[:1], h.Resources[1:]}, parts)

	named, err := back.PartsFor([]string{"a", "b"})
	require.NoError(t, err)
	assert.Equal(t, parts, named)
	_, err = back.PartsFor([]string{"a"})
	assert.Error(t, err, "one part for each slice named")
	unknown, err := domain.Handoff{}.PartsFor([]string{"a"})
	require.NoError(t, err)
	assert.Nil(t, unknown, "the content is unknown")

	_, err = domain.HandoffFromSlices(c, nil)
	assert.Error(t, err)
}

func TestRecoverySliceSeries(t *testing.T) {
	long := strings.Repeat("a", 240)
	for _, tt := range []struct {
		name, comp, uuid string
		want             [][]string // per series, the names of parts 0, 1 and 12
	}{
		{"short and whole UUID", "web", synUUID, [][]string{
			{"web-recovery-11111111", "web-recovery-11111111-1", "web-recovery-11111111-12"},
			{"web-recovery-" + synUUID, "web-recovery-" + synUUID + "-1", "web-recovery-" + synUUID + "-12"},
		}},
		{"a short UUID has one series", "web", "abc", [][]string{{"web-recovery-abc", "web-recovery-abc-1", "web-recovery-abc-12"}}},
		{"the cut shortens the composition's name, never the suffix", long, synUUID, [][]string{
			{long[:235] + "-recovery-11111111", long[:233] + "-recovery-11111111-1", long[:232] + "-recovery-11111111-12"},
			{long[:207] + "-recovery-" + synUUID, long[:205] + "-recovery-" + synUUID + "-1", long[:204] + "-recovery-" + synUUID + "-12"},
		}},
		{"the cut trims a trailing dash or dot; a name of 253 is kept", strings.Repeat("a", 232) + ".-x", synUUID, [][]string{
			{strings.Repeat("a", 232) + ".-x-recovery-11111111", strings.Repeat("a", 232) + "-recovery-11111111-1", strings.Repeat("a", 232) + "-recovery-11111111-12"},
			{strings.Repeat("a", 207) + "-recovery-" + synUUID, strings.Repeat("a", 205) + "-recovery-" + synUUID + "-1", strings.Repeat("a", 204) + "-recovery-" + synUUID + "-12"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			series := domain.RecoverySliceSeriesOf(tt.comp, tt.uuid)
			require.Len(t, series, len(tt.want))
			var firsts []string
			for i, s := range series {
				got := []string{s.Name(0), s.Name(1), s.Name(12)}
				assert.Equal(t, tt.want[i], got)
				for _, n := range got {
					assert.LessOrEqual(t, len(n), 253)
				}
				assert.Equal(t, []string{s.Name(0), s.Name(1), s.Name(2)}, s.Names(3))
				firsts = append(firsts, s.Name(0))
			}
			assert.Equal(t, firsts, domain.RecoverySliceNames(tt.comp, tt.uuid))
			assert.Equal(t, firsts[0], domain.RecoverySliceName(tt.comp, tt.uuid))
		})
	}
}
