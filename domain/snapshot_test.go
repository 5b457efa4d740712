package domain_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// oneChunk is the golden snapshot in a single Secret.
func oneChunk(t testing.TB) domain.ChunkSecret {
	inv := goldenInventory(t)
	return secretsFor(t, inv, meta(inv, oldCompUID, oldSynUUID, synTime), domain.DefaultMaxChunkBytes)[0]
}

func TestReadSnapshotGolden(t *testing.T) {
	secrets := goldenSecrets(t)
	for name, in := range map[string][]domain.ChunkSecret{
		"in order": secrets,
		"reversed": {secrets[1], secrets[0]},
	} {
		t.Run(name, func(t *testing.T) {
			snap, err := domain.ReadHistory(in, now, domain.DefaultMaxChunks).Verdict()
			require.NoError(t, err)
			assert.Equal(t, goldenDigest, snap.Inventory().Digest())
			assert.Equal(t, goldenCanonical, string(snap.Inventory().Canonical()))
			assert.Equal(t, oldSynUUID, snap.SynthesisUUID())
			assert.Equal(t, oldCompUID, snap.CompositionUID())
			assert.Equal(t, synTime.Add(-time.Hour), snap.Meta().SynthesisTime)
			m := snap.Meta()
			assert.Equal(t, goldenLineage, m.Lineage.String())
			assert.Equal(t, "team-a", m.CompositionNamespace)
			assert.Equal(t, "web", m.CompositionName)
			assert.Equal(t, 2, m.ChunkCount)
			assert.Equal(t, goldenDigest, m.Digest)
			chunks := snap.Chunks()
			require.Len(t, chunks, 2)
			assert.Equal(t, secrets[0].Name, chunks[0].Name)
			assert.Equal(t, secrets[1].Name, chunks[1].Name)
		})
	}
}

func TestReadSnapshotNoInventory(t *testing.T) {
	for _, in := range [][]domain.ChunkSecret{nil, {}} {
		_, err := domain.ReadHistory(in, now, domain.DefaultMaxChunks).Verdict()
		assert.ErrorIs(t, err, domain.ErrNoInventory)
		_, ok := domain.InvalidReasonOf(err)
		assert.False(t, ok)
	}
}

