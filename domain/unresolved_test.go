package domain_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// keptByHand is an object an earlier recovery kept for a person; it is in no inventory.
var keptByHand = domain.Unresolved{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "kept", UID: testUID,
	Reason: "ManagedElsewhere", Detail: `field manager "argocd" manages it`, Since: historyWritten, SourceSynthesisUUID: oldSynUUID}

// withKept is secrets with chunk 0 carrying us, as recording writes it.
func withKept(secrets []domain.ChunkSecret, us ...domain.Unresolved) []domain.ChunkSecret {
	out := make([]domain.ChunkSecret, len(secrets))
	for i, s := range secrets {
		out[i] = s.Clone()
	}
	out[0] = domain.WithUnresolved(out[0], us)
	return out
}

func TestUnresolvedFormats(t *testing.T) {
	golden := goldenSecrets(t)
	for name, tc := range map[string]struct {
		secrets []domain.ChunkSecret
		format  string
		want    []domain.Unresolved
	}{
		"format 2 is still read":       {golden, "2", nil},
		"format 3 round trip":          {withKept(golden, keptByHand), "3", []domain.Unresolved{keptByHand}},
		"none leaves format 2 written": {withKept(golden), "2", nil},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.format, tc.secrets[0].Annotations[domain.AnnotationFormat])
			snap, err := domain.ReadHistory(tc.secrets, now, domain.DefaultMaxChunks).Verdict()
			require.NoError(t, err)
			assert.Equal(t, goldenDigest, snap.Inventory().Digest(), "the inventory and its digest are untouched")
			assert.Equal(t, tc.want, snap.Unresolved())
			got, unreadable := domain.UnresolvedIn(tc.secrets, domain.CompositionRef{Namespace: "team-a", Name: "web"})
			assert.Empty(t, unreadable)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestUnresolvedMalformed(t *testing.T) {
	for name, mutate := range map[string]func(s []domain.ChunkSecret){
		"entries changed":  func(s []domain.ChunkSecret) { s[0].Data[domain.UnresolvedDataKey] = []byte(`[]`) },
		"digest missing":   func(s []domain.ChunkSecret) { delete(s[0].Annotations, domain.AnnotationUnresolvedDigest) },
		"data key missing": func(s []domain.ChunkSecret) { delete(s[0].Data, domain.UnresolvedDataKey) },
		"in a later chunk": func(s []domain.ChunkSecret) {
			s[1].Data[domain.UnresolvedDataKey] = s[0].Data[domain.UnresolvedDataKey]
		},
		"in format 2":   func(s []domain.ChunkSecret) { s[0].Annotations[domain.AnnotationFormat] = domain.FormatVersion },
		"unknown field": func(s []domain.ChunkSecret) { setUnresolved(s, `[{"kind":"ConfigMap","name":"a","extra":1}]`) },
		"not a list":    func(s []domain.ChunkSecret) { setUnresolved(s, `{}`) },
	} {
		t.Run(name, func(t *testing.T) {
			secrets := withKept(goldenSecrets(t), keptByHand)
			mutate(secrets)
			_, err := domain.ReadHistory(secrets, now, domain.DefaultMaxChunks).Verdict()
			assert.Equal(t, domain.ReasonMalformed, invalidReason(t, err))
			_, unreadable := domain.UnresolvedIn(secrets[:1], domain.CompositionRef{Namespace: "team-a", Name: "web"})
			if name != "in a later chunk" {
				assert.Equal(t, []string{secrets[0].Name}, unreadable)
			}
		})
	}
}

// setUnresolved stores data as chunk 0's entries under a matching digest.
func setUnresolved(s []domain.ChunkSecret, data string) {
	sum := sha256.Sum256([]byte(data))
	s[0].Data[domain.UnresolvedDataKey] = []byte(data)
	s[0].Annotations[domain.AnnotationUnresolvedDigest] = "sha256:" + hex.EncodeToString(sum[:])
}

// An unresolved entry is a report, never a deletion candidate: recovery plans from the
// inventory alone, whatever chunk 0 lists.
func TestUnresolvedNeverPlanned(t *testing.T) {
	entries := entriesN(4)
	inv := mustInventory(t, entries)
	secrets := withKept(secretsFor(t, inv, meta(inv, oldCompUID, oldSynUUID, synTime.Add(-time.Hour)), 400), keptByHand)
	snap, err := domain.ReadSnapshotFor(composition(), secrets, now, domain.DefaultMaxChunks, domain.AdoptWithinNamespace)
	require.NoError(t, err)
	require.Equal(t, []domain.Unresolved{keptByHand}, snap.Unresolved())
	p := plan(t, composition(), snap, producing(t, 2), 1)
	assert.Equal(t, domain.OutcomeRecovered, p.Decision.Outcome)
	for _, ts := range append(append(p.Tombstones, p.Verify...), p.Held...) {
		assert.NotEqual(t, keptByHand.Entry().ID(), ts.Entry.ID())
	}
	assert.Len(t, p.Tombstones, 2, "the two absent inventory entries, nothing else")
}

func TestUnresolvedOfAndMerge(t *testing.T) {
	entry := func(name string) domain.Entry {
		return domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: name}
	}
	decided := historyWritten.Add(time.Hour)
	p := domain.RecoveryPlan{Decision: domain.Decision{SynthesisUUID: synUUID, DecidedAt: decided}, Dropped: []domain.DroppedTombstone{
		{Tombstone: domain.Tombstone{Entry: entry("gone")}, Reason: domain.DropNotFound},
		{Tombstone: domain.Tombstone{Entry: entry("new")}, Reason: domain.DropNewer},
		{Tombstone: domain.Tombstone{Entry: entry("kept"), UID: "u2"}, Reason: domain.DropManagedElsewhere, Detail: "later"},
		{Tombstone: domain.Tombstone{Entry: entry("b-cascade"), UID: "u3"}, Reason: domain.DropCascading},
	}}
	fresh := domain.UnresolvedOf(p)
	require.Len(t, fresh, 2, "only the reasons a person resolves")
	merged := domain.MergeUnresolved([]domain.Unresolved{keptByHand}, fresh)
	require.Len(t, merged, 2)
	assert.Equal(t, "b-cascade", merged[0].Name, "sorted")
	assert.Equal(t, keptByHand, merged[1], "the entry first kept keeps its time")

	present := domain.Observation{State: domain.ObjectPresent, UID: testUID}
	assert.True(t, domain.StillUnresolved(keptByHand, present))
	assert.True(t, domain.StillUnresolved(keptByHand, domain.Observation{State: domain.ObjectReadFailed}))
	assert.False(t, domain.StillUnresolved(keptByHand, domain.Observation{State: domain.ObjectAbsent}))
	assert.False(t, domain.StillUnresolved(keptByHand, domain.Observation{State: domain.ObjectPresent, UID: "another"}))
}

