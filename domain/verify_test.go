package domain_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// design §6.3: a tombstone is published only for an object that exists and is not newer than
// the history; the same second counts as older.
func TestVerifyTombstones(t *testing.T) {
	written := time.Date(2025, 6, 1, 11, 0, 0, 0, time.UTC)
	ts := func(n string) domain.Tombstone {
		return domain.Tombstone{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: n}, UID: testUID}
	}
	present := func(created time.Time) domain.Observation {
		return domain.Observation{State: domain.ObjectPresent, Created: created, Writes: enoWrote(created), UID: testUID}
	}
	tests := []struct {
		name   string
		obs    *domain.Observation // nil: never read
		known  bool
		keep   bool
		reason domain.DropReason
	}{
		{"older object", &domain.Observation{State: domain.ObjectPresent, Created: written.Add(-time.Hour), Writes: enoWrote(written.Add(-time.Hour)), UID: testUID}, true, true, domain.DropReason{}},
		{"created in the very second the history was written", ptr(present(written.Add(900 * time.Millisecond))), true, true, domain.DropReason{}},
		{"created one second after", ptr(present(written.Add(time.Second))), true, false, domain.DropNewer},
		{"created a day after (re-created by hand)", ptr(present(written.Add(24 * time.Hour))), true, false, domain.DropNewer},
		{"NotFound", &domain.Observation{State: domain.ObjectAbsent}, true, false, domain.DropNotFound},
		{"Forbidden or unknown kind", &domain.Observation{State: domain.ObjectUnreadable, Detail: "forbidden"}, true, false, domain.DropUnreadable},
		{"never read", nil, true, false, domain.DropUnreadable},
		{"another composition produces it (identical takeover)", &domain.Observation{State: domain.ObjectProducedElsewhere, Detail: "slice team-b/x"}, true, false, domain.DropProducedElsewhere},
		{"no managedFields (stripped history)", &domain.Observation{State: domain.ObjectPresent, Created: written.Add(-time.Hour), UID: testUID}, true, false, domain.DropUnreadable},
		{"write time unknown", ptr(present(written.Add(-time.Hour))), false, false, domain.DropUnknownWriteTime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			observed := map[domain.ResourceID]domain.Observation{}
			if tt.obs != nil {
				observed[ts("x").Entry.ID()] = *tt.obs
			}
			keep, dropped := domain.VerifyTombstones([]domain.Tombstone{ts("x")}, observed, domain.EnoManagers{}, written, tt.known)
			if tt.keep {
				assert.Len(t, keep, 1)
				assert.Empty(t, dropped)
				return
			}
			assert.Empty(t, keep)
			require.Len(t, dropped, 1)
			assert.Equal(t, tt.reason, dropped[0].Reason)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// The outcome when design §6.3 leaves nothing: NoOrphans when every drop proves the object needs no
// deletion, Unverified when anything was kept back for doubt; the guard counts what remains.
func TestPlanRecoveryVerification(t *testing.T) {
	self := composition()
	own := recordedBy(t, "team-a", "web", "uid-pred", "s-pred", synTime, 4)
	snap, err := domain.ReadSnapshotFor(self, own, now, 0, domain.AdoptWithinNamespace)
	require.NoError(t, err)
	ids := make([]domain.ResourceID, 4)
	for i, e := range entriesN(4) {
		ids[i] = e.ID()
	}
	old := domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Writes: enoWrote(historyWritten.Add(-time.Hour)), UID: testUID}
	newer := domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(time.Hour), Writes: enoWrote(historyWritten.Add(time.Hour)), UID: testUID}
	gone := domain.Observation{State: domain.ObjectAbsent}
	unreadable := domain.Observation{State: domain.ObjectUnreadable, Detail: "forbidden"}
	taken := domain.Observation{State: domain.ObjectProducedElsewhere, Detail: "resource slice team-b/other-1 of another composition produces it"}
	tests := []struct {
		name       string
		obs        []domain.Observation
		fraction   float64
		want       domain.Outcome
		reason     string
		tombstones int
		inMessage  string
	}{
		{"all verified", []domain.Observation{old, old, old, old}, 1, domain.OutcomeRecovered, "", 4, ""},
		{"some dropped, the rest published", []domain.Observation{gone, newer, old, old}, 1, domain.OutcomeRecovered, "", 2,
			"dropped 2: 1 NotFound (first ConfigMap/ns/cm-000), 1 CreatedAfterHistory (first ConfigMap/ns/cm-001"},
		{"all gone or newer", []domain.Observation{gone, newer, gone, newer}, 1, domain.OutcomeNothingToRecover, domain.ReasonNoOrphans, 0, "dropped 4"},
		{"taken over by another composition: it keeps them (identical takeover)", []domain.Observation{taken, taken, gone, newer}, 1, domain.OutcomeNothingToRecover, domain.ReasonNoOrphans, 0, "2 ProducedElsewhere (first ConfigMap/ns/cm-000: resource slice team-b/other-1"},
		{"one unreadable among the drops", []domain.Observation{gone, unreadable, gone, newer}, 1, domain.OutcomeNothingToRecover, domain.ReasonUnverified, 0, "1 Unreadable (first ConfigMap/ns/cm-001: forbidden)"},
		{"the guard counts what remains", []domain.Observation{gone, gone, old, old}, 0.5, domain.OutcomeRecovered, "", 2, ""},
		{"and trips on what remains", []domain.Observation{gone, old, old, old}, 0.5, domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, 3, "dropped 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			observed := map[domain.ResourceID]domain.Observation{}
			for i, o := range tt.obs {
				observed[ids[i]] = o
			}
			p, err := domain.PlanRecovery(domain.RecoveryInput{Composition: self, Snapshot: snap, Synthesis: producing(t, 0),
				Observed: observed, MaxTombstoneFraction: tt.fraction, Now: now})
			require.NoError(t, err)
			assert.Equal(t, tt.want, p.Decision.Outcome, p.Decision.Message)
			assert.Equal(t, tt.reason, p.Decision.Reason)
			assert.Equal(t, tt.tombstones, p.Decision.Tombstones)
			assert.Contains(t, p.Decision.Message, tt.inMessage)
			if tt.want == domain.OutcomeRecovered {
				assert.Len(t, p.Tombstones, tt.tombstones)
			} else {
				assert.Empty(t, p.Tombstones)
			}
			if tt.reason == domain.ReasonUnverified {
				assert.Empty(t, p.Decision.RecoveredFrom, "Unverified does not set recoveredFrom")
			}
		})
	}
	t.Run("unknown write time keeps everything", func(t *testing.T) {
		secrets := recordedBy(t, "team-a", "web", "uid-pred", "s-pred", synTime, 4)
		secrets[0].DataWrittenAt = time.Time{}
		snap, err := domain.ReadSnapshotFor(self, secrets, now, 0, domain.AdoptWithinNamespace)
		require.NoError(t, err)
		observed := map[domain.ResourceID]domain.Observation{}
		for _, id := range ids {
			observed[id] = old
		}
		p, err := domain.PlanRecovery(domain.RecoveryInput{Composition: self, Snapshot: snap, Synthesis: producing(t, 0),
			Observed: observed, MaxTombstoneFraction: 1, Now: now})
		require.NoError(t, err)
		assert.Equal(t, domain.OutcomeNothingToRecover, p.Decision.Outcome)
		assert.Equal(t, domain.ReasonUnverified, p.Decision.Reason)
		assert.Empty(t, p.Tombstones)
		assert.Contains(t, p.Decision.Message, "4 UnknownWriteTime")
	})
}