func TestReadSnapshotMalformed(t *testing.T) {
	type tc struct {
		name   string
		mutate func(s *domain.ChunkSecret)
	}
	setAnn := func(k, v string) func(s *domain.ChunkSecret) {
		return func(s *domain.ChunkSecret) { s.Annotations[k] = v }
	}
	setData := func(v string) func(s *domain.ChunkSecret) {
		return func(s *domain.ChunkSecret) { s.Data[domain.SecretDataKey] = []byte(v) }
	}
	tests := []tc{
		{"managed-by label missing", func(s *domain.ChunkSecret) { delete(s.Labels, domain.LabelManagedBy) }},
		{"managed-by label foreign", func(s *domain.ChunkSecret) { s.Labels[domain.LabelManagedBy] = "helm" }},
		{"wrong type", func(s *domain.ChunkSecret) { s.Type = "Opaque" }},
		{"lineage label invalid", func(s *domain.ChunkSecret) { s.Labels[domain.LabelLineage] = "NOT-A-LABEL" }},
		{"timestamp not RFC 3339", setAnn(domain.AnnotationSourceSynthesisTime, "yesterday")},
		{"timestamp without zone", setAnn(domain.AnnotationSourceSynthesisTime, "2025-06-01T11:00:00")},
		{"timestamp with space", setAnn(domain.AnnotationSourceSynthesisTime, "2025-06-01 11:00:00Z")},
		{"timestamp unix", setAnn(domain.AnnotationSourceSynthesisTime, "1748775600")},
		{"timestamp 5m1s ahead", setAnn(domain.AnnotationSourceSynthesisTime, now.Add(5*time.Minute+time.Second).Format(time.RFC3339))},
		{"timestamp far ahead", setAnn(domain.AnnotationSourceSynthesisTime, "9999-12-31T23:59:59Z")},
		{"timestamp ahead in another zone", setAnn(domain.AnnotationSourceSynthesisTime, "2025-06-01T14:06:00+02:00")},
		{"chunk count 0", setAnn(domain.AnnotationChunkCount, "0")},
		{"chunk count 10^9", setAnn(domain.AnnotationChunkCount, "1000000000")},
		{"chunk count above cap", setAnn(domain.AnnotationChunkCount, "65")},
		{"chunk count negative", setAnn(domain.AnnotationChunkCount, "-1")},
		{"chunk count not a number", setAnn(domain.AnnotationChunkCount, "two")},
		{"chunk count overflows", setAnn(domain.AnnotationChunkCount, "99999999999999999999999")},
		{"chunk index negative", setAnn(domain.AnnotationChunkIndex, "-1")},
		{"chunk index not a number", setAnn(domain.AnnotationChunkIndex, "0x0")},
		{"digest too short", setAnn(domain.AnnotationDigest, "sha256:ad60f577")},
		{"digest too long", setAnn(domain.AnnotationDigest, goldenDigest+"0")},
		{"digest uppercase", setAnn(domain.AnnotationDigest, strings.ToUpper(goldenDigest))},
		{"digest without prefix", setAnn(domain.AnnotationDigest, strings.TrimPrefix(goldenDigest, "sha256:"))},
		{"digest other algorithm", setAnn(domain.AnnotationDigest, "sha512:"+strings.TrimPrefix(goldenDigest, "sha256:"))},
		{"format 1", setAnn(domain.AnnotationFormat, "1")},
		{"format 3", setAnn(domain.AnnotationFormat, "3")},
		{"format 1.0", setAnn(domain.AnnotationFormat, "1.0")},
		{"data over 1 MiB", setData("[" + strings.Repeat(" ", domain.SecretDataLimit-1) + "]")},
		{"data over 1 MiB across keys", func(s *domain.ChunkSecret) {
			s.Data["extra"] = make([]byte, domain.SecretDataLimit-len(s.Data[domain.SecretDataKey])+1)
		}},
		{"data key missing", func(s *domain.ChunkSecret) { delete(s.Data, domain.SecretDataKey) }},
		{"data garbage", setData("garbage")},
		{"data truncated", setData(goldenCanonical[:200])},
		{"data empty", setData("")},
		{"data null", setData("null")},
		{"data object", setData(`{"version":"v1","kind":"K","name":"n"}`)},
		{"data trailing bracket", setData(goldenCanonical + "]")},
		{"data unknown field", setData(`[{"version":"v1","kind":"K","name":"n","data":{"password":"x"}}]`)},
		{"data entry without kind", setData(`[{"version":"v1","name":"n"}]`)},
		{"data duplicate identity", setData(`[{"version":"v1","kind":"K","name":"n"},{"version":"v2","kind":"K","name":"n"}]`)},
	}
	for _, k := range []string{domain.AnnotationCompositionNamespace, domain.AnnotationCompositionName,
		domain.AnnotationCompositionUID, domain.AnnotationSourceSynthesisUUID, domain.AnnotationSourceSynthesisTime,
		domain.AnnotationChunkIndex, domain.AnnotationChunkCount, domain.AnnotationDigest, domain.AnnotationFormat} {
		tests = append(tests,
			tc{"annotation missing " + k, func(s *domain.ChunkSecret) { delete(s.Annotations, k) }},
			tc{"annotation empty " + k, setAnn(k, "")})
	}
	tests = append(tests, tc{"no annotations at all", func(s *domain.ChunkSecret) { s.Annotations = nil }})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := oneChunk(t)
			tt.mutate(&s)
			_, err := domain.ReadHistory([]domain.ChunkSecret{s}, now, domain.DefaultMaxChunks).Verdict()
			assert.Equal(t, domain.ReasonMalformed, invalidReason(t, err), "%v", err)
		})
	}
}

