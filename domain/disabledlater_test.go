package domain_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// A later synthesis that disabled an entry of the recorded snapshot, and was never recorded,
// marks the snapshot; recovery then treats the entry as Disabled (design §4, §6, disabled later).
func TestDisabledLater(t *testing.T) {
	cm := func(name string, annotations map[string]string) domain.Entry {
		return domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: name, Annotations: annotations}
	}
	disabled := map[string]string{domain.AnnotationDisableReconciliation: "true"}
	override := map[string]string{domain.AnnotationOverrides: `[{"path":"self.metadata.annotations[\"eno.azure.io/disable-reconciliation\"]","value":"true","condition":"true"}]`}
	id := func(name string) domain.ResourceID { return cm(name, nil).ID() }
	recorded := []domain.Entry{cm("a", nil), cm("b", nil), cm("c", disabled), cm("d", nil)}
	newerManifest := func(name string, annotations map[string]string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"team-a","annotations":` + toJSON(annotations) + `}}`
	}
	tests := []struct {
		name  string
		newer []string
		marks []string // existing marks on chunk 0, raw
		want  []domain.ResourceID
		// kept: the tombstones of a, b, d that recovery drops as Disabled
		kept []domain.ResourceID
	}{
		{"nothing disabled later: no write", []string{newerManifest("a", nil), newerManifest("b", nil)}, nil, nil, nil},
		{"an entry disabled by annotation", []string{newerManifest("a", disabled), newerManifest("b", nil)}, nil, []domain.ResourceID{id("a")}, []domain.ResourceID{id("a")}},
		{"an entry disabled by an override able to write it", []string{newerManifest("b", override)}, nil, []domain.ResourceID{id("b")}, []domain.ResourceID{id("b")}},
		{"an entry recorded disabled needs no mark", []string{newerManifest("c", disabled)}, nil, nil, nil},
		{"an entry the snapshot never recorded needs no mark", []string{newerManifest("z", disabled)}, nil, nil, nil},
		{"an entry removed later is not disabled", []string{}, nil, nil, nil},
		{"already marked: no write", []string{newerManifest("a", disabled)}, []string{`{"snapshot":"` + oldSynUUID + `","ids":[{"kind":"ConfigMap","namespace":"team-a","name":"a"}]}`}, nil, []domain.ResourceID{id("a")}},
		{"a mark of another snapshot is stale", []string{newerManifest("a", disabled)}, []string{`{"snapshot":"other","ids":[{"kind":"ConfigMap","namespace":"team-a","name":"a"}]}`}, []domain.ResourceID{id("a")}, []domain.ResourceID{id("a")}},
		{"an unreadable mark keeps every entry", nil, []string{`{not json`}, nil, []domain.ResourceID{id("a"), id("b"), id("d")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := mustInventory(t, recorded)
			secrets := secretsFor(t, inv, meta(inv, oldCompUID, oldSynUUID, synTime.Add(-2*time.Hour)), 400)
			for _, m := range tt.marks {
				secrets[0].Annotations[domain.AnnotationDisabledLater] = m
			}
			snap, err := domain.ReadSnapshotFor(composition(), secrets, now, domain.DefaultMaxChunks, domain.AdoptWithinNamespace)
			require.NoError(t, err)
			got := domain.NewlyDisabled(snap, readSynthesis(t, tt.newer...))
			assert.Equal(t, tt.want, got, "the identities a mark must add")

			if len(got) > 0 {
				// The mark written, the snapshot read again: the entry is Disabled, and nothing more is to add.
				secrets[len(secrets)-1] = domain.MarkDisabledLater(secrets[len(secrets)-1], snap, got)
				snap, err = domain.ReadSnapshotFor(composition(), secrets, now, domain.DefaultMaxChunks, domain.AdoptWithinNamespace)
				require.NoError(t, err, "a mark is no part of the snapshot's integrity")
				assert.Empty(t, domain.NewlyDisabled(snap, readSynthesis(t, tt.newer...)))
			}
			var ts []domain.Tombstone
			for _, e := range []domain.Entry{cm("a", nil), cm("b", nil), cm("d", nil)} {
				ts = append(ts, domain.Tombstone{Entry: e})
			}
			rest, dropped := domain.SplitDisabledLater(snap, ts)
			var kept []domain.ResourceID
			for _, d := range dropped {
				assert.Equal(t, domain.DropDisabled, d.Reason)
				kept = append(kept, d.Tombstone.Entry.ID())
			}
			assert.Equal(t, tt.kept, kept)
			assert.Len(t, rest, len(ts)-len(kept))
		})
	}
}

// MarkDisabledLater adds to a mark of the same snapshot and replaces a stale one.
func TestMarkDisabledLaterAdds(t *testing.T) {
	entries := entriesN(3)
	inv := mustInventory(t, entries)
	secrets := secretsFor(t, inv, meta(inv, oldCompUID, oldSynUUID, synTime.Add(-2*time.Hour)), 4000)
	snap, err := domain.ReadSnapshotFor(composition(), secrets, now, domain.DefaultMaxChunks, domain.AdoptWithinNamespace)
	require.NoError(t, err)
	stale := secrets[0].Clone()
	stale.Annotations[domain.AnnotationDisabledLater] = `{"snapshot":"earlier","ids":[{"kind":"ConfigMap","namespace":"ns","name":"cm-001"}]}`
	s := domain.MarkDisabledLater(stale, snap, []domain.ResourceID{entries[2].ID()})
	s = domain.MarkDisabledLater(s, snap, []domain.ResourceID{entries[0].ID()})
	assert.JSONEq(t, `{"snapshot":"`+oldSynUUID+`","ids":[{"kind":"ConfigMap","namespace":"ns","name":"cm-000"},{"kind":"ConfigMap","namespace":"ns","name":"cm-002"}]}`,
		s.Annotations[domain.AnnotationDisabledLater])
	assert.NotContains(t, secrets[0].Annotations, domain.AnnotationDisabledLater, "the Secret given is not changed")
}

func toJSON(m map[string]string) string {
	if m == nil {
		return "{}"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// Recovery drops a marked entry as Disabled, without reading it (disabled later).
func TestPlanKeepsWhatALaterSynthesisDisabled(t *testing.T) {
	entries := entriesN(2)
	inv := mustInventory(t, entries)
	secrets := secretsFor(t, inv, meta(inv, oldCompUID, oldSynUUID, synTime.Add(-2*time.Hour)), 4000)
	snap, err := domain.ReadSnapshotFor(composition(), secrets, now, domain.DefaultMaxChunks, domain.AdoptWithinNamespace)
	require.NoError(t, err)
	secrets[0] = domain.MarkDisabledLater(secrets[0], snap, []domain.ResourceID{entries[0].ID()})
	snap, err = domain.ReadSnapshotFor(composition(), secrets, now, domain.DefaultMaxChunks, domain.AdoptWithinNamespace)
	require.NoError(t, err)
	p := plan(t, composition(), snap, readSynthesis(t), 1)
	assert.Equal(t, domain.OutcomeRecovered, p.Decision.Outcome, p.Decision.Message)
	assert.Equal(t, []domain.ResourceID{entries[1].ID()}, tombstoneIDs(p.Tombstones))
	require.Len(t, p.Dropped, 1)
	assert.Equal(t, domain.DropDisabled, p.Dropped[0].Reason)
	assert.Equal(t, entries[0].ID(), p.Dropped[0].Tombstone.Entry.ID())
}

// A tombstone keeps Eno's old manifest: one disabled there is skipped by Eno and its object kept,
// so it marks the snapshot too; a tombstone disabled only by this controller's precondition does
// not (disabled later).
func TestDisabledLaterCountsKeptTombstones(t *testing.T) {
	cm := func(name string) domain.Entry {
		return domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: name}
	}
	inv := mustInventory(t, []domain.Entry{cm("a"), cm("b")})
	secrets := secretsFor(t, inv, meta(inv, oldCompUID, oldSynUUID, synTime.Add(-2*time.Hour)), 400)
	snap, err := domain.ReadSnapshotFor(composition(), secrets, now, domain.DefaultMaxChunks, domain.AdoptWithinNamespace)
	require.NoError(t, err)
	cond, err := domain.Precondition(testUID, domain.EnoManagers{}, synTime, "0123456789abcdef")
	require.NoError(t, err)
	path := "self.metadata.annotations['" + domain.AnnotationDisableReconciliation + "']"
	raw, err := json.Marshal([]map[string]string{{"path": path, "value": "true", "condition": "!(" + cond + ")"}, {"path": path, "value": "false", "condition": cond}})
	require.NoError(t, err)
	pre := string(raw)
	tombstone := func(name string, annotations map[string]string) domain.SliceResource {
		return domain.SliceResource{Deleted: true, Manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"team-a","annotations":` + toJSON(annotations) + `}}`}
	}
	newer, err := domain.ReadSynthesis(composition(), []domain.ResourceSlice{slice(goldenSlice,
		tombstone("a", map[string]string{domain.AnnotationDisableReconciliation: "true"}),
		tombstone("b", domain.TombstoneAnnotations(nil, pre)),
	)})
	require.NoError(t, err)
	assert.Equal(t, []domain.ResourceID{cm("a").ID()}, domain.NewlyDisabled(snap, newer))
}
