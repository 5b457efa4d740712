package domain_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// design §5 step 3 and design §4: history crosses a namespace boundary only when adoption across
// namespaces is allowed; the zero Adoption is the default, within one namespace.
func TestAdoptionPermits(t *testing.T) {
	reader := domain.CompositionRef{Namespace: "team-a", Name: "web"}
	tests := []struct {
		name        string
		adoption    domain.Adoption
		recordedFor domain.CompositionRef
		want        bool
	}{
		{"its own history", domain.AdoptWithinNamespace, reader, true},
		{"a rename within the namespace", domain.AdoptWithinNamespace, domain.CompositionRef{Namespace: "team-a", Name: "old"}, true},
		{"another namespace's", domain.AdoptWithinNamespace, domain.CompositionRef{Namespace: "team-b", Name: "web"}, false},
		{"another namespace's, by the zero Adoption", domain.Adoption{}, domain.CompositionRef{Namespace: "team-b", Name: "web"}, false},
		{"another namespace's, adoption allowed", domain.AdoptAcrossNamespaces, domain.CompositionRef{Namespace: "team-b", Name: "web"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.adoption.Permits(reader, tt.recordedFor))
		})
	}
}