func TestReadSnapshotOlderSnapshotSecrets(t *testing.T) {
	// Step 1 applies to every listed Secret, even one of an older snapshot; steps 4 and 5
	// only to the selected one.
	tests := []struct {
		name      string
		mutate    func(s *domain.ChunkSecret)
		malformed bool
	}{
		{"bad timestamp", func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationSourceSynthesisTime] = "not-a-time" }, true},
		{"data key missing", func(s *domain.ChunkSecret) { delete(s.Data, domain.SecretDataKey) }, true},
		{"not ours", func(s *domain.ChunkSecret) { s.Type = "Opaque" }, true},
		{"data over 1 MiB", func(s *domain.ChunkSecret) { s.Data["x"] = make([]byte, domain.SecretDataLimit) }, true},
		{"garbage data is never decoded", func(s *domain.ChunkSecret) { s.Data[domain.SecretDataKey] = []byte("garbage") }, false},
		{"wrong digest is never checked", func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationDigest] = goldenDigest }, false},
		{"incomplete is fine", func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationChunkCount] = "5" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, _ := snapshotAt(t, 2, "uid-0", "older", synTime.Add(-2*time.Hour), 1000)
			tt.mutate(&old[0])
			snap, err := domain.ReadHistory(append(goldenSecrets(t), old...), now, domain.DefaultMaxChunks).Verdict()
			if !tt.malformed {
				require.NoError(t, err)
				assert.Equal(t, oldSynUUID, snap.SynthesisUUID())
				return
			}
			assert.Equal(t, domain.ReasonMalformed, invalidReason(t, err))
			var inv *domain.InventoryInvalidError
			require.ErrorAs(t, err, &inv)
			assert.Equal(t, old[0].Name, inv.Secret)
		})
	}
}

func TestReadSnapshotClockSkew(t *testing.T) {
	tests := []struct {
		name string
		at   time.Time
		ok   bool
	}{
		{"in the past", now.Add(-24 * time.Hour), true},
		{"now", now, true},
		{"exactly 5 minutes ahead", now.Add(5 * time.Minute), true},
		{"5 minutes and 1 second ahead", now.Add(5*time.Minute + time.Second), false},
		{"an hour ahead", now.Add(time.Hour), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := goldenInventory(t)
			secrets := secretsFor(t, inv, meta(inv, oldCompUID, oldSynUUID, tt.at), 300)
			_, err := domain.ReadHistory(secrets, now, domain.DefaultMaxChunks).Verdict()
			if tt.ok {
				require.NoError(t, err)
				return
			}
			assert.Equal(t, domain.ReasonMalformed, invalidReason(t, err))
		})
	}
}

func TestReadSnapshotDataSizeLimit(t *testing.T) {
	// One entry whose canonical encoding is exactly 1 MiB is accepted; one more byte is not.
	e := domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "big", Labels: map[string]string{"x": ""}}
	e.Labels["x"] = strings.Repeat("a", domain.SecretDataLimit-mustInventory(t, []domain.Entry{e}).Size())
	inv := mustInventory(t, []domain.Entry{e})
	require.Equal(t, domain.SecretDataLimit, inv.Size())
	secrets := secretsFor(t, inv, meta(inv, oldCompUID, oldSynUUID, synTime), domain.DefaultMaxChunkBytes)
	require.Equal(t, 1, len(secrets))
	_, err := domain.ReadHistory(secrets, now, domain.DefaultMaxChunks).Verdict()
	require.NoError(t, err)

	secrets[0].Data["extra"] = []byte("x")
	_, err = domain.ReadHistory(secrets, now, domain.DefaultMaxChunks).Verdict()
	assert.Equal(t, domain.ReasonMalformed, invalidReason(t, err))
}

