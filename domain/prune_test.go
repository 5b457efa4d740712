package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

var (
	webRef  = domain.CompositionRef{Namespace: "team-a", Name: "web"}
	web2Ref = domain.CompositionRef{Namespace: "team-a", Name: "web2"}
	// pruneRules prune a lineage gone for more than a day; the test Secrets were written at
	// historyWritten, an hour before now.
	pruneRules = domain.PruneRules{Now: now, OlderThan: 30 * time.Minute}
)

// chunksOf records n entries for ref as synthesis at time at; the chunk count depends on n.
func chunksOf(t *testing.T, ref domain.CompositionRef, uid, synthesis string, at time.Time, n int) []domain.ChunkSecret {
	t.Helper()
	s := recordedBy(t, ref.Namespace, ref.Name, uid, synthesis, at, n)
	require.Greater(t, len(s), 0)
	return s
}

// pruneFixture is a lineage of team-a/web: an older snapshot of 3 chunks whose chunks 0 and 1
// a newer snapshot of 2 chunks replaced, leaving chunk 2 over.
type pruneFixture struct {
	newer    []domain.ChunkSecret
	leftover domain.ChunkSecret
}

func newPruneFixture(t *testing.T) pruneFixture {
	t.Helper()
	older := chunksOf(t, webRef, oldCompUID, oldSynUUID, synTime.Add(-time.Hour), 14)
	newer := chunksOf(t, webRef, compUID, synUUID, synTime, 9)
	require.Len(t, older, 3)
	require.Len(t, newer, 2)
	require.Equal(t, older[1].Name, newer[1].Name, "the newer snapshot's chunks take the older's names")
	return pruneFixture{newer: newer, leftover: older[2]}
}

func (f pruneFixture) secrets() []domain.ChunkSecret {
	return join(f.newer, []domain.ChunkSecret{f.leftover})
}

func names(items []domain.PruneItem) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.Secret.Name)
	}
	return out
}

func secretNames(secrets []domain.ChunkSecret) []string {
	out := []string{}
	for _, s := range secrets {
		out = append(out, s.Name)
	}
	return out
}

func living(c domain.Composition) domain.Presence {
	return domain.Presence{Kind: domain.PresenceLiving, Composition: c}
}

var gone = domain.Presence{Kind: domain.PresenceGone}

// withHandoff is c with its current synthesis decided Recovered, the hand-off not carried yet.
func withHandoff(c domain.Composition) domain.Composition {
	d := domain.Decision{SynthesisUUID: c.SynthesisUUID(), Outcome: domain.OutcomeRecovered, Reason: "Orphans", DecidedAt: now,
		Tombstones: 1, TombstoneSlice: domain.RecoverySliceName(c.Name, c.SynthesisUUID(), "0123456789abcdef", 0)}
	c.Annotations = map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationDecision: d.Encode()}
	return c
}

func withHeld(c domain.Composition) domain.Composition {
	d := domain.Decision{SynthesisUUID: c.SynthesisUUID(), Outcome: domain.OutcomeHeldForReview, Reason: domain.ReasonOverDeletionGuard, DecidedAt: now}
	c.Annotations = map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationDecision: d.Encode()}
	return c
}

func foreign(s domain.ChunkSecret) domain.ChunkSecret {
	s = s.Clone()
	s.Name += "-foreign"
	delete(s.Labels, domain.LabelManagedBy)
	return s
}

func ofOtherType(s domain.ChunkSecret) domain.ChunkSecret {
	s = s.Clone()
	s.Name += "-opaque"
	s.Type = "Opaque"
	return s
}

// format1 is s as format 1 wrote it, under another name.
func format1(s domain.ChunkSecret, name string) domain.ChunkSecret {
	s = s.Clone()
	s.Name = name
	s.Annotations[domain.AnnotationFormat] = "1"
	return s
}

