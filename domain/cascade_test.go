package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// design §6.3: the kinds whose deletion deletes other objects, and the command that deletes one.
func TestCascades(t *testing.T) {
	tests := []struct {
		id       domain.ResourceID
		cascades bool
	}{
		{domain.ResourceID{Kind: "Namespace", Name: "app"}, true},
		{domain.ResourceID{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition", Name: "widgets.example.com"}, true},
		{domain.ResourceID{Group: "apiregistration.k8s.io", Kind: "APIService", Name: "v1.metrics.k8s.io"}, true},
		{domain.ResourceID{Kind: "PersistentVolume", Name: "pv-1"}, true},
		{domain.ResourceID{Kind: "PersistentVolumeClaim", Namespace: "app", Name: "data"}, true},
		{domain.ResourceID{Kind: "ServiceAccount", Namespace: "app", Name: "runner"}, true},
		{domain.ResourceID{Kind: "ConfigMap", Namespace: "app", Name: "settings"}, false},
		{domain.ResourceID{Group: "apps", Kind: "Deployment", Namespace: "app", Name: "web"}, false},
		{domain.ResourceID{Group: "example.com", Kind: "Namespace", Name: "app"}, false},
		{domain.ResourceID{Kind: "CustomResourceDefinition", Name: "widgets.example.com"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			assert.Equal(t, tt.cascades, domain.Cascades(tt.id) != "", domain.Cascades(tt.id))
		})
	}
	assert.Equal(t, "kubectl delete namespace app", domain.KubectlDelete(domain.ResourceID{Kind: "Namespace", Name: "app"}))
	assert.Equal(t, "kubectl delete serviceaccount runner -n app", domain.KubectlDelete(domain.ResourceID{Kind: "ServiceAccount", Namespace: "app", Name: "runner"}))
	assert.Equal(t, "kubectl delete apiservice.apiregistration.k8s.io v1.metrics.k8s.io",
		domain.KubectlDelete(domain.ResourceID{Group: "apiregistration.k8s.io", Kind: "APIService", Name: "v1.metrics.k8s.io"}))
}

// design §6.3 (R1): an orphan whose deletion cascades is never handed to Eno, approved or not; it
// is dropped as CascadingKind with the command an operator may run after looking, and the guard
// counts it with what is handed over.
func TestPlanRecoveryCascading(t *testing.T) {
	self := composition()
	nsEntry := domain.Entry{Version: "v1", Kind: "Namespace", Name: "old-ns"}
	crdEntry := domain.Entry{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Name: "widgets.example.com"}
	pvc := domain.Entry{Version: "v1", Kind: "PersistentVolumeClaim", Namespace: "old-ns", Name: "data"}
	cm := domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "old-ns", Name: "orphan"}
	keep := domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "keep"}
	old := domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Writes: enoWrote(historyWritten.Add(-time.Hour)), UID: testUID}
	contents := readSynthesis(t, manifest("v1", "ConfigMap", "team-a", "keep"))
	tests := []struct {
		name       string
		entries    []domain.Entry
		review     string
		fraction   float64
		outcome    domain.Outcome
		reason     string
		tombstones []domain.ResourceID
		inMessage  string
	}{
		{"no cascade: published under the guard", []domain.Entry{cm, keep}, "", 1, domain.OutcomeRecovered, "", []domain.ResourceID{cm.ID()}, ""},
		{"a Namespace is listed, the rest handed over", []domain.Entry{nsEntry, cm, keep}, "", 1, domain.OutcomeRecovered, "", []domain.ResourceID{cm.ID()},
			"1 CascadingKind (first Namespace/old-ns: deleting it also deletes every object in the namespace; never handed to Eno, after looking: kubectl delete namespace old-ns); never handed to Eno, delete after looking: kubectl delete namespace old-ns"},
		{"an approval hands over none of them", []domain.Entry{nsEntry, crdEntry, pvc, keep}, "approve:" + synUUID, 1, domain.OutcomeNothingToRecover, domain.ReasonUnverified, nil,
			"delete after looking: kubectl delete namespace old-ns; kubectl delete persistentvolumeclaim data -n old-ns; kubectl delete customresourcedefinition.apiextensions.k8s.io widgets.example.com"},
		{"the guard counts the cascading kinds too", []domain.Entry{nsEntry, crdEntry, cm, keep}, "", 0.3, domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, nil, "2 CascadingKind"},
		{"at the fraction with them: handed over", []domain.Entry{nsEntry, crdEntry, cm, keep}, "", 0.75, domain.OutcomeRecovered, "", []domain.ResourceID{cm.ID()}, "2 CascadingKind"},
		{"the guard still holds the rest", []domain.Entry{nsEntry, cm, keep}, "", 0.3, domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, nil, "1 CascadingKind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := self
			c.Annotations = map[string]string{domain.AnnotationOptIn: domain.OptInValue}
			if tt.review != "" {
				c.Annotations[domain.AnnotationReview] = tt.review
			}
			snap, err := readFor(t, tt.entries, oldCompUID)
			require.NoError(t, err)
			observed := map[domain.ResourceID]domain.Observation{}
			for _, e := range tt.entries {
				observed[e.ID()] = old
			}
			p, err := domain.PlanRecovery(domain.RecoveryInput{Composition: c, Snapshot: snap, Synthesis: contents,
				Observed: observed, MaxTombstoneFraction: tt.fraction, Now: now})
			require.NoError(t, err)
			assert.Equal(t, tt.outcome, p.Decision.Outcome, p.Decision.Message)
			assert.Equal(t, tt.reason, p.Decision.Reason)
			assert.Equal(t, tt.tombstones, tombstoneIDs(p.Tombstones))
			assert.Contains(t, p.Decision.Message, tt.inMessage)
			for _, h := range p.Held {
				assert.Empty(t, domain.Cascades(h.Entry.ID()), "a cascading kind is never held for approval")
			}
		})
	}
}