func TestParseStoredChunkCountCap(t *testing.T) {
	tests := []struct {
		count     string
		maxChunks int
		ok        bool
	}{
		{"1", 1, true},
		{"2", 1, false},
		{"64", 64, true},
		{"65", 64, false},
		{"64", 0, true}, // zero means the default cap
		{"65", 0, false},
		{"65", -1, false},
		{"1000", 1000, true},
		{"1000000000", 1000, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.count, tt.maxChunks), func(t *testing.T) {
			s := oneChunk(t)
			s.Annotations[domain.AnnotationChunkCount] = tt.count
			c, err := domain.ParseStoredChunk(s, now, tt.maxChunks)
			if !tt.ok {
				assert.Equal(t, domain.ReasonMalformed, invalidReason(t, err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.count, fmt.Sprint(c.Meta.ChunkCount))
		})
	}
}

func TestParseStoredChunk(t *testing.T) {
	s := oneChunk(t)
	s.Annotations[domain.AnnotationSourceSynthesisTime] = "2025-06-01T13:00:00+02:00"
	c, err := domain.ParseStoredChunk(s, now, domain.DefaultMaxChunks)
	require.NoError(t, err)
	assert.Equal(t, 0, c.Index)
	assert.Equal(t, s.Name, c.Secret.Name)
	assert.Equal(t, domain.SnapshotMeta{
		Lineage:              domain.DefaultLineage("team-a", "web"),
		CompositionNamespace: "team-a",
		CompositionName:      "web",
		CompositionUID:       oldCompUID,
		SynthesisUUID:        oldSynUUID,
		SynthesisTime:        synTime,
		ChunkCount:           1,
		Digest:               goldenDigest,
		ControlPlane:         thisControlPlane,
	}, c.Meta)
	assert.Equal(t, time.UTC, c.Meta.SynthesisTime.Location())

	// Chunk numbers are accepted only as this package writes them.
	for _, bad := range []struct{ key, value string }{
		{domain.AnnotationChunkCount, "+1"}, {domain.AnnotationChunkCount, "01"},
		{domain.AnnotationChunkIndex, "+0"}, {domain.AnnotationChunkIndex, "00"}, {domain.AnnotationChunkIndex, "-0"},
	} {
		s := oneChunk(t)
		s.Annotations[bad.key] = bad.value
		_, err := domain.ParseStoredChunk(s, now, domain.DefaultMaxChunks)
		assert.Equal(t, domain.ReasonMalformed, invalidReason(t, err), "%s=%q", bad.key, bad.value)
	}
}

func TestReadSnapshotMixedMetadata(t *testing.T) {
	tests := []struct {
		key, value string
	}{
		{domain.AnnotationCompositionName, "other"},
		{domain.AnnotationCompositionNamespace, "team-b"},
		{domain.AnnotationCompositionUID, "uid-x"},
		{domain.AnnotationSourceSynthesisTime, synTime.Add(-90 * time.Minute).Format(time.RFC3339)},
		{domain.AnnotationChunkCount, "3"},
		{domain.AnnotationDigest, "sha256:" + strings.Repeat("0", 64)},
	}
	for _, tt := range tests {
		for _, which := range []int{0, 1} {
			t.Run(fmt.Sprintf("%s on chunk %d", tt.key, which), func(t *testing.T) {
				secrets := goldenSecrets(t)
				secrets[which].Annotations[tt.key] = tt.value
				_, err := domain.ReadHistory(secrets, now, domain.DefaultMaxChunks).Verdict()
				assert.Equal(t, domain.ReasonMixedMetadata, invalidReason(t, err), "%v", err)
			})
		}
	}
	t.Run("lineage label", func(t *testing.T) {
		secrets := goldenSecrets(t)
		secrets[1].Labels[domain.LabelLineage] = "other"
		_, err := domain.ReadHistory(secrets, now, domain.DefaultMaxChunks).Verdict()
		assert.Equal(t, domain.ReasonMixedMetadata, invalidReason(t, err))
	})
	t.Run("in an older snapshot too", func(t *testing.T) {
		inv := mustInventory(t, entriesN(10))
		older := secretsFor(t, inv, meta(inv, "uid-0", "syn-0", synTime.Add(-5*time.Hour)), 300)
		require.Greater(t, len(older), 1)
		older[1].Annotations[domain.AnnotationCompositionUID] = "uid-x"
		for i := range older {
			older[i].Name = fmt.Sprintf("old-%d", i)
		}
		_, err := domain.ReadHistory(append(goldenSecrets(t), older...), now, domain.DefaultMaxChunks).Verdict()
		assert.Equal(t, domain.ReasonMixedMetadata, invalidReason(t, err))
	})
}

// snapshotAt records an inventory of n entries as synthesis uuid at the given time, with
// Secret names made unique by uuid (as if written under different lineages' names).
func snapshotAt(t testing.TB, n int, uid, uuid string, at time.Time, maxBytes int) ([]domain.ChunkSecret, domain.Inventory) {
	inv := mustInventory(t, entriesN(n))
	secrets := secretsFor(t, inv, meta(inv, uid, uuid, at), maxBytes)
	for i := range secrets {
		secrets[i].Name = fmt.Sprintf("%s-%d", uuid, i)
	}
	return secrets, inv
}

func TestReadSnapshotSelectsNewest(t *testing.T) {
	older, _ := snapshotAt(t, 5, "uid-0", "syn-a", synTime.Add(-2*time.Hour), 200)
	middle, _ := snapshotAt(t, 7, "uid-0", "syn-b", synTime.Add(-time.Hour), 200)
	newest, want := snapshotAt(t, 3, "uid-1", "syn-c", synTime, 200)
	all := slices.Concat(older, newest, middle)
	for _, perm := range [][]domain.ChunkSecret{all, slices.Concat(newest, middle, older), slices.Concat(middle, older, newest)} {
		snap, err := domain.ReadHistory(perm, now, domain.DefaultMaxChunks).Verdict()
		require.NoError(t, err)
		assert.Equal(t, "syn-c", snap.SynthesisUUID())
		assert.Equal(t, want.Digest(), snap.Inventory().Digest())
		assert.Equal(t, 3, snap.Inventory().Len())
	}
}

func TestReadSnapshotSubsecondNewerWins(t *testing.T) {
	a, _ := snapshotAt(t, 1, "u", "syn-a", synTime, 200)
	b, _ := snapshotAt(t, 2, "u", "syn-b", synTime, 200)
	b[0].Annotations[domain.AnnotationSourceSynthesisTime] = synTime.Add(500 * time.Millisecond).Format(time.RFC3339Nano)
	snap, err := domain.ReadHistory(append(a, b...), now, domain.DefaultMaxChunks).Verdict()
	require.NoError(t, err)
	assert.Equal(t, "syn-b", snap.SynthesisUUID())
}

func TestReadSnapshotAmbiguousTimestamp(t *testing.T) {
	a, _ := snapshotAt(t, 3, "uid-0", "syn-a", synTime, 200)
	b, _ := snapshotAt(t, 4, "uid-1", "syn-b", synTime, 200)
	older, _ := snapshotAt(t, 5, "uid-0", "syn-0", synTime.Add(-time.Hour), 200)
	tests := map[string][]domain.ChunkSecret{
		"two tied":              slices.Concat(a, b),
		"two tied, older first": slices.Concat(older, a, b),
		"two tied, older last":  slices.Concat(b, a, older),
		"same instant, other zone": func() []domain.ChunkSecret {
			b2, _ := snapshotAt(t, 4, "uid-1", "syn-b", synTime, 200)
			for i := range b2 {
				b2[i].Annotations[domain.AnnotationSourceSynthesisTime] = synTime.In(time.FixedZone("X", 3600)).Format(time.RFC3339)
			}
			return slices.Concat(a, b2)
		}(),
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := domain.ReadHistory(in, now, domain.DefaultMaxChunks).Verdict()
			assert.Equal(t, domain.ReasonAmbiguousTimestamp, invalidReason(t, err), "%v", err)
		})
	}
	t.Run("a tie among older snapshots does not matter", func(t *testing.T) {
		newest, _ := snapshotAt(t, 2, "uid-2", "syn-n", synTime.Add(time.Minute), 200)
		for _, in := range [][]domain.ChunkSecret{slices.Concat(a, b, newest), slices.Concat(newest, a, b), slices.Concat(a, newest, b)} {
			snap, err := domain.ReadHistory(in, now, domain.DefaultMaxChunks).Verdict()
			require.NoError(t, err)
			assert.Equal(t, "syn-n", snap.SynthesisUUID())
		}
	})
}

