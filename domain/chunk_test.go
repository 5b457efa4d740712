package domain_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

func chunkSizes(chunks []domain.Chunk) []int {
	out := make([]int, len(chunks))
	for i, c := range chunks {
		out[i] = c.Size()
	}
	return out
}

// joinChunks rebuilds one JSON array from the chunks' arrays.
func joinChunks(chunks []domain.Chunk) []byte {
	var parts [][]byte
	for _, c := range chunks {
		if inner := c.Data()[1 : len(c.Data())-1]; len(inner) > 0 {
			parts = append(parts, inner)
		}
	}
	return append(append([]byte("["), bytes.Join(parts, []byte(","))...), ']')
}

func TestSplitGolden(t *testing.T) {
	for name, inv := range map[string]domain.Inventory{
		"NewInventory":  goldenInventory(t),
		"ReadSynthesis": readSynthesis(t, goldenManifests()...).Inventory(),
	} {
		t.Run(name, func(t *testing.T) {
			chunks, err := domain.SplitInventory(inv, 300, domain.DefaultMaxChunks)
			require.NoError(t, err)
			require.Len(t, chunks, 2)
			assert.Equal(t, []int{206, 255}, chunkSizes(chunks))
			assert.Equal(t, goldenChunk0, string(chunks[0].Data()))
			assert.Equal(t, goldenChunk1, string(chunks[1].Data()))
			for i, c := range chunks {
				assert.Equal(t, i, c.Index())
				assert.Equal(t, 2, c.Count())
			}
			m := meta(inv, compUID, synUUID, synTime)
			m.ChunkCount = 2
			for i, c := range chunks {
				s := domain.DesiredChunkSecret(invNS, m, c)
				assert.Equal(t, goldenDigest, s.Annotations[domain.AnnotationDigest])
				assert.Equal(t, "2", s.Annotations[domain.AnnotationChunkCount])
				assert.Equal(t, fmt.Sprint(i), s.Annotations[domain.AnnotationChunkIndex])
				assert.Equal(t, fmt.Sprintf("web-%s-%d", goldenLineage, i), s.Name)
			}
			assert.Equal(t, goldenCanonical, string(joinChunks(chunks)))
		})
	}
}

func TestSplitGreedy(t *testing.T) {
	// Golden entry sizes: ConfigMap 204, Deployment 159, ClusterRole 93 bytes.
	tests := []struct {
		limit int
		sizes []int
	}{
		{domain.DefaultMaxChunkBytes, []int{460}},
		{461, []int{460}},
		{460, []int{460}}, // the whole inventory exactly at the limit
		{459, []int{366, 95}},
		{366, []int{366, 95}}, // greedy, not balanced: [206 255] would also fit
		{365, []int{206, 255}},
		{300, []int{206, 255}},
		{255, []int{206, 255}},
		{254, []int{206, 161, 95}},
		{206, []int{206, 161, 95}}, // the largest entry exactly at the limit
	}
	inv := goldenInventory(t)
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.limit), func(t *testing.T) {
			chunks, err := domain.SplitInventory(inv, tt.limit, domain.DefaultMaxChunks)
			require.NoError(t, err)
			assert.Equal(t, tt.sizes, chunkSizes(chunks))
			for i, c := range chunks {
				assert.LessOrEqual(t, c.Size(), tt.limit)
				assert.Equal(t, i, c.Index())
				assert.Equal(t, len(chunks), c.Count())
				_, err := domain.DecodeEntries(c.Data())
				require.NoError(t, err)
			}
			assert.Equal(t, goldenCanonical, string(joinChunks(chunks)))
		})
	}
}

