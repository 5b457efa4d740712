package domain_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Every per-resource annotation of Eno that decides how it acts on a tombstone is recorded
// verbatim, and nothing else is.
func TestInventoryRecordsEnosAnnotations(t *testing.T) {
	annotations := map[string]string{
		domain.AnnotationReadinessGroup:        "1",
		domain.AnnotationDeletionGroup:         "-2",
		domain.AnnotationDisableReconciliation: "true",
		domain.AnnotationDeletionStrategy:      "orphan",
		domain.AnnotationFailOpen:              "false",
		domain.AnnotationOverrides:             `[{"path":"self.spec.replicas","value":3,"condition":"self.spec.replicas == null"}]`,
	}
	m := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{
		"name": "a", "namespace": "ns", "annotations": merged(annotations, map[string]string{
			"eno.azure.io/replace": "true", "unrelated": "x", "eno.azure.io/reconcile-interval": "1m",
		}),
	}}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	contents := readSynthesis(t, string(b))
	entries := contents.Inventory().Entries()
	require.Len(t, entries, 1)
	assert.Equal(t, annotations, entries[0].Annotations)

	// And they survive the inventory's encoding: a chunk decodes back to them.
	chunks, err := domain.SplitInventory(contents.Inventory(), domain.DefaultMaxChunkBytes, domain.DefaultMaxChunks)
	require.NoError(t, err)
	decoded, err := domain.DecodeEntries(chunks[0].Data())
	require.NoError(t, err)
	assert.Equal(t, annotations, decoded[0].Annotations)
}

func merged(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func TestEntryDisabled(t *testing.T) {
	const key = domain.AnnotationDisableReconciliation
	override := func(path string) string {
		b, _ := json.Marshal([]map[string]any{{"path": path, "value": "true", "condition": "has(self.metadata)"}})
		return string(b)
	}
	tests := []struct {
		name        string
		annotations map[string]string
		disabled    bool
	}{
		{"nothing", nil, false},
		{"disabled", map[string]string{key: "true"}, true},
		{"explicitly enabled", map[string]string{key: "false"}, false},
		{"not exactly true", map[string]string{key: "True"}, false},
		{"groups only", map[string]string{domain.AnnotationDeletionGroup: "1", domain.AnnotationReadinessGroup: "2"}, false},
		{"orphan strategy", map[string]string{domain.AnnotationDeletionStrategy: "orphan"}, false},
		{"override of the key, double quotes", map[string]string{domain.AnnotationOverrides: override(`self.metadata.annotations["` + key + `"]`)}, true},
		{"override of the key, single quotes", map[string]string{domain.AnnotationOverrides: override(`self.metadata.annotations['` + key + `']`)}, true},
		{"override of the key, leading dot", map[string]string{domain.AnnotationOverrides: override(`.self.metadata.annotations["` + key + `"]`)}, true},
		{"override of the key, bracketed fields", map[string]string{domain.AnnotationOverrides: override(`self["metadata"]['annotations']["` + key + `"]`)}, true},
		{"override of the key, spaces", map[string]string{domain.AnnotationOverrides: override(` self . metadata . annotations [ "` + key + `" ] `)}, true},
		{"override of all annotations", map[string]string{domain.AnnotationOverrides: override(`self.metadata.annotations`)}, true},
		{"override of the metadata", map[string]string{domain.AnnotationOverrides: override(`self.metadata`)}, true},
		{"override of the object", map[string]string{domain.AnnotationOverrides: override(`self`)}, true},
		{"override through a wildcard", map[string]string{domain.AnnotationOverrides: override(`self.metadata[*]["` + key + `"]`)}, true},
		{"override of another annotation", map[string]string{domain.AnnotationOverrides: override(`self.metadata.annotations["eno.azure.io/replace"]`)}, false},
		{"override of a label", map[string]string{domain.AnnotationOverrides: override(`self.metadata.labels["` + key + `"]`)}, false},
		{"override of the spec", map[string]string{domain.AnnotationOverrides: override(`self.spec.replicas`)}, false},
		{"override below the key", map[string]string{domain.AnnotationOverrides: override(`self.metadata.annotations["` + key + `"].x`)}, false},
		{"one of several overrides", map[string]string{domain.AnnotationOverrides: `[{"path":"self.spec.x","value":1},{"path":"self.metadata.annotations[\"` + key + `\"]","value":"true"}]`}, true},
		{"overrides not JSON", map[string]string{domain.AnnotationOverrides: `not json`}, true},
		{"override without a path", map[string]string{domain.AnnotationOverrides: `[{"value":"true"}]`}, true},
		{"override path unreadable", map[string]string{domain.AnnotationOverrides: override(`self.metadata.annotations["` + key)}, true},
		{"override path of punctuation", map[string]string{domain.AnnotationOverrides: override(`self.metadata#annotations`)}, true},
		{"empty override list", map[string]string{domain.AnnotationOverrides: `[]`}, false},
		{"null override list", map[string]string{domain.AnnotationOverrides: `null`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a", Annotations: tt.annotations}
			assert.Equal(t, tt.disabled, e.Disabled())
		})
	}
}

// An absent entry that Eno could skip is never tombstoned, and needs no downstream read; the
// others carry every recorded annotation to the tombstone verbatim.
func TestPlanRecoveryDropsDisabled(t *testing.T) {
	annotations := map[string]string{
		domain.AnnotationDeletionGroup:    "3",
		domain.AnnotationDeletionStrategy: "foreground",
		domain.AnnotationFailOpen:         "true",
		domain.AnnotationOverrides:        `[{"path":"self.data.x","value":"y"}]`,
	}
	entries := []domain.Entry{
		{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "disabled", Annotations: map[string]string{domain.AnnotationDisableReconciliation: "true"}},
		{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "migrating", Annotations: map[string]string{
			domain.AnnotationOverrides: `[{"path":"self.metadata.annotations[\"eno.azure.io/disable-reconciliation\"]","value":"true","condition":"composition.metadata.name == 'old'"}]`}},
		{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "orphan", Annotations: annotations},
		{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "produced-1"},
		{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "produced-2"},
		{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "produced-3"},
	}
	snap := snapshotOf(t, entries, oldCompUID)
	contents := readSynthesis(t, manifest("v1", "ConfigMap", "ns", "produced-1"), manifest("v1", "ConfigMap", "ns", "produced-2"),
		manifest("v1", "ConfigMap", "ns", "produced-3"))
	in := domain.RecoveryInput{Composition: composition(), Snapshot: snap, Synthesis: contents,
		MaxTombstoneFraction: domain.DefaultMaxTombstoneFraction, Now: now}
	first, err := domain.PlanRecovery(in)
	require.NoError(t, err)
	require.False(t, first.Decided())
	assert.Equal(t, []domain.ResourceID{{Kind: "ConfigMap", Namespace: "ns", Name: "orphan"}}, tombstoneIDs(first.Verify), "a disabled entry needs no read")

	p := planObserved(t, in)
	require.Equal(t, domain.OutcomeRecovered, p.Decision.Outcome)
	require.Len(t, p.Tombstones, 1)
	assert.Equal(t, annotations, p.Tombstones[0].Entry.Annotations)
	var m struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal([]byte(p.Tombstones[0].Manifest()), &m))
	assert.Equal(t, annotations, m.Metadata.Annotations, "the tombstone carries what was recorded, verbatim")
	require.Len(t, p.Dropped, 2)
	for _, d := range p.Dropped {
		assert.Equal(t, domain.DropDisabled, d.Reason)
	}
	assert.Contains(t, p.Decision.Message, "2 Disabled (first ConfigMap/ns/disabled")
}