// design §6.3: who wrote the object decides. Entries of its main resource must each be one of
// Eno's field managers and no newer than the history (an entry without a time is unknown);
// without any entry, only a bare object is eligible.
func TestVerifyTombstonesJudgesWhoWroteTheObject(t *testing.T) {
	ts := domain.Tombstone{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "a"}, UID: testUID}
	old := historyWritten.Add(-time.Hour)
	custom, err := domain.NewEnoManagers([]string{"eno", "my-eno"})
	require.NoError(t, err)
	for name, tt := range map[string]struct {
		writes []domain.ObjectWrite
		bare   bool
		eno    domain.EnoManagers
		reason domain.DropReason // zero: tombstoned
		detail string
	}{
		"Eno's apply before the history":     {writes: enoWrote(old)},
		"written the same second":            {writes: enoWrote(historyWritten.Add(500 * time.Millisecond))},
		"Eno's own update as eno-reconciler": {writes: []domain.ObjectWrite{{Manager: "eno", Time: old}, {Manager: "eno-reconciler", Time: old}}},
		"written after":                      {writes: enoWrote(historyWritten.Add(time.Second)), reason: domain.DropChanged},
		"Eno's entry without a time":         {writes: enoWrote(time.Time{}), reason: domain.DropChanged, detail: "carries no time"},
		"co-managed before the history (Flux)": {writes: []domain.ObjectWrite{{Manager: "eno", Time: old}, {Manager: "kustomize-controller", Time: old}},
			reason: domain.DropManagedElsewhere, detail: `"kustomize-controller"`},
		"identical takeover (no time)": {writes: []domain.ObjectWrite{{Manager: "eno", Time: old}, {Manager: "kubectl"}},
			reason: domain.DropManagedElsewhere, detail: `"kubectl"`},
		"an operator's Eno manager":    {writes: []domain.ObjectWrite{{Manager: "my-eno", Time: old}}, eno: custom},
		"eno-reconciler, not named":    {writes: []domain.ObjectWrite{{Manager: "eno-reconciler", Time: old}}, eno: custom, reason: domain.DropManagedElsewhere},
		"bare: nothing to own":         {bare: true},
		"content but no managedFields": {reason: domain.DropUnreadable, detail: "stripped"},
		"managed though judged bare":   {writes: []domain.ObjectWrite{{Manager: "kubectl", Time: old}}, bare: true, reason: domain.DropManagedElsewhere},
	} {
		t.Run(name, func(t *testing.T) {
			o := domain.Observation{State: domain.ObjectPresent, Created: old, Writes: tt.writes, Bare: tt.bare, UID: testUID}
			keep, dropped := domain.VerifyTombstones([]domain.Tombstone{ts}, map[domain.ResourceID]domain.Observation{ts.Entry.ID(): o}, tt.eno, historyWritten, true)
			if tt.reason == (domain.DropReason{}) {
				assert.Empty(t, dropped)
				require.Len(t, keep, 1)
				return
			}
			assert.Empty(t, keep)
			require.Len(t, dropped, 1)
			assert.Equal(t, tt.reason, dropped[0].Reason)
			assert.Contains(t, dropped[0].Detail, tt.detail)
		})
	}
}