func TestSplitEntryTooLarge(t *testing.T) {
	inv := goldenInventory(t)
	_, err := domain.SplitInventory(inv, 205, domain.DefaultMaxChunks)
	var tooLarge *domain.EntryTooLargeError
	require.ErrorAs(t, err, &tooLarge)
	assert.Equal(t, cmID, tooLarge.ID)
	assert.Equal(t, 206, tooLarge.Bytes)
	assert.Equal(t, 205, tooLarge.Limit)

	// Only the Deployment is over 160: the error names it, not its neighbours.
	_, err = domain.SplitInventory(mustInventory(t, goldenEntries()[:2]), 160, domain.DefaultMaxChunks)
	require.ErrorAs(t, err, &tooLarge)
	assert.Equal(t, deployID, tooLarge.ID)
	assert.Equal(t, 161, tooLarge.Bytes)
}

// TestLargestEntryBytes: the largest entry alone in a chunk, which is the smallest chunk limit
// the inventory can be split under.
func TestLargestEntryBytes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []domain.Entry
		want    int
	}{
		{"golden: the ConfigMap", goldenEntries(), 206},
		{"the Deployment and the ClusterRole", goldenEntries()[:2], 161},
		{"empty", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := mustInventory(t, tc.entries)
			assert.Equal(t, tc.want, inv.LargestEntryBytes())
			if tc.want > 2 {
				_, err := domain.SplitInventory(inv, tc.want, domain.DefaultMaxChunks)
				require.NoError(t, err)
				_, err = domain.SplitInventory(inv, tc.want-1, domain.DefaultMaxChunks)
				var tooLarge *domain.EntryTooLargeError
				require.ErrorAs(t, err, &tooLarge)
			}
		})
	}
}

func TestSplitTooManyChunks(t *testing.T) {
	inv := goldenInventory(t)
	_, err := domain.SplitInventory(inv, 206, 2)
	var tooMany *domain.TooManyChunksError
	require.ErrorAs(t, err, &tooMany)
	assert.Equal(t, 3, tooMany.Chunks)
	assert.Equal(t, 2, tooMany.Limit)

	chunks, err := domain.SplitInventory(inv, 206, 3)
	require.NoError(t, err)
	assert.Len(t, chunks, 3)
}

func TestSplitDefaultChunkCap(t *testing.T) {
	// One entry per chunk: 64 fit under the default cap, 65 do not, whether the cap is
	// given or left at zero.
	for _, maxChunks := range []int{0, -1, domain.DefaultMaxChunks} {
		chunks, err := domain.SplitInventory(mustInventory(t, entriesN(64)), 100, maxChunks)
		require.NoError(t, err)
		require.Len(t, chunks, 64)
		_, err = domain.SplitInventory(mustInventory(t, entriesN(65)), 100, maxChunks)
		var tooMany *domain.TooManyChunksError
		require.ErrorAs(t, err, &tooMany, "maxChunks %d", maxChunks)
		assert.Equal(t, 65, tooMany.Chunks)
		assert.Equal(t, domain.DefaultMaxChunks, tooMany.Limit)
	}
}

func TestSplitEmptyInventory(t *testing.T) {
	for _, limit := range []int{2, 300, domain.DefaultMaxChunkBytes} {
		chunks, err := domain.SplitInventory(mustInventory(t, nil), limit, 1)
		require.NoError(t, err)
		require.Len(t, chunks, 1)
		assert.Equal(t, "[]", string(chunks[0].Data()))
		assert.Equal(t, 0, chunks[0].Index())
		assert.Equal(t, 1, chunks[0].Count())
	}
}

func TestSplitLimitBounds(t *testing.T) {
	for _, limit := range []int{-1, 0, 1} {
		_, err := domain.SplitInventory(goldenInventory(t), limit, domain.DefaultMaxChunks)
		assert.Error(t, err, "limit %d", limit)
	}
	// A limit above what a Secret may hold is lowered to it: one entry of 1 MiB + 1 is refused.
	big := domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "big", Labels: map[string]string{"x": ""}}
	base := len(mustInventory(t, []domain.Entry{big}).Canonical())
	big.Labels["x"] = strings.Repeat("a", domain.SecretDataLimit-base+1)
	_, err := domain.SplitInventory(mustInventory(t, []domain.Entry{big}), 2*domain.SecretDataLimit, 1)
	var tooLarge *domain.EntryTooLargeError
	require.ErrorAs(t, err, &tooLarge)
	assert.Equal(t, domain.SecretDataLimit, tooLarge.Limit)
	// Exactly 1 MiB fits.
	big.Labels["x"] = big.Labels["x"][1:]
	chunks, err := domain.SplitInventory(mustInventory(t, []domain.Entry{big}), 2*domain.SecretDataLimit, 1)
	require.NoError(t, err)
	assert.Equal(t, domain.SecretDataLimit, chunks[0].Size())
}

