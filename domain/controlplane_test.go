package domain_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Two control planes share one downstream cluster: each reads and prunes only the history it
// wrote, and a Secret written before control planes were named is read as this one's only while
// no other control plane's shares its lineage (design §5).
func TestOwnHistory(t *testing.T) {
	inv := goldenInventory(t)
	by := func(cp, synthesis string) []domain.ChunkSecret {
		m := meta(inv, compUID, synthesis, synTime)
		m.ControlPlane = cp
		return secretsFor(t, inv, m, 300)
	}
	foreign := by(thisControlPlane, "foreign")[:1]
	foreign[0].Labels = map[string]string{domain.LabelLineage: foreign[0].Labels[domain.LabelLineage]}
	names := func(s []domain.ChunkSecret) []string {
		var out []string
		for _, c := range s {
			out = append(out, c.Annotations[domain.AnnotationSourceSynthesisUUID]+"/"+c.Annotations[domain.AnnotationChunkIndex])
		}
		return out
	}
	for name, tt := range map[string]struct {
		secrets []domain.ChunkSecret
		want    []string
		shared  bool
	}{
		"only this one's":               {secrets: by(thisControlPlane, "s1"), want: []string{"s1/0", "s1/1"}},
		"another's beside: refused":     {secrets: append(by(thisControlPlane, "s1"), by(otherControlPlane, "s2")...), want: []string{"s1/0", "s1/1"}, shared: true},
		"only another's: refused":       {secrets: by(otherControlPlane, "s2"), shared: true},
		"unnamed alone is this one's":   {secrets: append(by(thisControlPlane, "s1"), by("", "s0")...), want: []string{"s1/0", "s1/1", "s0/0", "s0/1"}},
		"unnamed next to another's":     {secrets: append(by("", "s0"), by(otherControlPlane, "s2")...), shared: true},
		"unnamed, own and another's":    {secrets: append(append(by(thisControlPlane, "s1"), by("", "s0")...), by(otherControlPlane, "s2")...), want: []string{"s1/0", "s1/1"}, shared: true},
		"not ours stays, to be refused": {secrets: append(foreign, by(otherControlPlane, "s2")...), want: []string{"foreign/0"}, shared: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := domain.OwnHistory(tt.secrets, thisControlPlane)
			assert.Equal(t, tt.want, names(got))
			if !tt.shared {
				require.NoError(t, err)
				return
			}
			reason, ok := domain.InvalidReasonOf(err)
			require.True(t, ok, "%v", err)
			assert.Equal(t, domain.ReasonSharedLineage, reason)
			assert.Contains(t, err.Error(), otherControlPlane)
		})
	}
}

// The control plane is written into every chunk and read back; chunks that disagree on it are
// MixedMetadata (design §3, §5 step 2).
func TestSnapshotNamesItsControlPlane(t *testing.T) {
	inv := goldenInventory(t)
	secrets := secretsFor(t, inv, meta(inv, compUID, synUUID, synTime), 300)
	for _, s := range secrets {
		assert.Equal(t, thisControlPlane, s.Annotations[domain.AnnotationControlPlane])
		assert.Equal(t, thisControlPlane, s.WrittenBy())
	}
	snap, err := domain.ReadHistory(secrets, now, 0).Verdict()
	require.NoError(t, err)
	assert.Equal(t, thisControlPlane, snap.Meta().ControlPlane)

	secrets[1].Annotations[domain.AnnotationControlPlane] = otherControlPlane
	_, err = domain.ReadHistory(secrets, now, 0).Verdict()
	reason, _ := domain.InvalidReasonOf(err)
	assert.Equal(t, domain.ReasonMixedMetadata, reason)
	assert.Contains(t, err.Error(), "control plane")
}

func TestValidControlPlane(t *testing.T) {
	for _, ok := range []string{"6b0c1f6e-7d1a-4c57-9a39-0e4f2c1d5b7a", "a", "fleet-west.1_b"} {
		assert.NoError(t, domain.ValidControlPlane(ok), ok)
	}
	for _, bad := range []string{"", "-a", "a-", "a b", "a/b", strings.Repeat("a", 64)} {
		assert.Error(t, domain.ValidControlPlane(bad), bad)
	}
}