// Eno's field managers are validated: a name must be quotable in a precondition.
func TestNewEnoManagers(t *testing.T) {
	for name, tt := range map[string]struct {
		names []string
		ok    bool
	}{
		"Eno's":            {names: []string{"eno", "eno-reconciler"}, ok: true},
		"none":             {},
		"a quote":          {names: []string{`eno" || true || "`}},
		"empty name":       {names: []string{""}},
		"over 128":         {names: []string{strings.Repeat("e", 129)}},
		"a path-like name": {names: []string{"kube-controller-manager/v1.30"}, ok: true},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := domain.NewEnoManagers(tt.names)
			if !tt.ok {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.names, m.Names())
		})
	}
	assert.Equal(t, domain.DefaultEnoManagers, domain.EnoManagers{}.Names())
}

// design §6.3: what no manager can own. The server-set label of a Namespace and null fields
// (a ClusterRole's rules) are no content; anything else is.
func TestIsBare(t *testing.T) {
	meta := func(extra map[string]any) map[string]any {
		m := map[string]any{"name": "a", "namespace": "ns", "uid": testUID, "resourceVersion": "1", "creationTimestamp": "2025-06-01T10:00:00Z"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for name, tt := range map[string]struct {
		obj  map[string]any
		bare bool
	}{
		"empty ConfigMap": {obj: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(nil)}, bare: true},
		"ClusterRole without rules": {obj: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
			"metadata": meta(nil), "rules": nil}, bare: true},
		"Namespace's own label": {obj: map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": meta(map[string]any{"labels": map[string]any{"kubernetes.io/metadata.name": "a"}}), "status": map[string]any{"phase": "Active"}}, bare: true},
		"data":                 {obj: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(nil), "data": map[string]any{"k": "v"}}},
		"empty data":           {obj: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(nil), "data": map[string]any{}}},
		"a label":              {obj: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(map[string]any{"labels": map[string]any{"app": "x"}})}},
		"annotations":          {obj: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(map[string]any{"annotations": map[string]any{"a": "b"}})}},
		"finalizers":           {obj: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(map[string]any{"finalizers": []any{"x"}})}},
		"owner":                {obj: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(map[string]any{"ownerReferences": []any{map[string]any{}}})}},
		"Namespace's own spec": {obj: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": meta(nil), "spec": map[string]any{"finalizers": []any{"kubernetes"}}}, bare: true},
		"another finalizer":    {obj: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": meta(nil), "spec": map[string]any{"finalizers": []any{"kubernetes", "x"}}}},
		"spec":                 {obj: map[string]any{"apiVersion": "v1", "kind": "Example", "metadata": meta(nil), "spec": map[string]any{"replicas": 1}}},
	} {
		t.Run(name, func(t *testing.T) { assert.Equal(t, tt.bare, domain.IsBare(tt.obj)) })
	}
}