func TestSplitDeterministic(t *testing.T) {
	entries := entriesN(40)
	reversed := make([]domain.Entry, len(entries))
	for i, e := range entries {
		reversed[len(entries)-1-i] = e
	}
	a, err := domain.SplitInventory(mustInventory(t, entries), 500, domain.DefaultMaxChunks)
	require.NoError(t, err)
	b, err := domain.SplitInventory(mustInventory(t, reversed), 500, domain.DefaultMaxChunks)
	require.NoError(t, err)
	require.Greater(t, len(a), 1)
	require.Equal(t, len(a), len(b))
	for i := range a {
		assert.Equal(t, a[i].Data(), b[i].Data())
	}
}

func TestSplitJoinReproducesCanonical(t *testing.T) {
	inv := mustInventory(t, append(entriesN(30), goldenEntries()...))
	for _, limit := range []int{206, 250, 400, 1000, 5000, domain.DefaultMaxChunkBytes} {
		chunks, err := domain.SplitInventory(inv, limit, domain.DefaultMaxChunks)
		require.NoError(t, err)
		assert.Equal(t, string(inv.Canonical()), string(joinChunks(chunks)), "limit %d", limit)
		// Decoding every chunk and re-encoding yields the same digest, as design §5 checks.
		var all []domain.Entry
		for _, c := range chunks {
			part, err := domain.DecodeEntries(c.Data())
			require.NoError(t, err)
			all = append(all, part...)
		}
		assert.Equal(t, inv.Digest(), mustInventory(t, all).Digest())
		// Greedy: no chunk could have taken the next chunk's first entry.
		for i := 0; i+1 < len(chunks); i++ {
			next, err := domain.DecodeEntries(chunks[i+1].Data())
			require.NoError(t, err)
			first := mustInventory(t, next[:1]).Size() - 2
			assert.Greater(t, chunks[i].Size()+1+first, limit)
		}
	}
}

func TestChunkName(t *testing.T) {
	lineage := domain.DefaultLineage("team-a", "web")
	suffix := "-" + goldenLineage + "-0" // 15 chars, so 238 are left for the name
	tests := []struct {
		name     string
		compName string
		index    int
		want     string
	}{
		{"golden", "web", 0, goldenChunkName},
		{"index in decimal", "web", 12, "web-a6d6889313c2-12"},
		{"exactly 253 kept", strings.Repeat("a", 238), 0, strings.Repeat("a", 238) + suffix},
		{"exactly 253 kept even with a trailing dash", strings.Repeat("a", 237) + "-", 0, strings.Repeat("a", 237) + "-" + suffix},
		{"254 cut by one", strings.Repeat("a", 239), 0, strings.Repeat("a", 238) + suffix},
		{"cut from the right", strings.Repeat("a", 230) + strings.Repeat("b", 23), 0, strings.Repeat("a", 230) + strings.Repeat("b", 8) + suffix},
		{"trailing dash and dot trimmed", strings.Repeat("a", 235) + "-.-" + strings.Repeat("b", 15), 0, strings.Repeat("a", 235) + suffix},
		{"trailing dot trimmed", strings.Repeat("a", 237) + "." + strings.Repeat("b", 15), 0, strings.Repeat("a", 237) + suffix},
		{"dash in the kept part stays", strings.Repeat("a", 236) + "-b" + strings.Repeat("c", 15), 0, strings.Repeat("a", 236) + "-b" + suffix},
		{"short names untouched even with trailing dash", "web-", 0, "web--" + goldenLineage + "-0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := domain.ChunkName(tt.compName, lineage, tt.index)
			assert.Equal(t, tt.want, got)
			assert.LessOrEqual(t, len(got), 253)
			assert.Equal(t, got, domain.ChunkName(tt.compName, lineage, tt.index), "deterministic")
		})
	}
}