func TestReadSnapshotMissingChunk(t *testing.T) {
	three, _ := snapshotAt(t, 6, "uid-0", "syn-a", synTime, 150) // 3 chunks
	require.Equal(t, 3, len(three))
	dup := func(i, as int) domain.ChunkSecret {
		s := three[i].Clone()
		s.Name += "-copy"
		s.Annotations[domain.AnnotationChunkIndex] = fmt.Sprint(as)
		return s
	}
	tests := map[string][]domain.ChunkSecret{
		"first missing":                 {three[1], three[2]},
		"middle missing":                {three[0], three[2]},
		"last missing":                  {three[0], three[1]},
		"only one":                      {three[1]},
		"index repeated":                {three[0], three[1], three[2], dup(1, 1)},
		"index repeated instead of one": {three[0], three[1], dup(1, 1)},
		"index equals count":            {three[0], three[1], three[2], dup(2, 3)},
		"index far above count":         {three[0], three[1], three[2], dup(2, 1000)},
		"index above count replacing":   {three[0], three[1], dup(2, 3)},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := domain.ReadHistory(in, now, domain.DefaultMaxChunks).Verdict()
			assert.Equal(t, domain.ReasonMissingChunk, invalidReason(t, err), "%v", err)
		})
	}
}

func TestReadSnapshotNoFallback(t *testing.T) {
	older, _ := snapshotAt(t, 5, "uid-0", "syn-old", synTime.Add(-time.Hour), 200)
	newest, _ := snapshotAt(t, 6, "uid-1", "syn-new", synTime, 150)
	require.Equal(t, 3, len(newest))
	t.Run("newest incomplete", func(t *testing.T) {
		_, err := domain.ReadHistory(slices.Concat(older, newest[:2]), now, domain.DefaultMaxChunks).Verdict()
		assert.Equal(t, domain.ReasonMissingChunk, invalidReason(t, err))
	})
	t.Run("newest digest wrong", func(t *testing.T) {
		bad := slices.Clone(newest)
		for i := range bad {
			bad[i] = bad[i].Clone()
			bad[i].Annotations[domain.AnnotationDigest] = goldenDigest
		}
		_, err := domain.ReadHistory(slices.Concat(older, bad), now, domain.DefaultMaxChunks).Verdict()
		assert.Equal(t, domain.ReasonDigestMismatch, invalidReason(t, err))
	})
	t.Run("newest chunk undecodable", func(t *testing.T) {
		bad := slices.Clone(newest)
		bad[1] = bad[1].Clone()
		bad[1].Data[domain.SecretDataKey] = []byte("[{")
		_, err := domain.ReadHistory(slices.Concat(older, bad), now, domain.DefaultMaxChunks).Verdict()
		assert.Equal(t, domain.ReasonMalformed, invalidReason(t, err))
	})
}

