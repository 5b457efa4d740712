package k8s

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// The commit point appends every recovery slice, in order, in one patch behind the same tests;
// a synthesis without a list gets the whole array at once (design §6.2 step 2).
func TestCommitPatchAppendsEverySliceInOrder(t *testing.T) {
	pre := domain.CommitPrecondition{UID: "uid-1", ResourceVersion: "41", SynthesisUUID: "s-1", Slices: []string{"web-slice-0"}}
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

	refs := []any{map[string]any{"name": "web-slice-0"}}
	got, err := commitPatch(pre, refs, []string{"web-recovery-1", "web-recovery-1-1", "web-recovery-1-2"})
	require.NoError(t, err)
	want := append(append([]map[string]any{}, tests...),
		map[string]any{"op": "test", "path": "/status/currentSynthesis/resourceSlices", "value": refs},
		map[string]any{"op": "add", "path": "/status/currentSynthesis/resourceSlices/-", "value": map[string]any{"name": "web-recovery-1"}},
		map[string]any{"op": "add", "path": "/status/currentSynthesis/resourceSlices/-", "value": map[string]any{"name": "web-recovery-1-1"}},
		map[string]any{"op": "add", "path": "/status/currentSynthesis/resourceSlices/-", "value": map[string]any{"name": "web-recovery-1-2"}},
	)
	assert.Equal(t, roundTrip(t, want), decode(t, got))

	got, err = commitPatch(pre, nil, []string{"web-recovery-1", "web-recovery-1-1"})
	require.NoError(t, err)
	want = append(append([]map[string]any{}, tests...),
		map[string]any{"op": "test", "path": "/status/currentSynthesis/resourceSlices", "value": nil},
		map[string]any{"op": "add", "path": "/status/currentSynthesis/resourceSlices", "value": []any{
			map[string]any{"name": "web-recovery-1"}, map[string]any{"name": "web-recovery-1-1"}}},
	)
	assert.Equal(t, roundTrip(t, want), decode(t, got))
}

// largeTombstones are n tombstones with names of 240 characters: about 440 bytes of manifest
// JSON each, so that 6,000 of them cross Eno's slice budget several times.
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

// A large approved recovery (design §6.2 step 1): 6,000 tombstones would be one create of several
// MiB, over the API server's request limit. The sink publishes them in recovery slices of at
// most Eno's budget, commits them all in one patch, and every one reads back.
func TestLargeHandoffOnARealAPIServer(t *testing.T) {
	const tombstones = 6000
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

	start := time.Now()
	names, err := sink.PublishTombstones(ctx, comp, h)
	require.NoError(t, err)
	published := time.Since(start)
	assert.Equal(t, domain.RecoverySliceSeriesOf("web", comp.SynthesisUUID())[0].Names(len(parts)), names)
	assert.Equal(t, "web-recovery-5f0c8a4e", names[0])
	assert.Equal(t, "web-recovery-5f0c8a4e-1", names[1])

	live, err := comps.LiveComposition(ctx, comp.Ref())
	require.NoError(t, err)
	start = time.Now()
	require.NoError(t, sink.CommitTombstones(ctx, live, h, names))
	committed := time.Since(start)
	after, err := comps.LiveComposition(ctx, comp.Ref())
	require.NoError(t, err)
	assert.Equal(t, append(comp.Synthesis.Slices, names...), after.Synthesis.Slices, "every slice appended, in order")
	again, ok := after.CommittedRecoverySlices()
	require.True(t, ok)
	assert.Equal(t, names, again)

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
	assert.Equal(t, h, back, "every tombstone reads back, each in the slice it was published in")
	require.NoError(t, sink.EnsureTombstones(ctx, after, names, h))
	t.Logf("%d tombstones in %d slices: published in %s, committed in %s", tombstones, len(names), published, committed)
}