func TestChunkNameLongCompositionAllIndexes(t *testing.T) {
	lineage, err := domain.NewLineage(strings.Repeat("l", 40))
	require.NoError(t, err)
	name := strings.Repeat("n", 253)
	prefix := ""
	for i := range 100 {
		got := domain.ChunkName(name, lineage, i)
		assert.LessOrEqual(t, len(got), 253)
		assert.True(t, strings.HasSuffix(got, fmt.Sprintf("-%s-%d", lineage, i)))
		p := strings.TrimSuffix(got, fmt.Sprintf("-%s-%d", lineage, i))
		if i == 0 {
			prefix = p
		}
		// Longer indexes cut more of the name, never the lineage or index.
		assert.True(t, strings.HasPrefix(prefix, p))
	}
}

func TestRecoverySliceName(t *testing.T) {
	const d = "0123456789abcdef"
	tests := []struct {
		name, comp, uuid string
		part             int
		want             string
	}{
		{"first 8 of the uuid", "web", synUUID, 0, "web-recovery-11111111-" + d + "-0"},
		{"short uuid kept", "web", "abc", 1, "web-recovery-abc-" + d + "-1"},
		{"9-char uuid cut to 8", "web", "123456789", 2, "web-recovery-12345678-" + d + "-2"},
		{"cut to leave room for every part", strings.Repeat("a", 235), synUUID, 9999, strings.Repeat("a", 213) + "-recovery-11111111-" + d + "-9999"},
		{"cut and trimmed", strings.Repeat("a", 211) + "-.x", synUUID, 0, strings.Repeat("a", 211) + "-recovery-11111111-" + d + "-0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := domain.RecoverySliceName(tt.comp, tt.uuid, d, tt.part)
			assert.Equal(t, tt.want, got)
			assert.LessOrEqual(t, len(got), 253)
			family := domain.RecoverySliceFamily(tt.comp, tt.uuid)
			assert.True(t, strings.HasPrefix(got, family+"-"), "every part is named under the family %s", family)
			assert.Equal(t, family, domain.RecoverySliceFamily(tt.comp, tt.uuid[:min(len(tt.uuid), 8)]))
		})
	}
}

func TestDesiredChunkSecret(t *testing.T) {
	inv := goldenInventory(t)
	chunks, err := domain.SplitInventory(inv, 300, domain.DefaultMaxChunks)
	require.NoError(t, err)
	m := meta(inv, compUID, synUUID, time.Date(2025, 6, 1, 13, 0, 0, 0, time.FixedZone("CEST", 2*3600)))
	m.ChunkCount = len(chunks)
	s := domain.DesiredChunkSecret("inv-ns", m, chunks[1])
	assert.Equal(t, domain.ChunkSecret{
		Namespace: "inv-ns",
		Name:      "web-a6d6889313c2-1",
		Type:      "eno.azure.io/inventory-snapshot",
		Labels: map[string]string{
			"app.kubernetes.io/managed-by":   "eno-tombstone-recovery",
			"eno.azure.io/inventory-lineage": goldenLineage,
		},
		Annotations: map[string]string{
			"eno.azure.io/composition-namespace":      "team-a",
			"eno.azure.io/composition-name":           "web",
			"eno.azure.io/composition-uid":            compUID,
			"eno.azure.io/source-synthesis-uuid":      synUUID,
			"eno.azure.io/source-synthesis-timestamp": "2025-06-01T11:00:00Z",
			"eno.azure.io/inventory-chunk-index":      "1",
			"eno.azure.io/inventory-chunk-count":      "2",
			"eno.azure.io/inventory-digest":           goldenDigest,
			"eno.azure.io/inventory-format":           "2",
			"eno.azure.io/control-plane":              thisControlPlane,
		},
		Data: map[string][]byte{"inventory.json": []byte(goldenChunk1)},
	}, s)
	assert.True(t, s.Owned())
	assert.Equal(t, 255, s.DataSize())
}