// An operator dismisses entries with an annotation naming the snapshot; the next recording does
// not carry them. A dismissal of another snapshot, or unreadable, dismisses nothing.
func TestUnresolvedDismissed(t *testing.T) {
	other := keptByHand
	other.Name = "other"
	for name, tc := range map[string]struct {
		value string
		want  []domain.Unresolved
	}{
		"dismissed":        {`{"snapshot":"` + oldSynUUID + `","ids":["ConfigMap/team-a/kept"]}`, []domain.Unresolved{other}},
		"another snapshot": {`{"snapshot":"` + synUUID + `","ids":["ConfigMap/team-a/kept"]}`, []domain.Unresolved{keptByHand, other}},
		"unreadable":       {`ConfigMap/team-a/kept`, []domain.Unresolved{keptByHand, other}},
	} {
		t.Run(name, func(t *testing.T) {
			secrets := withKept(goldenSecrets(t), keptByHand, other)
			secrets[0].Annotations[domain.AnnotationUnresolvedDismissed] = tc.value
			snap, err := domain.ReadHistory(secrets, now, domain.DefaultMaxChunks).Verdict()
			require.NoError(t, err)
			assert.Equal(t, tc.want, snap.Unresolved())
			got, _ := domain.UnresolvedIn(secrets, domain.CompositionRef{Namespace: "team-a", Name: "web"})
			assert.Equal(t, tc.want, got)
		})
	}
}