// design §6.3: a tombstone no eno-reconciler in use would load (its --resource-filter) is kept as
// NoReconcilerTakesIt, judged on the very manifest the hand-off writes; a gone object is not asked.
func TestPlanRecoveryNoReconcilerTakesIt(t *testing.T) {
	cm := domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "old-ns", Name: "orphan", Labels: map[string]string{"tier": "web"}}
	role := domain.Entry{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role", Namespace: "old-ns", Name: "reader"}
	keep := domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "keep"}
	entries := []domain.Entry{cm, role, keep}
	old := domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Writes: enoWrote(historyWritten.Add(-time.Hour)), UID: testUID}
	onlyKind := func(kind string) domain.ResourceFilter {
		return func(manifest string, _ domain.Composition) error {
			if strings.Contains(manifest, `"kind":"`+kind+`"`) {
				return nil
			}
			return errors.New("no filter matches")
		}
	}
	tests := []struct {
		name       string
		filter     domain.ResourceFilter
		gone       bool
		outcome    domain.Outcome
		reason     string
		tombstones []domain.ResourceID
		inMessage  string
	}{
		{"no filter: every reconciler loads everything", nil, false, domain.OutcomeRecovered, "", []domain.ResourceID{cm.ID(), role.ID()}, ""},
		{"one kept, the rest handed over", onlyKind("Role"), false, domain.OutcomeRecovered, "", []domain.ResourceID{role.ID()},
			"dropped 1: 1 NoReconcilerTakesIt (first ConfigMap/old-ns/orphan: no filter matches)"},
		{"none loaded: a possible orphan kept", onlyKind("Secret"), false, domain.OutcomeNothingToRecover, domain.ReasonUnverified, nil, "2 NoReconcilerTakesIt"},
		{"a gone object is NotFound, not asked", onlyKind("Secret"), true, domain.OutcomeNothingToRecover, domain.ReasonNoOrphans, nil, "2 NotFound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := readFor(t, entries, oldCompUID)
			require.NoError(t, err)
			observed := map[domain.ResourceID]domain.Observation{}
			for _, e := range entries {
				observed[e.ID()] = old
				if tt.gone {
					observed[e.ID()] = domain.Observation{State: domain.ObjectAbsent}
				}
			}
			asked := 0
			filter := tt.filter
			if filter != nil {
				filter = func(m string, c domain.Composition) error { asked++; return tt.filter(m, c) }
			}
			p, err := domain.PlanRecovery(domain.RecoveryInput{Composition: composition(), Snapshot: snap, Synthesis: readSynthesis(t, manifest("v1", "ConfigMap", "team-a", "keep")),
				Observed: observed, MaxTombstoneFraction: 1, ResourceFilter: filter, Now: now})
			require.NoError(t, err)
			assert.Equal(t, tt.outcome, p.Decision.Outcome, p.Decision.Message)
			assert.Equal(t, tt.reason, p.Decision.Reason)
			assert.Equal(t, tt.tombstones, tombstoneIDs(p.Tombstones))
			assert.Contains(t, p.Decision.Message, tt.inMessage)
			if tt.gone {
				assert.Zero(t, asked, "only an object recovery would hand over is asked")
			}
		})
	}

	t.Run("the guard counts what the filter keeps", func(t *testing.T) {
		snap, err := readFor(t, entries, oldCompUID)
		require.NoError(t, err)
		p, err := domain.PlanRecovery(domain.RecoveryInput{Composition: composition(), Snapshot: snap, Synthesis: readSynthesis(t, manifest("v1", "ConfigMap", "team-a", "keep")),
			Observed: map[domain.ResourceID]domain.Observation{cm.ID(): old, role.ID(): old}, MaxTombstoneFraction: 0.5, ResourceFilter: onlyKind("Role"), Now: now})
		require.NoError(t, err)
		assert.Equal(t, domain.OutcomeHeldForReview, p.Decision.Outcome, "2 of 3 would be deleted, one by another reconciler: %s", p.Decision.Message)
		assert.Empty(t, p.Tombstones)
	})

	t.Run("the filter sees the hand-off's manifest", func(t *testing.T) {
		snap, err := readFor(t, entries, oldCompUID)
		require.NoError(t, err)
		var seen []string
		c := composition()
		p, err := domain.PlanRecovery(domain.RecoveryInput{Composition: c, Snapshot: snap, Synthesis: readSynthesis(t, manifest("v1", "ConfigMap", "team-a", "keep")),
			Observed: map[domain.ResourceID]domain.Observation{cm.ID(): old, role.ID(): old}, MaxTombstoneFraction: 1, Now: now,
			ResourceFilter: func(m string, got domain.Composition) error {
				assert.Equal(t, c.Ref(), got.Ref())
				seen = append(seen, m)
				return nil
			}})
		require.NoError(t, err)
		h, err := domain.NewHandoff(p)
		require.NoError(t, err)
		require.Len(t, h.Resources, len(seen))
		for i, r := range h.Resources {
			assert.Equal(t, r.Manifest, seen[i])
		}
	})
}