func TestChunkSecretMatchesDesired(t *testing.T) {
	desired := goldenSecrets(t)[0]
	tests := []struct {
		name   string
		mutate func(s *domain.ChunkSecret)
		match  bool
	}{
		{"identical", func(*domain.ChunkSecret) {}, true},
		{"foreign label added", func(s *domain.ChunkSecret) { s.Labels["team"] = "x" }, true},
		{"foreign annotation added", func(s *domain.ChunkSecret) { s.Annotations["kubectl.kubernetes.io/note"] = "x" }, true},
		{"resourceVersion differs", func(s *domain.ChunkSecret) { s.ResourceVersion = "99" }, true},
		{"type differs", func(s *domain.ChunkSecret) { s.Type = "Opaque" }, false},
		{"data differs", func(s *domain.ChunkSecret) { s.Data[domain.SecretDataKey] = []byte("[]") }, false},
		{"data key missing", func(s *domain.ChunkSecret) { delete(s.Data, domain.SecretDataKey) }, false},
		{"data key renamed", func(s *domain.ChunkSecret) {
			s.Data["other"] = s.Data[domain.SecretDataKey]
			delete(s.Data, domain.SecretDataKey)
		}, false},
		{"extra data key", func(s *domain.ChunkSecret) { s.Data["extra"] = []byte("x") }, false},
		{"managed-by label differs", func(s *domain.ChunkSecret) { s.Labels[domain.LabelManagedBy] = "helm" }, false},
		{"lineage label missing", func(s *domain.ChunkSecret) { delete(s.Labels, domain.LabelLineage) }, false},
		{"nil labels", func(s *domain.ChunkSecret) { s.Labels = nil }, false},
		// Written before control planes were named: stamped by the next synthesis, never rewritten.
		{"names no control plane", func(s *domain.ChunkSecret) { delete(s.Annotations, domain.AnnotationControlPlane) }, true},
		{"names an empty control plane", func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationControlPlane] = "" }, true},
		{"names another control plane", func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationControlPlane] = "other" }, false},
	}
	for _, k := range []string{domain.AnnotationCompositionNamespace, domain.AnnotationCompositionName,
		domain.AnnotationCompositionUID, domain.AnnotationSourceSynthesisUUID, domain.AnnotationSourceSynthesisTime,
		domain.AnnotationChunkIndex, domain.AnnotationChunkCount, domain.AnnotationDigest, domain.AnnotationFormat} {
		tests = append(tests,
			struct {
				name   string
				mutate func(s *domain.ChunkSecret)
				match  bool
			}{"annotation changed " + k, func(s *domain.ChunkSecret) { s.Annotations[k] += "x" }, false},
			struct {
				name   string
				mutate func(s *domain.ChunkSecret)
				match  bool
			}{"annotation missing " + k, func(s *domain.ChunkSecret) { delete(s.Annotations, k) }, false})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			existing := desired.Clone()
			tt.mutate(&existing)
			assert.Equal(t, tt.match, existing.MatchesDesired(desired))
		})
	}
}

