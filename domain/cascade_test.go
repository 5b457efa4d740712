package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// design §6.3 (N1): the kinds whose deletion deletes other objects.
func TestCascades(t *testing.T) {
	tests := []struct {
		id       domain.ResourceID
		cascades bool
	}{
		{domain.ResourceID{Kind: "Namespace", Name: "app"}, true},
		{domain.ResourceID{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition", Name: "widgets.example.com"}, true},
		{domain.ResourceID{Group: "apiregistration.k8s.io", Kind: "APIService", Name: "v1.metrics.k8s.io"}, true},
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
}

// design §6.3 (N1): a Namespace something still deploys into is never tombstoned.
func TestDeployedInto(t *testing.T) {
	ns := domain.ResourceID{Kind: "Namespace", Name: "app"}
	synthesis := func(t *testing.T, manifests ...string) domain.SynthesisContents {
		t.Helper()
		return readSynthesis(t, manifests...)
	}
	tests := []struct {
		name      string
		id        domain.ResourceID
		synthesis []string
		elsewhere map[domain.ResourceID]string
		want      string
	}{
		{"nothing deploys into it", ns, []string{manifest("v1", "ConfigMap", "other", "x")}, nil, ""},
		{"the synthesis produces an object in it", ns, []string{manifest("v1", "ConfigMap", "app", "keep")}, nil, "this composition's synthesis deploys ConfigMap/app/keep into it"},
		{"the synthesis patches an object in it", ns, []string{patchManifest("apps/v1", "Deployment", "app", "web")}, nil, "this composition's synthesis deploys Deployment.apps/app/web into it"},
		{"another composition produces an object in it", ns, nil,
			map[domain.ResourceID]string{{Kind: "ConfigMap", Namespace: "app", Name: "theirs"}: "team-b/other-1"},
			"resource slice team-b/other-1 of another composition deploys ConfigMap/app/theirs into it"},
		{"another composition's objects elsewhere", ns, nil,
			map[domain.ResourceID]string{{Kind: "ConfigMap", Namespace: "other", Name: "theirs"}: "team-b/other-1"}, ""},
		{"not a Namespace", domain.ResourceID{Kind: "ConfigMap", Namespace: "app", Name: "app"}, []string{manifest("v1", "ConfigMap", "app", "keep")}, nil, ""},
		{"a Namespace kind of another group", domain.ResourceID{Group: "example.com", Kind: "Namespace", Name: "app"}, []string{manifest("v1", "ConfigMap", "app", "keep")}, nil, ""},
		{"a cluster-scoped object is in no namespace", ns, []string{manifest("rbac.authorization.k8s.io/v1", "ClusterRole", "", "app")}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, domain.DeployedInto(tt.id, synthesis(t, tt.synthesis...), tt.elsewhere))
		})
	}
}

// design §6.1/§6.3 (N1): a tombstone whose deletion cascades is held for review whatever the
// guard says, and only an approval publishes it; a Namespace something deploys into is dropped
// as DeployedInto, and no approval publishes it.
func TestPlanRecoveryCascading(t *testing.T) {
	self := composition()
	nsEntry := domain.Entry{Version: "v1", Kind: "Namespace", Name: "old-ns"}
	crdEntry := domain.Entry{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Name: "widgets.example.com"}
	usedNS := domain.Entry{Version: "v1", Kind: "Namespace", Name: "team-a"}
	cm := domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "old-ns", Name: "orphan"}
	keep := domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "keep"}
	old := domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Writes: enoWrote(historyWritten.Add(-time.Hour)), UID: testUID}
	contents := readSynthesis(t, manifest("v1", "ConfigMap", "team-a", "keep"))
	tests := []struct {
		name       string
		entries    []domain.Entry
		review     string
		elsewhere  map[domain.ResourceID]string
		outcome    domain.Outcome
		reason     string
		tombstones []domain.ResourceID
		inMessage  string
	}{
		{"no cascade: published under the guard", []domain.Entry{cm, keep}, "", nil, domain.OutcomeRecovered, "", []domain.ResourceID{cm.ID()}, ""},
		{"a Namespace is held under the guard", []domain.Entry{nsEntry, cm, keep}, "", nil, domain.OutcomeHeldForReview, domain.ReasonCascadingDeletion, nil,
			"among them Namespace/old-ns, whose deletion also deletes every object in the namespace"},
		{"a CRD is held under the guard", []domain.Entry{crdEntry, keep}, "", nil, domain.OutcomeHeldForReview, domain.ReasonCascadingDeletion, nil, "among them CustomResourceDefinition.apiextensions.k8s.io/widgets.example.com"},
		{"an approval publishes it", []domain.Entry{nsEntry, cm, keep}, "approve:" + synUUID, nil, domain.OutcomeRecovered, domain.ReasonApproved, []domain.ResourceID{cm.ID(), nsEntry.ID()}, ""},
		{"a rejection decides nothing to recover", []domain.Entry{nsEntry, cm, keep}, "reject:" + synUUID, nil, domain.OutcomeNothingToRecover, domain.ReasonRejected, nil, ""},
		{"a Namespace the synthesis deploys into is dropped, approved or not", []domain.Entry{usedNS, cm, keep}, "approve:" + synUUID, nil, domain.OutcomeRecovered, "", []domain.ResourceID{cm.ID()},
			"1 DeployedInto (first Namespace/team-a: this composition's synthesis deploys ConfigMap/team-a/keep into it)"},
		{"a Namespace another composition deploys into is dropped", []domain.Entry{nsEntry, keep}, "approve:" + synUUID,
			map[domain.ResourceID]string{{Kind: "Secret", Namespace: "old-ns", Name: "s"}: "team-b/other-1"},
			domain.OutcomeNothingToRecover, domain.ReasonNoOrphans, nil, "1 DeployedInto"},
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
				Observed: observed, Elsewhere: tt.elsewhere, MaxTombstoneFraction: 1, Now: now})
			require.NoError(t, err)
			assert.Equal(t, tt.outcome, p.Decision.Outcome, p.Decision.Message)
			assert.Equal(t, tt.reason, p.Decision.Reason)
			assert.Equal(t, tt.tombstones, tombstoneIDs(p.Tombstones))
			assert.Contains(t, p.Decision.Message, tt.inMessage)
			if tt.outcome == domain.OutcomeHeldForReview {
				assert.NotEmpty(t, p.Held)
				assert.Contains(t, p.Decision.Message, "approve:"+synUUID)
			}
		})
	}
}