func TestSelectPrune(t *testing.T) {
	f := newPruneFixture(t)
	lineage := domain.DefaultLineage("team-a", "web")
	web := composition()
	f1Old := format1(chunksOf(t, web2Ref, oldCompUID, oldSynUUID, synTime.Add(-2*time.Hour), 1)[0], "web2-f1-0")
	f1New := format1(chunksOf(t, web2Ref, oldCompUID, "99999999-aaaa-bbbb-cccc-dddddddddddd", synTime.Add(time.Minute), 1)[0], "web2-f1-1")
	unwritten := f.secrets()
	unwritten[0].DataWrittenAt = time.Time{}
	tests := []struct {
		name      string
		secrets   []domain.ChunkSecret
		recorded  map[domain.CompositionRef]domain.Presence
		claimants []domain.Composition
		rules     func(*domain.PruneRules)
		want      []string
		reason    domain.PruneReason
		kept      string
	}{
		{name: "(a) a leftover chunk of a living lineage", secrets: f.secrets(),
			recorded: map[domain.CompositionRef]domain.Presence{webRef: living(web)},
			want:     []string{f.leftover.Name}, reason: domain.PruneLeftoverChunk},
		{name: "(a) a leftover chunk whose Composition is not known", secrets: f.secrets(),
			want: []string{f.leftover.Name}, reason: domain.PruneLeftoverChunk, kept: "not known"},
		{name: "nothing left over", secrets: f.newer,
			recorded: map[domain.CompositionRef]domain.Presence{webRef: living(web)}, want: []string{}},
		{name: "a pending hand-off keeps everything", secrets: f.secrets(),
			recorded: map[domain.CompositionRef]domain.Presence{webRef: living(withHandoff(web))}, want: []string{}, kept: "hand-off of team-a/web is pending"},
		{name: "a held review keeps everything", secrets: f.secrets(),
			recorded: map[domain.CompositionRef]domain.Presence{webRef: living(withHeld(web))}, want: []string{}, kept: "held for review"},
		{name: "a claimant's pending hand-off keeps everything", secrets: f.secrets(),
			recorded: map[domain.CompositionRef]domain.Presence{webRef: gone}, claimants: []domain.Composition{withHandoff(web)}, want: []string{}, kept: "pending"},
		{name: "(b) a gone lineage, every Secret of ours", secrets: join(f.secrets(), []domain.ChunkSecret{foreign(f.leftover), ofOtherType(f.leftover)}),
			recorded: map[domain.CompositionRef]domain.Presence{webRef: gone},
			want:     secretNames(f.secrets()), reason: domain.PruneLineageGone},
		{name: "(b) refused: no lineage of the cluster has a living Composition", secrets: f.secrets(),
			recorded: map[domain.CompositionRef]domain.Presence{webRef: gone}, rules: func(r *domain.PruneRules) { r.RefuseGone = true },
			want: []string{f.leftover.Name}, reason: domain.PruneLeftoverChunk, kept: "(b) is refused"},
		{name: "(b) a recorded Composition that cannot be read keeps the lineage", secrets: join(f.secrets(), chunksOf(t, web2Ref, oldCompUID, oldSynUUID, synTime.Add(-3*time.Hour), 1)),
			recorded: map[domain.CompositionRef]domain.Presence{webRef: gone, web2Ref: {Detail: "forbidden"}},
			want:     []string{f.leftover.Name}, reason: domain.PruneLeftoverChunk, kept: "team-a/web2 exists is not known (forbidden)"},
		{name: "(b) one recorded Composition living keeps the lineage and its newest snapshots", secrets: join(f.secrets(), chunksOf(t, web2Ref, oldCompUID, oldSynUUID, synTime.Add(-3*time.Hour), 1)),
			recorded: map[domain.CompositionRef]domain.Presence{webRef: gone, web2Ref: living(web)},
			want:     []string{f.leftover.Name}, reason: domain.PruneLeftoverChunk},
		{name: "(b) a living claimant keeps the lineage", secrets: f.newer,
			recorded: map[domain.CompositionRef]domain.Presence{webRef: gone}, claimants: []domain.Composition{web}, want: []string{}},
		{name: "(b) written too recently", secrets: f.newer,
			recorded: map[domain.CompositionRef]domain.Presence{webRef: gone}, rules: func(r *domain.PruneRules) { r.OlderThan = 2 * time.Hour },
			want: []string{}, kept: "not older than 2h0m0s"},
		{name: "(b) a write time not known", secrets: unwritten,
			recorded: map[domain.CompositionRef]domain.Presence{webRef: gone}, want: []string{f.leftover.Name}, reason: domain.PruneLeftoverChunk, kept: "no known write time"},
		{name: "(c) a format-1 chunk older than a complete snapshot", secrets: join(f.newer, []domain.ChunkSecret{f1Old, f1New}),
			recorded: map[domain.CompositionRef]domain.Presence{webRef: living(web)},
			want:     []string{f1Old.Name}, reason: domain.PruneSupersededFormat1},
		{name: "(c) no complete snapshot supersedes it", secrets: join(f.newer[1:], []domain.ChunkSecret{f1Old}),
			recorded: map[domain.CompositionRef]domain.Presence{webRef: living(web)}, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := pruneRules
			if tt.rules != nil {
				tt.rules(&rules)
			}
			plan := domain.SelectPrune(domain.PruneLineage{Lineage: lineage, Secrets: tt.secrets, Recorded: tt.recorded, Claimants: tt.claimants}, rules)
			assert.ElementsMatch(t, tt.want, names(plan.Selected))
			for _, it := range plan.Selected {
				assert.Equal(t, tt.reason, it.Reason, it.Secret.Name)
			}
			if tt.kept != "" {
				require.NotEmpty(t, plan.Kept)
				assert.Contains(t, plan.Kept[0], tt.kept)
			}
		})
	}
}