func TestChunkSecretMergeDesired(t *testing.T) {
	desired := goldenSecrets(t)[0]
	existing := domain.ChunkSecret{
		Namespace:       invNS,
		Name:            desired.Name,
		Type:            "Opaque",
		Labels:          map[string]string{"team": "platform", domain.LabelLineage: "stale"},
		Annotations:     map[string]string{"backup.io/keep": "true", domain.AnnotationDigest: "sha256:old"},
		Data:            map[string][]byte{domain.SecretDataKey: []byte("[]"), "stray": []byte("x")},
		ResourceVersion: "42",
	}
	before := existing.Clone()
	merged := existing.MergeDesired(desired)

	assert.True(t, merged.MatchesDesired(desired))
	assert.Equal(t, "42", merged.ResourceVersion)
	assert.Equal(t, "platform", merged.Labels["team"])
	assert.Equal(t, "true", merged.Annotations["backup.io/keep"])
	assert.Equal(t, goldenLineage, merged.Labels[domain.LabelLineage])
	assert.Equal(t, desired.Data, merged.Data, "data is exactly ours")
	assert.Equal(t, domain.SecretType, merged.Type)
	assert.Len(t, merged.Labels, 3)
	assert.Len(t, merged.Annotations, 11)
	assert.Equal(t, before, existing, "the existing Secret is not modified")

	// Nil maps on the existing Secret are fine.
	merged = domain.ChunkSecret{Name: desired.Name}.MergeDesired(desired)
	assert.True(t, merged.MatchesDesired(desired))

	// The merged Secret does not alias desired's data.
	merged.Data[domain.SecretDataKey][1] = 'X'
	assert.Equal(t, goldenChunk0, string(desired.Data[domain.SecretDataKey]))
}

func TestChunkSecretOwned(t *testing.T) {
	s := goldenSecrets(t)[0]
	assert.True(t, s.Owned())
	c := s.Clone()
	c.Type = "Opaque"
	assert.False(t, c.Owned())
	c = s.Clone()
	delete(c.Labels, domain.LabelManagedBy)
	assert.False(t, c.Owned())
	c = s.Clone()
	c.Labels[domain.LabelManagedBy] = "someone-else"
	assert.False(t, c.Owned())
}

func TestChunkSecretRecordedForAnother(t *testing.T) {
	self := domain.CompositionRef{Namespace: "team-a", Name: "web"}
	with := func(ns, name string, set bool) domain.ChunkSecret {
		s := goldenSecrets(t)[0].Clone()
		delete(s.Annotations, domain.AnnotationCompositionNamespace)
		delete(s.Annotations, domain.AnnotationCompositionName)
		if set {
			s.Annotations[domain.AnnotationCompositionNamespace] = ns
			s.Annotations[domain.AnnotationCompositionName] = name
		}
		return s
	}
	tests := []struct {
		name   string
		secret domain.ChunkSecret
		other  domain.CompositionRef
		found  bool
	}{
		{"recorded for this Composition", with("team-a", "web", true), domain.CompositionRef{}, false},
		{"same name, another namespace", with("team-b", "web", true), domain.CompositionRef{Namespace: "team-b", Name: "web"}, true},
		{"same namespace, another name (a cut collision)", with("team-a", "web-x", true), domain.CompositionRef{Namespace: "team-a", Name: "web-x"}, true},
		{"names are exact", with("team-a", "Web", true), domain.CompositionRef{Namespace: "team-a", Name: "Web"}, true},
		{"no annotations", with("", "", false), domain.CompositionRef{}, false},
		{"no namespace", with("", "web-x", true), domain.CompositionRef{}, false},
		{"no name", with("team-b", "", true), domain.CompositionRef{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other, found := tt.secret.RecordedForAnother(self)
			assert.Equal(t, tt.found, found)
			assert.Equal(t, tt.other, other)
		})
	}
}

func TestChunkSecretCloneIsDeep(t *testing.T) {
	s := goldenSecrets(t)[0]
	c := s.Clone()
	c.Labels["x"] = "y"
	c.Annotations["x"] = "y"
	c.Data[domain.SecretDataKey][0] = '{'
	assert.NotContains(t, s.Labels, "x")
	assert.NotContains(t, s.Annotations, "x")
	assert.Equal(t, byte('['), s.Data[domain.SecretDataKey][0])
}
