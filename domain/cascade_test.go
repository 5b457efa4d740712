package domain_test

import (
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
// counts only what is handed over.
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
		{"the guard counts only what is handed over", []domain.Entry{nsEntry, crdEntry, cm, keep}, "", 0.3, domain.OutcomeRecovered, "", []domain.ResourceID{cm.ID()}, "2 CascadingKind"},
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