func TestSelectPruneSaysAGoneLineageEndsRecoverability(t *testing.T) {
	f := newPruneFixture(t)
	plan := domain.SelectPrune(domain.PruneLineage{Lineage: domain.DefaultLineage("team-a", "web"), Secrets: f.newer,
		Recorded: map[domain.CompositionRef]domain.Presence{webRef: gone}}, pruneRules)
	require.Len(t, plan.Selected, 2)
	assert.Contains(t, plan.Selected[0].Detail, "none of its Compositions (team-a/web) exists")
	assert.Contains(t, plan.Selected[0].Detail, "ends recoverability of lineage "+domain.DefaultLineage("team-a", "web").String())
	item, ok := plan.Selects(f.newer[1].Name)
	assert.True(t, ok)
	assert.Equal(t, f.newer[1].Name, item.Secret.Name)
	_, ok = plan.Selects("another")
	assert.False(t, ok)
}

func TestSelectPruneNamesTheUnresolvedItDeletes(t *testing.T) {
	f := newPruneFixture(t)
	secrets := withKept(f.newer, keptByHand)
	plan := domain.SelectPrune(domain.PruneLineage{Lineage: domain.DefaultLineage("team-a", "web"), Secrets: secrets,
		Recorded: map[domain.CompositionRef]domain.Presence{webRef: gone}}, pruneRules)
	item, ok := plan.Selects(secrets[0].Name)
	require.True(t, ok)
	assert.Contains(t, item.Detail, "it lists 1 object(s) kept for a person, check them by hand first: ConfigMap/team-a/kept")
	item, ok = plan.Selects(secrets[1].Name)
	require.True(t, ok)
	assert.NotContains(t, item.Detail, "kept for a person")
}

func TestPruneGoneAllowed(t *testing.T) {
	dead := domain.PruneLineage{Recorded: map[domain.CompositionRef]domain.Presence{webRef: gone}}
	unknown := domain.PruneLineage{Recorded: map[domain.CompositionRef]domain.Presence{webRef: {Detail: "timeout"}}}
	alive := domain.PruneLineage{Recorded: map[domain.CompositionRef]domain.Presence{webRef: living(composition())}}
	claimed := domain.PruneLineage{Claimants: []domain.Composition{composition()}}
	tests := []struct {
		name     string
		lineages []domain.PruneLineage
		want     bool
	}{
		{"no lineage", nil, false},
		{"every lineage gone or unknown", []domain.PruneLineage{dead, unknown}, false},
		{"one lineage with a living recorded Composition", []domain.PruneLineage{dead, alive}, true},
		{"one lineage with a living claimant", []domain.PruneLineage{dead, claimed}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, domain.PruneGoneAllowed(tt.lineages)) })
	}
}

func TestRecordedCompositions(t *testing.T) {
	f := newPruneFixture(t)
	other := chunksOf(t, web2Ref, oldCompUID, oldSynUUID, synTime, 1)
	refs, all := domain.RecordedCompositions(join(f.secrets(), other, []domain.ChunkSecret{foreign(other[0])}))
	assert.True(t, all)
	assert.Equal(t, []domain.CompositionRef{webRef, web2Ref}, refs)

	anon := other[0].Clone()
	delete(anon.Annotations, domain.AnnotationCompositionName)
	_, all = domain.RecordedCompositions([]domain.ChunkSecret{anon})
	assert.False(t, all)
}