// Dismiss adds to what the snapshot's dismissal named before, and replaces another snapshot's.
func TestDismiss(t *testing.T) {
	other := keptByHand
	other.Name = "other"
	for name, tc := range map[string]struct {
		before string
		want   string
	}{
		"none before":      {"", `{"snapshot":"` + oldSynUUID + `","ids":["ConfigMap/team-a/other"]}`},
		"kept":             {`{"snapshot":"` + oldSynUUID + `","ids":["ConfigMap/team-a/kept"]}`, `{"snapshot":"` + oldSynUUID + `","ids":["ConfigMap/team-a/kept","ConfigMap/team-a/other"]}`},
		"another snapshot": {`{"snapshot":"` + synUUID + `","ids":["ConfigMap/team-a/kept"]}`, `{"snapshot":"` + oldSynUUID + `","ids":["ConfigMap/team-a/other"]}`},
	} {
		t.Run(name, func(t *testing.T) {
			secrets := withKept(goldenSecrets(t), keptByHand, other)
			if tc.before != "" {
				secrets[0].Annotations[domain.AnnotationUnresolvedDismissed] = tc.before
			}
			before := secrets[0].Annotations[domain.AnnotationUnresolvedDismissed]
			got := domain.Dismiss(secrets[0], []domain.Unresolved{other})
			assert.Equal(t, tc.want, got.Annotations[domain.AnnotationUnresolvedDismissed])
			assert.Equal(t, before, secrets[0].Annotations[domain.AnnotationUnresolvedDismissed], "the Secret read is not changed")
			assert.Equal(t, secrets[0].Data, got.Data, "an annotation only")
		})
	}
}

// A Recovered plan's kept objects ride part 0 of its recovery slices, bounded; a slice made again
// from the same plan is reusable whatever it lists, and KeptIn reads the list back.
func TestHandoffCarriesWhatThePlanKept(t *testing.T) {
	kept := func(name string, r domain.DropReason) domain.DroppedTombstone {
		return domain.DroppedTombstone{Tombstone: domain.Tombstone{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: name}, UID: testUID}, Reason: r, Detail: "why"}
	}
	tomb := []domain.Tombstone{{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "t"}, UID: testUID}}
	plan := domain.RecoveryPlan{Decision: domain.Decision{SynthesisUUID: synUUID, Outcome: domain.OutcomeRecovered, Tombstones: 1, DecidedAt: now},
		Tombstones: tomb, HistoryWritten: historyWritten,
		Dropped: []domain.DroppedTombstone{kept("elsewhere", domain.DropManagedElsewhere), kept("gone", domain.DropNotFound), kept("cascade", domain.DropCascading)}}
	h, err := domain.NewHandoff(plan)
	require.NoError(t, err)
	require.Equal(t, domain.UnresolvedOf(plan), h.Kept)
	require.Len(t, h.Kept, 2, "what a person resolves, not NotFound")
	assert.NotContains(t, h.SliceAnnotations(1, 2), domain.AnnotationKept, "part 0 only")
	comp := composition()
	s, err := h.RecoverySlice(comp, 0)
	require.NoError(t, err)
	got, err := domain.KeptIn([]domain.ResourceSlice{s})
	require.NoError(t, err)
	assert.Equal(t, h.Kept, got)

	plan.Decision.DecidedAt = now.Add(time.Minute) // the same plan made again
	again, err := domain.NewHandoff(plan)
	require.NoError(t, err)
	want, err := again.RecoverySlice(comp, 0)
	require.NoError(t, err)
	require.NotEqual(t, s.Annotations[domain.AnnotationKept], want.Annotations[domain.AnnotationKept])
	assert.NoError(t, domain.CheckReusable(comp, s, want))

	s.Annotations[domain.AnnotationKept] = "[{"
	_, err = domain.KeptIn([]domain.ResourceSlice{s})
	assert.ErrorContains(t, err, "recovery slice "+s.Name+": "+domain.AnnotationKept)

	long := strings.Repeat("x", 1000)
	for i := range 300 {
		d := kept(fmt.Sprintf("many-%03d", i), domain.DropUnreadable)
		d.Detail = long
		plan.Dropped = append(plan.Dropped, d)
	}
	big, err := domain.NewHandoff(plan)
	require.NoError(t, err)
	data, _ := domain.EncodeUnresolved(big.Kept)
	assert.LessOrEqual(t, len(data), 128<<10, "bounded within the slice's annotations")
	assert.Greater(t, len(data), 120<<10, "as many as fit")
}

