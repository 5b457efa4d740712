package domain_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

func TestDefaultLineage(t *testing.T) {
	assert.Equal(t, goldenLineage, domain.DefaultLineage("team-a", "web").String())
	tests := []struct{ ns, name string }{{"team-a", "web"}, {"kube-system", "x"}, {"", ""}, {"a", "b/c"}}
	for _, tt := range tests {
		sum := sha256.Sum256([]byte(tt.ns + "/" + tt.name))
		got := domain.DefaultLineage(tt.ns, tt.name)
		assert.Equal(t, hex.EncodeToString(sum[:])[:12], got.String())
		assert.False(t, got.IsZero())
		// A default lineage is always a valid override value too.
		_, err := domain.NewLineage(got.String())
		assert.NoError(t, err)
	}
	assert.NotEqual(t, domain.DefaultLineage("team-a", "web"), domain.DefaultLineage("team-b", "web"))
	assert.True(t, domain.Lineage{}.IsZero())
}

func TestNewLineage(t *testing.T) {
	tests := []struct {
		name  string
		value string
		ok    bool
	}{
		{"single char", "a", true},
		{"digits", "0123", true},
		{"inner dash", "team-a-web", true},
		{"40 chars", strings.Repeat("a", 40), true},
		{"empty", "", false},
		{"41 chars", strings.Repeat("a", 41), false},
		{"200 chars", strings.Repeat("a", 200), false},
		{"uppercase", "Team-a", false},
		{"leading dash", "-web", false},
		{"trailing dash", "web-", false},
		{"only dash", "-", false},
		{"dot", "team.a", false},
		{"underscore", "team_a", false},
		{"slash", "team/a", false},
		{"space", "team a", false},
		{"non-ascii", "t\u00e9am", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := domain.NewLineage(tt.value)
			if tt.ok {
				require.NoError(t, err)
				assert.Equal(t, tt.value, l.String())
				return
			}
			var inv *domain.InvalidLineageError
			require.ErrorAs(t, err, &inv)
			assert.Equal(t, tt.value, inv.Value)
			assert.NotEmpty(t, inv.Reason)
			assert.Contains(t, err.Error(), domain.AnnotationLineageOverride)
			assert.True(t, l.IsZero())
		})
	}
}

func TestLineageOf(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        string
		ok          bool
	}{
		{"no override", nil, goldenLineage, true},
		{"unrelated annotations", map[string]string{"x": "y"}, goldenLineage, true},
		{"valid override", map[string]string{domain.AnnotationLineageOverride: "shared-web"}, "shared-web", true},
		{"override present but empty", map[string]string{domain.AnnotationLineageOverride: ""}, "", false},
		{"override uppercase", map[string]string{domain.AnnotationLineageOverride: "WEB"}, "", false},
		{"override 41 chars", map[string]string{domain.AnnotationLineageOverride: strings.Repeat("b", 41)}, "", false},
		{"override trailing dash", map[string]string{domain.AnnotationLineageOverride: "web-"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := composition()
			c.Annotations = tt.annotations
			l, err := domain.LineageOf(c)
			if !tt.ok {
				var inv *domain.InvalidLineageError
				require.ErrorAs(t, err, &inv)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, l.String())
		})
	}
}

func TestLineageIgnoresUID(t *testing.T) {
	a, b := composition(), composition()
	b.UID = "another-incarnation"
	la, err := domain.LineageOf(a)
	require.NoError(t, err)
	lb, err := domain.LineageOf(b)
	require.NoError(t, err)
	assert.Equal(t, la, lb)
}

func TestInvalidLineageErrorTruncatesValue(t *testing.T) {
	_, err := domain.NewLineage(strings.Repeat("X", 500))
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 300)
}