func TestReadSnapshotIgnoresLeftoverHigherChunks(t *testing.T) {
	// An older, larger snapshot of 3 chunks was overwritten in place by a 2-chunk one:
	// chunks 0 and 1 were replaced and chunk 2 is left over.
	lineage := domain.DefaultLineage("team-a", "web")
	bigInv := mustInventory(t, entriesN(6))
	old := secretsFor(t, bigInv, meta(bigInv, oldCompUID, oldSynUUID, synTime.Add(-time.Hour)), 150)
	require.Equal(t, 3, len(old))
	newInv := goldenInventory(t)
	current := secretsFor(t, newInv, meta(newInv, compUID, synUUID, synTime), 300)
	require.Equal(t, 2, len(current))
	for i, s := range current {
		require.Equal(t, domain.ChunkName("web", lineage, i), s.Name)
	}
	require.Equal(t, domain.ChunkName("web", lineage, 2), old[2].Name)

	snap, err := domain.ReadHistory([]domain.ChunkSecret{old[2], current[0], current[1]}, now, domain.DefaultMaxChunks).Verdict()
	require.NoError(t, err)
	assert.Equal(t, synUUID, snap.SynthesisUUID())
	assert.Equal(t, goldenDigest, snap.Inventory().Digest())
	assert.Len(t, snap.Chunks(), 2)
}

