package k8s

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Each append names one recovery slice behind the same tests; a synthesis without a list gets
// a list of one (design §6.2).
func TestCommitPatchAppendsOneSlice(t *testing.T) {
	tests := []map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": "uid-1"},
		{"op": "test", "path": "/metadata/resourceVersion", "value": "41"},
		{"op": "test", "path": "/status/currentSynthesis/uuid", "value": "s-1"},
		{"op": "test", "path": "/status/inFlightSynthesis", "value": nil},
	}
	decode := func(t *testing.T, b []byte) []map[string]any {
		var ops []map[string]any
		require.NoError(t, json.Unmarshal(b, &ops))
		return ops
	}
	roundTrip := func(t *testing.T, ops []map[string]any) []map[string]any {
		b, err := json.Marshal(ops)
		require.NoError(t, err)
		return decode(t, b)
	}
	for _, tt := range []struct {
		name   string
		slices []string
		want   []map[string]any
	}{
		{"onto a list", []string{"web-slice-0"}, []map[string]any{
			{"op": "test", "path": "/status/currentSynthesis/resourceSlices", "value": []any{map[string]any{"name": "web-slice-0"}}},
			{"op": "add", "path": "/status/currentSynthesis/resourceSlices/-", "value": map[string]any{"name": "web-recovery-1"}},
		}},
		{"onto an empty list", []string{}, []map[string]any{
			{"op": "test", "path": "/status/currentSynthesis/resourceSlices", "value": []any{}},
			{"op": "add", "path": "/status/currentSynthesis/resourceSlices/-", "value": map[string]any{"name": "web-recovery-1"}},
		}},
		{"no list", nil, []map[string]any{
			{"op": "test", "path": "/status/currentSynthesis/resourceSlices", "value": nil},
			{"op": "add", "path": "/status/currentSynthesis/resourceSlices", "value": []any{map[string]any{"name": "web-recovery-1"}}},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pre := domain.CommitPrecondition{UID: "uid-1", ResourceVersion: "41", SynthesisUUID: "s-1", Slices: tt.slices}
			got, err := commitPatch(pre, "web-recovery-1")
			require.NoError(t, err)
			assert.Equal(t, roundTrip(t, append(slices.Clone(tests), tt.want...)), decode(t, got))
		})
	}
}

// largeTombstones are n tombstones with names of 240 characters: about 3.7 KB of manifest JSON
// each with its precondition, so that 1,000 of them cross Eno's slice budget several times.
func largeTombstones(n int) []domain.Tombstone {
	ts := make([]domain.Tombstone, n)
	for i := range ts {
		ts[i] = domain.Tombstone{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a",
			Name:        fmt.Sprintf("cm-%05d-%s", i, strings.Repeat("n", 231)),
			Labels:      map[string]string{"app.kubernetes.io/name": "web", "app.kubernetes.io/component": "settings"},
			Annotations: map[string]string{domain.AnnotationDeletionGroup: "2", domain.AnnotationReadinessGroup: "1"}}, UID: testUID}
	}
	return ts
}

// A large approved recovery (design §6.2): 1,000 tombstones would be one create of several MiB,
// over the API server's request limit. The sink creates them in recovery slices of at most Eno's
// budget, each named as soon as it is created, and every one reads back.
func TestLargeHandoffOnARealAPIServer(t *testing.T) {
	const tombstones = 1000
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "large-handoff")
	sink, err := NewTombstoneSink(c.Dynamic)
	require.NoError(t, err)
	reader, err := NewSlices(c.Dynamic)
	require.NoError(t, err)
	comps := newCompositions(t, c.Dynamic, nil)

	comp := mustCreateComposition(t, c, sampleComposition(ns, "web"))
	h, err := domain.NewHandoff(domain.RecoveryPlan{
		Decision:       domain.Decision{SynthesisUUID: comp.SynthesisUUID(), Outcome: domain.OutcomeRecovered, Tombstones: tombstones},
		Tombstones:     largeTombstones(tombstones),
		HistoryWritten: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC),
	})
	require.NoError(t, err)
	parts, err := h.Parts()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(parts), 4, "several times over the budget")

	live, err := comps.LiveComposition(ctx, comp.Ref())
	require.NoError(t, err)
	start := time.Now()
	names := make([]string, len(parts))
	for i := range parts {
		names[i], err = sink.CreateRecoverySlice(ctx, live, h, i)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("web-recovery-5f0c8a4e-%s-%d", h.Digest, i), names[i])
		live, err = sink.AppendRecoverySlice(ctx, live, names[i])
		require.NoError(t, err)
	}
	handed := time.Since(start)
	after, err := comps.LiveComposition(ctx, comp.Ref())
	require.NoError(t, err)
	assert.Equal(t, append(comp.Synthesis.Slices, names...), after.Synthesis.Slices, "every slice appended, in order")
	assert.Equal(t, names, after.NamedRecoverySlices())

	read := make([]domain.ResourceSlice, len(names))
	for i, name := range names {
		read[i], err = reader.GetSlice(ctx, ns, name)
		require.NoError(t, err)
		manifest := 0
		for _, r := range read[i].Resources {
			manifest += len(r.Manifest)
		}
		assert.LessOrEqual(t, manifest, domain.MaxSliceManifestBytes, name)
		raw, err := c.Dynamic.Resource(ResourceSliceGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		object, err := raw.MarshalJSON()
		require.NoError(t, err)
		t.Logf("%s: %d tombstones, %d bytes of manifest JSON, %d bytes as stored", name, len(read[i].Resources), manifest, len(object))
	}
	back, err := domain.HandoffFromSlices(after, read)
	require.NoError(t, err)
	assert.Equal(t, h, back, "every tombstone reads back, each in the slice it was created in")
	t.Logf("%d tombstones in %d slices: created and named in %s", tombstones, len(names), handed)
}
