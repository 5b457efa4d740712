package enocel_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/enocel"
)

// TestResourceFilters evaluates eno-reconciler's --resource-filter on a tombstone as the hand-off
// writes it, with the variables Eno v0.2.17's Cache.Fill binds (design §6.3).
func TestResourceFilters(t *testing.T) {
	m, _ := tombstone(t)
	manifest, err := json.Marshal(m.Object)
	require.NoError(t, err)
	comp := domain.Composition{Namespace: "team-a", Name: "web", Labels: map[string]string{"shard": "a"}, Annotations: map[string]string{}}
	tests := []struct {
		name    string
		filters []string
		loaded  bool
		why     string
	}{
		{"the kind", []string{`self.kind == "ConfigMap"`}, true, ""},
		{"another kind", []string{`self.kind == "Namespace"`}, false, `"self.kind == \"Namespace\"": gives false`},
		{"one reconciler of several", []string{`self.kind == "Namespace"`, `self.metadata.namespace == "ns"`}, true, ""},
		{"the Composition's labels", []string{`composition.metadata.labels["shard"] == "a"`}, true, ""},
		{"the Composition's name and namespace", []string{`composition.metadata.name == "web" && composition.metadata.namespace == "team-a"`}, true, ""},
		{"never a deleting Composition", []string{`composition.metadata.deletionTimestamp == null`}, true, ""},
		{"the tombstone's own annotations", []string{`self.metadata.annotations["` + domain.AnnotationDisableReconciliation + `"] == "true"`}, true, ""},
		{"no creationTimestamp", []string{`!has(self.metadata.creationTimestamp)`}, true, ""},
		{"pathManagedByEno is unbound: an error loads nothing", []string{`pathManagedByEno`}, false, "no such attribute"},
		{"a missing field loads nothing", []string{`self.spec.shard == "a"`}, false, "no such key"},
		{"not a boolean loads nothing", []string{`self.metadata.name`}, false, `gives a`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := enocel.ResourceFilters(tt.filters)
			require.NoError(t, err)
			require.NotNil(t, f)
			why := f(string(manifest), comp)
			if tt.loaded {
				assert.NoError(t, why)
				return
			}
			require.Error(t, why)
			assert.Contains(t, why.Error(), tt.why)
			assert.Contains(t, why.Error(), "no --resource-filter of the eno-reconcilers in use loads it")
		})
	}
}

func TestResourceFiltersWithoutAFilter(t *testing.T) {
	for _, filters := range [][]string{nil, {}, {`self.kind == "Namespace"`, ""}} {
		f, err := enocel.ResourceFilters(filters)
		require.NoError(t, err)
		assert.Nil(t, f, "no filter, or a reconciler without one, loads every resource: %q", filters)
	}
	_, err := enocel.ResourceFilters([]string{`self.kind ==`})
	assert.ErrorContains(t, err, `resource filter "self.kind =="`)
}
