package domain_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// design §6.2 (self-check): a tombstone's own disable-reconciliation is "true" and its overrides the
// self-check, whatever was recorded: a recorded "false" never beats the Composition's pause.
func TestTombstoneAnnotations(t *testing.T) {
	const selfCheck = `[{"path":"x"}]`
	tests := []struct {
		name     string
		recorded map[string]string
		want     map[string]string
	}{
		{"nothing recorded", nil,
			map[string]string{domain.AnnotationDisableReconciliation: "true", domain.AnnotationOverrides: selfCheck}},
		{"a recorded false is dropped", map[string]string{domain.AnnotationDisableReconciliation: "false"},
			map[string]string{domain.AnnotationDisableReconciliation: "true", domain.AnnotationOverrides: selfCheck}},
		{"a recorded empty value is dropped", map[string]string{domain.AnnotationDisableReconciliation: ""},
			map[string]string{domain.AnnotationDisableReconciliation: "true", domain.AnnotationOverrides: selfCheck}},
		{"recorded overrides are dropped", map[string]string{domain.AnnotationOverrides: `[{"path":"self.data","value":"1"}]`},
			map[string]string{domain.AnnotationDisableReconciliation: "true", domain.AnnotationOverrides: selfCheck}},
		{"the other recorded annotations are kept", map[string]string{domain.AnnotationDeletionGroup: "2", domain.AnnotationDisableReconciliation: "false"},
			map[string]string{domain.AnnotationDeletionGroup: "2", domain.AnnotationDisableReconciliation: "true", domain.AnnotationOverrides: selfCheck}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := map[string]string{}
			for k, v := range tt.recorded {
				before[k] = v
			}
			assert.Equal(t, tt.want, domain.TombstoneAnnotations(tt.recorded, selfCheck))
			if tt.recorded != nil {
				assert.Equal(t, before, tt.recorded, "the recorded annotations are not changed")
			}
		})
	}
}
