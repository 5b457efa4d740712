package domain_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

func recoveredPlan(t testing.TB) domain.RecoveryPlan {
	t.Helper()
	p := plan(t, composition(), snapshotOf(t, entriesN(4), "uid-old"), producing(t, 3), 1)
	require.Equal(t, domain.OutcomeRecovered, p.Decision.Outcome)
	return p
}

func TestNewHandoff(t *testing.T) {
	p := recoveredPlan(t)
	h, err := domain.NewHandoff(p)
	require.NoError(t, err)
	assert.Equal(t, synUUID, h.SynthesisUUID())
	require.Len(t, h.Resources, 1)
	assert.True(t, h.Resources[0].Deleted)
	e, withdrawn, err := domain.ParseTombstone(h.Resources[0])
	require.NoError(t, err)
	assert.False(t, withdrawn)
	assert.Equal(t, p.Tombstones[0].Entry, e, "the recorded entry, disabled unless its precondition holds")
	assert.Contains(t, h.Resources[0].Manifest, `"eno.azure.io/disable-reconciliation":"true"`)

	d := h.DecisionFor("web-recovery-11111111")
	assert.Equal(t, "web-recovery-11111111", d.TombstoneSlice)
	assert.Equal(t, 1, d.Tombstones)
	assert.Equal(t, oldSynUUID, d.RecoveredFrom)

	for _, bad := range []domain.RecoveryPlan{
		{Decision: domain.Decision{Outcome: domain.OutcomeNothingToRecover}},
		{Decision: domain.Decision{Outcome: domain.OutcomeRecovered}},
		{Decision: domain.Decision{Outcome: domain.OutcomeHeldForReview}, Held: p.Tombstones},
		{Decision: p.Decision, Tombstones: p.Tombstones}, // no write time: no precondition to write
	} {
		_, err := domain.NewHandoff(bad)
		assert.Error(t, err)
	}
}

func TestHandoffFromSlice(t *testing.T) {
	h, err := domain.NewHandoff(recoveredPlan(t))
	require.NoError(t, err)
	c := composition()
	good, err := h.RecoverySlice(c, 0)
	require.NoError(t, err)
	back, err := domain.HandoffFromSlice(c, good)
	require.NoError(t, err)
	assert.Equal(t, h, back)
	all, err := domain.HandoffFromSlices(c, []domain.ResourceSlice{good})
	require.NoError(t, err)
	assert.Equal(t, h, all)

	tests := []struct {
		name   string
		mutate func(*domain.ResourceSlice)
	}{
		{"Eno's stamp, not ours", func(s *domain.ResourceSlice) { s.SynthesisUUID = "" }},
		{"controlled by another object", func(s *domain.ResourceSlice) { s.ControllerUID = oldCompUID }},
		{"controlled by nothing", func(s *domain.ResourceSlice) { s.ControllerUID = "" }},
		{"another synthesis", func(s *domain.ResourceSlice) { s.SynthesisUUID = oldSynUUID }},
		{"no decision", func(s *domain.ResourceSlice) { s.Annotations = nil }},
		{"a decision that is not Recovered", func(s *domain.ResourceSlice) {
			s.Annotations = map[string]string{domain.AnnotationDecision: domain.Decision{SynthesisUUID: synUUID, Outcome: domain.OutcomeNoInventory}.Encode()}
		}},
		{"a resource that is not a tombstone", func(s *domain.ResourceSlice) {
			s.Resources = []domain.SliceResource{{Manifest: h.Resources[0].Manifest}}
		}},
		{"a stale writer's plain tombstone, with no precondition", func(s *domain.ResourceSlice) {
			s.Resources = append(slices.Clone(s.Resources), domain.SliceResource{Manifest: manifest("v1", "ConfigMap", "ns", "plain"), Deleted: true})
		}},
		{"stale writer: only plain tombstones", func(s *domain.ResourceSlice) {
			s.Resources = []domain.SliceResource{{Manifest: manifest("v1", "ConfigMap", "ns", "plain"), Deleted: true}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good
			s.Annotations = maps.Clone(good.Annotations)
			tt.mutate(&s)
			_, err := domain.HandoffFromSlice(c, s)
			assert.Error(t, err)
			// Among several, the slice that is no hand-off is named.
			second := s
			second.Name = h.SliceName(c, 1)
			_, err = domain.HandoffFromSlices(c, []domain.ResourceSlice{good, second})
			var invalid *domain.RecoverySliceInvalidError
			require.ErrorAs(t, err, &invalid)
			assert.Equal(t, second.Name, invalid.Slice)
		})
	}
}

func TestNamedRecoverySlices(t *testing.T) {
	name := func(uuid string, part int) string {
		return domain.RecoverySliceName("web", uuid, "0123456789abcdef", part)
	}
	family := domain.RecoverySliceFamily("web", synUUID)
	for _, tt := range []struct {
		name   string
		slices []string
		want   []string
	}{
		{"none", []string{"web-slice-1"}, nil},
		{"one part", []string{"web-slice-1", name(synUUID, 0)}, []string{name(synUUID, 0)}},
		{"several parts, in the synthesis's order", []string{name(synUUID, 0), "web-slice-1", name(synUUID, 1)}, []string{name(synUUID, 0), name(synUUID, 1)}},
		{"any name of the family counts, valid or not", []string{family, family + "-x"}, []string{family, family + "-x"}},
		{"another synthesis's recovery slice", []string{name(oldSynUUID, 0)}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := composition()
			c.Synthesis.Slices = tt.slices
			assert.Equal(t, tt.want, c.NamedRecoverySlices())
		})
	}
}

