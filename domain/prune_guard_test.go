package domain

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPruneGuards holds prune's last guards on their own: whatever a rule selects, a Secret not
// ours (type and label both) and a protected snapshot's chunk are never deleted (design §7).
func TestPruneGuards(t *testing.T) {
	ours := func(name string) ChunkSecret {
		return ChunkSecret{Name: name, Type: SecretType, Labels: map[string]string{LabelManagedBy: ManagedByValue}}
	}
	noLabel, otherType := ours("no-label"), ours("other-type")
	noLabel.Labels = nil
	otherType.Type = "Opaque"
	items := []PruneItem{{Secret: ours("b")}, {Secret: ours("newest-0")}, {Secret: noLabel}, {Secret: otherType}, {Secret: ours("a")}, {Secret: ours("b")}}
	got := guarded(items, map[string]bool{"newest-0": true})
	var names []string
	for _, it := range got {
		names = append(names, it.Secret.Name)
	}
	assert.Equal(t, []string{"a", "b"}, names)
}