// With every absent entry disabled, nothing is read and nothing is orphaned.
func TestPlanRecoveryAllDisabled(t *testing.T) {
	entries := []domain.Entry{
		{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "disabled", Annotations: map[string]string{domain.AnnotationDisableReconciliation: "true"}},
		{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "kept"},
	}
	snap := snapshotOf(t, entries, oldCompUID)
	p, err := domain.PlanRecovery(domain.RecoveryInput{Composition: composition(), Snapshot: snap,
		Synthesis: readSynthesis(t, manifest("v1", "ConfigMap", "ns", "kept")), MaxTombstoneFraction: 1, Now: now})
	require.NoError(t, err)
	require.True(t, p.Decided(), "no downstream read is needed")
	assert.Equal(t, domain.OutcomeNothingToRecover, p.Decision.Outcome)
	assert.Equal(t, domain.ReasonNoOrphans, p.Decision.Reason)
	assert.Empty(t, p.Tombstones)
}

// An object that reports no creationTimestamp cannot be told apart from one re-created since
// the history was written: it is kept.
func TestVerifyTombstonesWithoutCreationTimestamp(t *testing.T) {
	ts := domain.Tombstone{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "a"}, UID: testUID}
	keep, dropped := domain.VerifyTombstones([]domain.Tombstone{ts},
		map[domain.ResourceID]domain.Observation{ts.Entry.ID(): {State: domain.ObjectPresent}}, domain.EnoManagers{}, historyWritten, true)
	assert.Empty(t, keep)
	require.Len(t, dropped, 1)
	assert.Equal(t, domain.DropUnreadable, dropped[0].Reason)
	assert.Contains(t, dropped[0].Detail, "creationTimestamp")
}

// A format-1 snapshot cannot say which resources were disabled: the whole lineage is refused.
func TestReadSnapshotRefusesFormatOne(t *testing.T) {
	secrets := goldenSecrets(t)
	secrets[1].Annotations[domain.AnnotationFormat] = "1"
	_, err := domain.ReadSnapshotFor(composition(), secrets, now, domain.DefaultMaxChunks, domain.AdoptWithinNamespace)
	assert.Equal(t, domain.ReasonMalformed, invalidReason(t, err))
	assert.Contains(t, err.Error(), "format 1")
}