// One reading says where a hand-off stands; an armed hand-off ends disarmed: done once a
// synthesis that names no recovery slice is Ready, abandoned once the Composition leaves
// recovery, and nothing else retires it.
func TestHandoffStateOf(t *testing.T) {
	const digest = "0123456789abcdef"
	named := domain.RecoverySliceName("web", synUUID, digest, 0)
	part1 := domain.RecoverySliceName("web", synUUID, digest, 1)
	carried := domain.RecoverySliceName("web", oldSynUUID, digest, 0)
	recovered := domain.Decision{SynthesisUUID: synUUID, Outcome: domain.OutcomeRecovered, TombstoneSlice: named, DecidedAt: time.Now()}
	nothing := domain.Decision{SynthesisUUID: synUUID, Outcome: domain.OutcomeNothingToRecover, Reason: domain.ReasonAlreadyDecided, DecidedAt: time.Now()}
	ineligible := func(r domain.IneligibleReason) *domain.IneligibleError { return &domain.IneligibleError{Reason: r} }
	type comp struct {
		armed    string
		ready    bool
		slices   []string
		decision *domain.Decision
		carried  bool
	}
	for _, tt := range []struct {
		name       string
		comp       comp
		ineligible *domain.IneligibleError
		want       domain.HandoffState
		names      []string
	}{
		{"nothing named", comp{ready: true, slices: []string{goldenSlice}}, nil, domain.HandoffUnplanned, nil},
		{"armed, nothing named yet: planned again", comp{armed: digest, slices: []string{goldenSlice}}, nil, domain.HandoffUnplanned, nil},
		{"named, not decided", comp{armed: digest, slices: []string{goldenSlice, named}}, nil, domain.HandoffNamed, []string{named}},
		{"named, not decided, Ready: resumed first", comp{armed: digest, ready: true, slices: []string{goldenSlice, named}}, nil, domain.HandoffNamed, []string{named}},
		{"decided Recovered", comp{armed: digest, slices: []string{goldenSlice, named}, decision: &recovered}, nil, domain.HandoffDecided, []string{named}},
		{"decided Recovered, every part", comp{armed: digest, slices: []string{goldenSlice, named, part1}, decision: &recovered}, nil, domain.HandoffDecided, []string{named, part1}},
		{"decided Recovered, its slice no longer named: still looked at", comp{armed: digest, slices: []string{goldenSlice}, decision: &recovered}, nil, domain.HandoffDecided, []string{named}},
		{"decided Recovered, a stale Ready", comp{armed: digest, ready: true, slices: []string{goldenSlice, named}, decision: &recovered}, nil, domain.HandoffDecided, []string{named}},
		{"decided otherwise", comp{ready: true, slices: []string{goldenSlice}, decision: &nothing}, nil, domain.HandoffNone, nil},
		{"carried, not Ready", comp{armed: digest, slices: []string{goldenSlice}, decision: &nothing, carried: true}, nil, domain.HandoffCarried, []string{carried}},
		{"carried, not Ready, disarmed: still watched", comp{armed: domain.ArmedOff, slices: []string{goldenSlice}, decision: &nothing, carried: true}, nil, domain.HandoffCarried, []string{carried}},
		{"carried and Ready", comp{armed: digest, ready: true, slices: []string{goldenSlice}, decision: &nothing, carried: true}, nil, domain.HandoffDone, nil},
		{"a Ready synthesis that names no recovery slice", comp{armed: digest, ready: true, slices: []string{goldenSlice}, decision: &nothing}, nil, domain.HandoffDone, nil},
		{"Ready, already disarmed", comp{armed: domain.ArmedOff, ready: true, slices: []string{goldenSlice}, decision: &nothing}, nil, domain.HandoffNone, nil},
		{"Ready, already done", comp{armed: domain.ArmedDone, ready: true, slices: []string{goldenSlice}, decision: &nothing, carried: true}, nil, domain.HandoffNone, nil},
		{"opted out while armed", comp{armed: digest, slices: []string{goldenSlice, named}}, ineligible(domain.IneligibleNotOptedIn), domain.HandoffAbandoned, nil},
		{"recovery disabled while armed", comp{armed: digest, slices: []string{goldenSlice, named}}, ineligible(domain.IneligibleDisabled), domain.HandoffAbandoned, nil},
		{"an unusable lineage while armed", comp{armed: digest, slices: []string{goldenSlice, named}}, ineligible(domain.IneligibleInvalidLineage), domain.HandoffAbandoned, nil},
		{"deleting: the precondition sees it", comp{armed: digest, slices: []string{goldenSlice, named}}, ineligible(domain.IneligibleDeleting), domain.HandoffLeftAlone, nil},
		{"out of scope: its shard watches it", comp{armed: digest, slices: []string{goldenSlice, named}}, ineligible(domain.IneligibleOutOfScope), domain.HandoffLeftAlone, nil},
		{"opted out, never armed", comp{slices: []string{goldenSlice}}, ineligible(domain.IneligibleNotOptedIn), domain.HandoffLeftAlone, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := composition()
			c.Synthesis.Slices, c.Synthesis.Ready = tt.comp.slices, tt.comp.ready
			if tt.comp.armed != "" {
				c.Annotations[domain.AnnotationArmed] = tt.comp.armed
			}
			if tt.comp.decision != nil {
				c.Annotations[domain.AnnotationDecision] = tt.comp.decision.Encode()
			}
			if tt.comp.carried {
				c.PreviousSynthesis = &domain.Synthesis{UUID: oldSynUUID, Slices: []string{"web-old", carried}}
			}
			state, names := domain.HandoffStateOf(c, tt.ineligible)
			assert.Equal(t, tt.want, state)
			assert.Equal(t, tt.names, names)
		})
	}
}