func TestReadSnapshotDigestMismatch(t *testing.T) {
	tests := map[string]func([]domain.ChunkSecret){
		"digest of another inventory": func(s []domain.ChunkSecret) {
			for i := range s {
				s[i].Annotations[domain.AnnotationDigest] = mustInventory(t, entriesN(1)).Digest()
			}
		},
		"entry dropped from a chunk": func(s []domain.ChunkSecret) {
			s[1].Data[domain.SecretDataKey] = []byte(`[{"group":"rbac.authorization.k8s.io","version":"v1","kind":"ClusterRole","name":"web-reader"}]`)
		},
		"label changed": func(s []domain.ChunkSecret) {
			s[0].Data[domain.SecretDataKey] = []byte(strings.Replace(goldenChunk0, "frontend", "backend", 1))
		},
		"chunk emptied": func(s []domain.ChunkSecret) { s[0].Data[domain.SecretDataKey] = []byte("[]") },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			secrets := goldenSecrets(t)
			mutate(secrets)
			_, err := domain.ReadHistory(secrets, now, domain.DefaultMaxChunks).Verdict()
			assert.Equal(t, domain.ReasonDigestMismatch, invalidReason(t, err), "%v", err)
		})
	}
}

func TestReadSnapshotEmptyInventory(t *testing.T) {
	inv := mustInventory(t, nil)
	secrets := secretsFor(t, inv, meta(inv, oldCompUID, oldSynUUID, synTime), 300)
	snap, err := domain.ReadHistory(secrets, now, domain.DefaultMaxChunks).Verdict()
	require.NoError(t, err)
	assert.Equal(t, 0, snap.Inventory().Len())
	sum := sha256.Sum256([]byte("[]"))
	assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), snap.Meta().Digest)
}

func TestReadSnapshotDoesNotModifyInput(t *testing.T) {
	secrets := goldenSecrets(t)
	names := []string{secrets[1].Name, secrets[0].Name}
	in := []domain.ChunkSecret{secrets[1], secrets[0]}
	_, err := domain.ReadHistory(in, now, domain.DefaultMaxChunks).Verdict()
	require.NoError(t, err)
	assert.Equal(t, names, []string{in[0].Name, in[1].Name})
}

func TestInventoryInvalidError(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &domain.InventoryInvalidError{Reason: domain.ReasonMissingChunk, Secret: "s", Detail: "d"})
	r, ok := domain.InvalidReasonOf(err)
	assert.True(t, ok)
	assert.Equal(t, domain.ReasonMissingChunk, r)
	assert.Contains(t, err.Error(), "MissingChunk")
	assert.Contains(t, err.Error(), "secret s")
	_, ok = domain.InvalidReasonOf(errors.New("x"))
	assert.False(t, ok)
	for want, r := range map[string]domain.InvalidReason{
		"Malformed": domain.ReasonMalformed, "MixedMetadata": domain.ReasonMixedMetadata,
		"AmbiguousTimestamp": domain.ReasonAmbiguousTimestamp, "MissingChunk": domain.ReasonMissingChunk,
		"DigestMismatch": domain.ReasonDigestMismatch,
	} {
		assert.Equal(t, want, r.String())
	}
}