// Property: whatever a snapshot recorded, no tombstone, held or published, is for an entry that
// Eno could skip, and each carries exactly the recorded annotations.
func FuzzDisabledNeverTombstoned(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5}, "self.metadata.annotations", uint8(0))
	f.Add([]byte{1, 1, 1}, `self.metadata.annotations["eno.azure.io/disable-reconciliation"]`, uint8(1))
	f.Add([]byte{2, 3}, "self.spec", uint8(2))
	f.Fuzz(func(t *testing.T, kinds []byte, path string, review uint8) {
		if !utf8.ValidString(path) {
			return // an inventory holds valid UTF-8 only
		}
		if len(kinds) > 12 {
			kinds = kinds[:12]
		}
		var entries []domain.Entry
		for i, k := range kinds {
			e := domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: fmt.Sprintf("e%d", i)}
			switch k % 6 {
			case 1:
				e.Annotations = map[string]string{domain.AnnotationDisableReconciliation: "true"}
			case 2:
				e.Annotations = map[string]string{domain.AnnotationDisableReconciliation: "false", domain.AnnotationDeletionGroup: "1"}
			case 3:
				b, _ := json.Marshal([]map[string]string{{"path": path, "value": "true"}})
				e.Annotations = map[string]string{domain.AnnotationOverrides: string(b)}
			case 4:
				e.Annotations = map[string]string{domain.AnnotationOverrides: path}
			case 5:
				e.Annotations = map[string]string{domain.AnnotationFailOpen: path}
			}
			entries = append(entries, e)
		}
		if len(entries) == 0 {
			return
		}
		snap := snapshotOf(t, entries, oldCompUID)
		c := composition()
		if review%2 == 1 {
			c.Annotations[domain.AnnotationReview] = "approve:" + synUUID
		}
		p := planObserved(t, domain.RecoveryInput{Composition: c, Snapshot: snap, Synthesis: readSynthesis(t),
			MaxTombstoneFraction: float64(review%3) / 2, Now: now})
		recorded := map[domain.ResourceID]domain.Entry{}
		for _, e := range entries {
			recorded[e.ID()] = e
		}
		for _, ts := range append(append([]domain.Tombstone{}, p.Tombstones...), p.Held...) {
			e := recorded[ts.Entry.ID()]
			require.False(t, e.Disabled(), "tombstone for %s, which Eno could skip", e.ID())
			require.NotEqual(t, "true", e.Annotations[domain.AnnotationDisableReconciliation])
			require.Equal(t, len(e.Annotations), len(ts.Entry.Annotations))
			for k, v := range e.Annotations {
				require.Equal(t, v, ts.Entry.Annotations[k])
			}
		}
	})
}

// Eno reads disable-reconciliation from the resource first, else from the Composition: a paused
// Composition's resources are recorded disabled (Eno marks it Ready without applying them), and
// so are never tombstoned later; a resource's own value wins.
func TestReadSynthesisCascadesTheCompositionsDisable(t *testing.T) {
	c := composition()
	c.Annotations[domain.AnnotationDisableReconciliation] = "true"
	own := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{
		"name": "own", "namespace": "ns", "annotations": map[string]string{domain.AnnotationDisableReconciliation: "false"}}}
	b, err := json.Marshal(own)
	require.NoError(t, err)
	contents, err := domain.ReadSynthesis(c, []domain.ResourceSlice{slice(goldenSlice,
		domain.SliceResource{Manifest: manifest("v1", "ConfigMap", "ns", "paused")},
		domain.SliceResource{Manifest: string(b)},
	)})
	require.NoError(t, err)
	byName := map[string]domain.Entry{}
	for _, e := range contents.Inventory().Entries() {
		byName[e.Name] = e
	}
	assert.True(t, byName["paused"].Disabled(), "recorded disabled through the Composition")
	assert.False(t, byName["own"].Disabled(), "the resource's own value wins, as in Eno")

	delete(c.Annotations, domain.AnnotationDisableReconciliation)
	contents, err = domain.ReadSynthesis(c, []domain.ResourceSlice{slice(goldenSlice, domain.SliceResource{Manifest: manifest("v1", "ConfigMap", "ns", "paused")})})
	require.NoError(t, err)
	assert.False(t, contents.Inventory().Entries()[0].Disabled())

	// Only a pause is carried: an explicit "false" recorded into a tombstone would beat a pause
	// an operator puts on the recreated Composition.
	c.Annotations[domain.AnnotationDisableReconciliation] = "false"
	contents, err = domain.ReadSynthesis(c, []domain.ResourceSlice{slice(goldenSlice, domain.SliceResource{Manifest: manifest("v1", "ConfigMap", "ns", "paused")})})
	require.NoError(t, err)
	_, recorded := contents.Inventory().Entries()[0].Annotations[domain.AnnotationDisableReconciliation]
	assert.False(t, recorded)
}