// The hand-off is complete once force-resynthesis names the current synthesis, not another.
func TestResynthesisRequested(t *testing.T) {
	c := composition()
	assert.False(t, c.ResynthesisRequested())
	c.Annotations[domain.AnnotationForceResynthesis] = "an-earlier-synthesis"
	assert.False(t, c.ResynthesisRequested())
	c.Annotations[domain.AnnotationForceResynthesis] = c.SynthesisUUID()
	assert.True(t, c.ResynthesisRequested())
}

// The commit point's precondition is the object read, unchanged: any write since, a new
// incarnation or synthesis, one in flight, or another slice list moves it on.
func TestCommitPrecondition(t *testing.T) {
	read := composition()
	read.ResourceVersion = "41"
	pre := domain.CommitPreconditionOf(read)
	assert.Empty(t, pre.MovedOn(read))
	for _, tt := range []struct {
		name   string
		change func(c *domain.Composition)
	}{
		{"any write (a review flipped to reject)", func(c *domain.Composition) { c.ResourceVersion = "42" }},
		{"recreated", func(c *domain.Composition) { c.UID = "uid-other" }},
		{"a new synthesis", func(c *domain.Composition) {
			c.Synthesis = &domain.Synthesis{UUID: oldSynUUID, Slices: c.Synthesis.Slices}
		}},
		{"a synthesis in flight", func(c *domain.Composition) { c.InFlightSynthesis = oldSynUUID }},
		{"another slice list", func(c *domain.Composition) {
			c.Synthesis = &domain.Synthesis{UUID: synUUID, Slices: []string{goldenSlice, "other"}}
		}},
		{"no slice list", func(c *domain.Composition) { c.Synthesis = &domain.Synthesis{UUID: synUUID} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			live := read
			tt.change(&live)
			assert.NotEmpty(t, pre.MovedOn(live))
		})
	}
}