func TestSnapshotMatches(t *testing.T) {
	inv := goldenInventory(t)
	snap, err := domain.ReadHistory(secretsFor(t, inv, meta(inv, compUID, synUUID, synTime), 300), now, domain.DefaultMaxChunks).Verdict()
	require.NoError(t, err)
	tests := []struct {
		name   string
		mutate func(c *domain.Composition)
		want   bool
	}{
		{"same incarnation and synthesis", func(*domain.Composition) {}, true},
		{"other UID", func(c *domain.Composition) { c.UID = "x" }, false},
		{"other synthesis", func(c *domain.Composition) { c.Synthesis.UUID = "x" }, false},
		{"no synthesis", func(c *domain.Composition) { c.Synthesis = nil }, false},
		{"other name", func(c *domain.Composition) { c.Name = "x" }, false},
		{"other namespace", func(c *domain.Composition) { c.Namespace = "x" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := composition()
			tt.mutate(&c)
			assert.Equal(t, tt.want, domain.SnapshotMatches(snap, c))
		})
	}
}

// The recording fast path is judged on labels and annotations only: the data may be absent (a
// metadata-only cache), but the metadata must say the snapshot is this incarnation's, of this
// synthesis, complete and consistent.
func TestRecordedByMetadata(t *testing.T) {
	c := composition()
	inv := goldenInventory(t)
	m := meta(inv, compUID, synUUID, synTime)
	mine := func() []domain.ChunkSecret {
		out := secretsFor(t, inv, m, 300)
		for i := range out {
			out[i].Data = nil // what a metadata-only cache holds
		}
		return out
	}
	got, ok := domain.RecordedByMetadata(mine(), c, now, 0)
	require.True(t, ok)
	assert.Equal(t, 2, got.ChunkCount)
	assert.Equal(t, goldenDigest, got.Digest)

	older := secretsFor(t, inv, meta(inv, compUID, oldSynUUID, synTime.Add(-time.Hour)), 300)
	_, ok = domain.RecordedByMetadata(append(mine(), older...), c, now, 0)
	assert.True(t, ok, "another snapshot's chunks are no concern")
	_, ok = domain.RecordedByMetadata(setAll(mine(), domain.AnnotationControlPlane, ""), c, now, 0)
	assert.True(t, ok, "a snapshot naming no control plane is stamped by the next synthesis's recording, not rewritten: that would move its write time")

	for name, spoil := range map[string]func([]domain.ChunkSecret) []domain.ChunkSecret{
		"none":            func([]domain.ChunkSecret) []domain.ChunkSecret { return nil },
		"a chunk missing": func(s []domain.ChunkSecret) []domain.ChunkSecret { return s[:1] },
		"a chunk twice":   func(s []domain.ChunkSecret) []domain.ChunkSecret { s[1] = s[0]; return s },
		"another UID": func(s []domain.ChunkSecret) []domain.ChunkSecret {
			return setAll(s, domain.AnnotationCompositionUID, oldCompUID)
		},
		"another synthesis": func(s []domain.ChunkSecret) []domain.ChunkSecret {
			return setAll(s, domain.AnnotationSourceSynthesisUUID, oldSynUUID)
		},
		"another name": func(s []domain.ChunkSecret) []domain.ChunkSecret {
			return setAll(s, domain.AnnotationCompositionName, "other")
		},
		"two digests": func(s []domain.ChunkSecret) []domain.ChunkSecret {
			s[1].Annotations[domain.AnnotationDigest] = "sha256:" + strings.Repeat("0", 64)
			return s
		},
		"two timestamps": func(s []domain.ChunkSecret) []domain.ChunkSecret {
			s[1].Annotations[domain.AnnotationSourceSynthesisTime] = "2025-06-01T10:59:59Z"
			return s
		},
		"a foreign Secret": func(s []domain.ChunkSecret) []domain.ChunkSecret { s[0].Type = "Opaque"; return s },
		"format 1":         func(s []domain.ChunkSecret) []domain.ChunkSecret { return setAll(s, domain.AnnotationFormat, "1") },
		"an index too large": func(s []domain.ChunkSecret) []domain.ChunkSecret {
			s[1].Annotations[domain.AnnotationChunkIndex] = "2"
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, ok := domain.RecordedByMetadata(spoil(mine()), c, now, 0)
			assert.False(t, ok)
		})
	}
}

func setAll(s []domain.ChunkSecret, key, value string) []domain.ChunkSecret {
	for i := range s {
		s[i].Annotations[key] = value
	}
	return s
}
