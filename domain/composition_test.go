package domain_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

func TestParseCompositionRef(t *testing.T) {
	tests := []struct {
		in   string
		want domain.CompositionRef
		ok   bool
	}{
		{"team-a/web", domain.CompositionRef{Namespace: "team-a", Name: "web"}, true},
		{"a/b", domain.CompositionRef{Namespace: "a", Name: "b"}, true},
		{"", domain.CompositionRef{}, false},
		{"web", domain.CompositionRef{}, false},
		{"/web", domain.CompositionRef{}, false},
		{"team-a/", domain.CompositionRef{}, false},
		{"/", domain.CompositionRef{}, false},
		{"a/b/c", domain.CompositionRef{}, false},
		{"a//b", domain.CompositionRef{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := domain.ParseCompositionRef(tt.in)
			if !tt.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.in, got.String())
		})
	}
}

func TestCompositionAccessors(t *testing.T) {
	c := composition()
	assert.Equal(t, domain.CompositionRef{Namespace: "team-a", Name: "web"}, c.Ref())
	assert.Equal(t, synUUID, c.SynthesisUUID())
	c.Synthesis = nil
	assert.Equal(t, "", c.SynthesisUUID())
}

// The exact strings of design §3 that other tools depend on.
func TestSpecStrings(t *testing.T) {
	for _, pair := range [][2]string{
		{domain.AnnotationOptIn, "eno.azure.io/tombstone-recovery"},
		{domain.OptInValue, "enabled"},
		{domain.AnnotationLineageOverride, "eno.azure.io/inventory-lineage"},
		{domain.AnnotationDecision, "eno.azure.io/tombstone-recovery-decision"},
		{domain.AnnotationReview, "eno.azure.io/tombstone-recovery-review"},
		{domain.DefaultInventoryNamespace, "kube-system"},
		{domain.SecretType, "eno.azure.io/inventory-snapshot"},
		{domain.SecretDataKey, "inventory.json"},
		{domain.LabelManagedBy, "app.kubernetes.io/managed-by"},
		{domain.ManagedByValue, "eno-tombstone-recovery"},
		{domain.LabelLineage, "eno.azure.io/inventory-lineage"},
		{domain.AnnotationCompositionNamespace, "eno.azure.io/composition-namespace"},
		{domain.AnnotationCompositionName, "eno.azure.io/composition-name"},
		{domain.AnnotationCompositionUID, "eno.azure.io/composition-uid"},
		{domain.AnnotationSourceSynthesisUUID, "eno.azure.io/source-synthesis-uuid"},
		{domain.AnnotationSourceSynthesisTime, "eno.azure.io/source-synthesis-timestamp"},
		{domain.AnnotationChunkIndex, "eno.azure.io/inventory-chunk-index"},
		{domain.AnnotationChunkCount, "eno.azure.io/inventory-chunk-count"},
		{domain.AnnotationDigest, "eno.azure.io/inventory-digest"},
		{domain.AnnotationFormat, "eno.azure.io/inventory-format"},
		{domain.FormatVersion, "2"},
		{domain.AnnotationReadinessGroup, "eno.azure.io/readiness-group"},
		{domain.AnnotationDeletionGroup, "eno.azure.io/deletion-group"},
		{domain.AnnotationDisableReconciliation, "eno.azure.io/disable-reconciliation"},
		{domain.AnnotationDeletionStrategy, "eno.azure.io/deletion-strategy"},
		{domain.AnnotationFailOpen, "eno.azure.io/fail-open"},
		{domain.AnnotationOverrides, "eno.azure.io/overrides"},
	} {
		assert.Equal(t, pair[1], pair[0])
	}
	assert.Equal(t, 1048576, domain.DefaultMaxChunkBytes)
	assert.Equal(t, 1048576, domain.SecretDataLimit)
	assert.Equal(t, 64, domain.DefaultMaxChunks)
	assert.Equal(t, 0.5, domain.DefaultMaxTombstoneFraction)
	assert.Equal(t, 300, domain.MaxClockSkew)
}