func TestCheckReusable(t *testing.T) {
	h, err := domain.NewHandoff(recoveredPlan(t))
	require.NoError(t, err)
	c := composition()
	want, err := h.RecoverySlice(c, 0)
	require.NoError(t, err)
	require.NoError(t, domain.CheckReusable(c, want, want))
	// The same plan made again a second later (a retry after a lost response) differs only in
	// its decidedAt: the slice there is this very part.
	again := recoveredPlan(t)
	again.Decision.DecidedAt = again.Decision.DecidedAt.Add(time.Second)
	h2, err := domain.NewHandoff(again)
	require.NoError(t, err)
	retry, err := h2.RecoverySlice(c, 0)
	require.NoError(t, err)
	require.Equal(t, want.Name, retry.Name)
	require.NoError(t, domain.CheckReusable(c, want, retry))
	for name, spoil := range map[string]func(s *domain.ResourceSlice){
		"terminating":        func(s *domain.ResourceSlice) { s.Deleting = true },
		"another controller": func(s *domain.ResourceSlice) { s.ControllerUID = oldCompUID },
		"another synthesis":  func(s *domain.ResourceSlice) { s.SynthesisUUID = oldSynUUID },
		"other tombstones":   func(s *domain.ResourceSlice) { s.Resources = append(s.Resources[:1:1], s.Resources[0]) },
		"another decision":   func(s *domain.ResourceSlice) { s.Annotations = map[string]string{domain.AnnotationDecision: "{}"} },
		"another outcome": func(s *domain.ResourceSlice) {
			s.Annotations = maps.Clone(s.Annotations)
			s.Annotations[domain.AnnotationDecision] = strings.Replace(s.Annotations[domain.AnnotationDecision], `"tombstones":`, `"tombstones":9`, 1)
		},
	} {
		s := want
		spoil(&s)
		assert.Error(t, domain.CheckReusable(c, s, want), name)
	}
}

// stale writer after a reload (R2): a refused slice stays named, and eno-reconciler acts on its tombstones
// on its next restart; the refusal says what to do before one.
func TestRecoverySliceInvalidTellsWhatToDoBeforeARestart(t *testing.T) {
	msg := (&domain.RecoverySliceInvalidError{Slice: "web-recovery-0", Detail: "no precondition"}).Error()
	for _, want := range []string{"web-recovery-0", "no precondition", "eno-reconciler restart", domain.AnnotationDisableReconciliation + `: "true"`, "remove the slice from the synthesis"} {
		assert.Contains(t, msg, want)
	}
}