// The recording after a refused history carries the orphans it names, as far as its data reads;
// after any other decision, or one of another synthesis, nothing.
func TestUnresolvedOfRefused(t *testing.T) {
	entries := entriesN(4)
	inv := mustInventory(t, entries)
	current := mustInventory(t, entries[:2])
	decided := func(d domain.Decision) domain.Composition {
		c := composition()
		c.Annotations[domain.AnnotationDecision] = d.Encode()
		return c
	}
	refused := domain.Decision{SynthesisUUID: synUUID, Outcome: domain.OutcomeInventoryInvalid, Reason: "DigestMismatch"}
	for name, tc := range map[string]struct {
		comp       domain.Composition
		mutate     func([]domain.ChunkSecret)
		want       []string
		unreadable bool
	}{
		"refused":             {decided(refused), nil, []string{"cm-002", "cm-003"}, false},
		"other namespace":     {decided(domain.Decision{SynthesisUUID: synUUID, Outcome: domain.OutcomeNothingToRecover, Reason: domain.ReasonOtherNamespace}), nil, []string{"cm-002", "cm-003"}, false},
		"checked history":     {decided(domain.Decision{SynthesisUUID: synUUID, Outcome: domain.OutcomeNothingToRecover, Reason: domain.ReasonNoOrphans}), nil, nil, false},
		"no decision":         {composition(), nil, nil, false},
		"another synthesis":   {decided(domain.Decision{SynthesisUUID: oldSynUUID, Outcome: domain.OutcomeInventoryInvalid, Reason: "DigestMismatch"}), nil, nil, false},
		"unreadable chunk":    {decided(refused), func(s []domain.ChunkSecret) { s[3].Data[domain.SecretDataKey] = []byte("{") }, []string{"cm-002"}, true},
		"another composition": {decided(refused), func(s []domain.ChunkSecret) { s[3].Annotations[domain.AnnotationCompositionName] = "api" }, []string{"cm-002"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			secrets := secretsFor(t, inv, meta(inv, oldCompUID, oldSynUUID, synTime.Add(-time.Hour)), 120)
			require.Len(t, secrets, 4, "one entry a chunk")
			if tc.mutate != nil {
				tc.mutate(secrets)
			}
			us, unreadable, omitted := domain.UnresolvedOfRefused(tc.comp, secrets, current, now)
			var got []string
			for _, u := range us {
				got = append(got, u.Name)
				assert.Equal(t, oldSynUUID, u.SourceSynthesisUUID)
				assert.Equal(t, now, u.Since)
			}
			assert.ElementsMatch(t, tc.want, got)
			assert.Equal(t, tc.unreadable, len(unreadable) == 1)
			assert.Zero(t, omitted)
		})
	}
}
