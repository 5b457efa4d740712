package domain_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// FuzzDecodeEntries: decoding never panics, and whatever decodes re-encodes canonically and
// stably (decode(canonical) encodes to the same canonical bytes).
func FuzzDecodeEntries(f *testing.F) {
	for _, s := range []string{
		goldenCanonical, goldenChunk0, goldenChunk1, "[]", " [ ] ", "[]]", "[]}", "[][]", "null", "{}", "",
		goldenCanonical[:100], `[null]`, `[{}]`,
		`[{"version":"v1","kind":"K","name":"\u003c\u2028\ufffd"}]`,
		`[{"VERSION":"v1","Kind":"K","name":"n"}]`,
		`[{"version":"v1","kind":"K","name":"n","name":"m"}]`,
		`[{"version":"v1","kind":"K","name":"n","labels":{}}]`,
		`[{"version":"v1","kind":"K","name":"n"},{"version":"v2","kind":"K","name":"n"}]`,
		`[{"version":"v1","kind":"K","name":"n","annotations":{"eno.azure.io/deletion-group":"1"}}]`,
		"[{\"version\":\"v1\",\"kind\":\"K\",\"name\":\"\xff\"}]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := domain.DecodeEntries(data)
		if err != nil {
			return
		}
		require.NotNil(t, entries)
		inv, err := domain.NewInventory(entries)
		if err != nil {
			var dup *domain.DuplicateEntryError
			require.ErrorAs(t, err, &dup, "decoded entries are valid, so only duplicates may fail")
			return
		}
		again, err := domain.DecodeEntries(inv.Canonical())
		require.NoError(t, err)
		inv2, err := domain.NewInventory(again)
		require.NoError(t, err)
		require.Equal(t, string(inv.Canonical()), string(inv2.Canonical()))
		require.Equal(t, inv.Digest(), inv2.Digest())
	})
}

// FuzzReadSnapshot builds one or two chunk Secrets from fuzzed annotations and data. Reading
// never panics, every failure carries a design §5 reason, and a returned snapshot re-verifies.
func FuzzReadSnapshot(f *testing.F) {
	ts := synTime.Format(time.RFC3339)
	f.Add(domain.ManagedByValue, domain.SecretType, ts, "0", "1", goldenDigest, "1", []byte(goldenCanonical), false, "1", []byte(""))
	f.Add(domain.ManagedByValue, domain.SecretType, ts, "0", "2", goldenDigest, "1", []byte(goldenChunk0), true, "1", []byte(goldenChunk1))
	f.Add(domain.ManagedByValue, domain.SecretType, ts, "1", "2", goldenDigest, "1", []byte(goldenChunk1), true, "0", []byte(goldenChunk0))
	f.Add(domain.ManagedByValue, domain.SecretType, ts, "0", "2", goldenDigest, "1", []byte(goldenChunk0), true, "0", []byte(goldenChunk1))
	f.Add(domain.ManagedByValue, domain.SecretType, ts, "0", "2", goldenDigest, "1", []byte(goldenChunk0), true, "2", []byte(goldenChunk1))
	f.Add(domain.ManagedByValue, domain.SecretType, ts, "0", "1", mustInventory(f, nil).Digest(), "1", []byte("[]"), false, "", []byte(""))
	f.Add(domain.ManagedByValue, domain.SecretType, ts, "0", "1000000000", goldenDigest, "1", []byte(goldenCanonical), false, "", []byte(""))
	f.Add(domain.ManagedByValue, domain.SecretType, ts, "-1", "1", goldenDigest, "1", []byte(goldenCanonical), false, "", []byte(""))
	f.Add(domain.ManagedByValue, domain.SecretType, "9999-12-31T23:59:59Z", "0", "1", goldenDigest, "1", []byte(goldenCanonical), false, "", []byte(""))
	f.Add(domain.ManagedByValue, domain.SecretType, ts, "0", "1", "sha256:00", "1", []byte(goldenCanonical), false, "", []byte(""))
	f.Add(domain.ManagedByValue, domain.SecretType, ts, "0", "1", goldenDigest, "2", []byte(goldenCanonical), false, "", []byte(""))
	f.Add(domain.ManagedByValue, domain.SecretType, ts, "0", "1", goldenDigest, "1", []byte(goldenCanonical[:120]), false, "", []byte(""))
	f.Add(domain.ManagedByValue, domain.SecretType, ts, "0", "1", goldenDigest, "1", []byte(goldenCanonical+"]"), false, "", []byte(""))
	f.Add("helm", "Opaque", ts, "0", "1", goldenDigest, "1", []byte(goldenCanonical), false, "", []byte(""))
	f.Fuzz(func(t *testing.T, managedBy, typ, timestamp, index, count, digest, format string, data []byte, two bool, index2 string, data2 []byte) {
		inv := goldenInventory(t)
		m := meta(inv, oldCompUID, oldSynUUID, synTime)
		m.ChunkCount = 1
		chunks, err := domain.SplitInventory(inv, domain.DefaultMaxChunkBytes, 1)
		require.NoError(t, err)
		a := domain.DesiredChunkSecret(invNS, m, chunks[0])
		a.Type = typ
		a.Labels[domain.LabelManagedBy] = managedBy
		a.Annotations[domain.AnnotationSourceSynthesisTime] = timestamp
		a.Annotations[domain.AnnotationChunkIndex] = index
		a.Annotations[domain.AnnotationChunkCount] = count
		a.Annotations[domain.AnnotationDigest] = digest
		a.Annotations[domain.AnnotationFormat] = format
		a.Data[domain.SecretDataKey] = data
		secrets := []domain.ChunkSecret{a}
		if two {
			b := a.Clone()
			b.Name = "web-" + goldenLineage + "-b"
			b.Annotations[domain.AnnotationChunkIndex] = index2
			b.Data[domain.SecretDataKey] = data2
			secrets = append(secrets, b)
		}

		snap, err := domain.ReadHistory(secrets, now, domain.DefaultMaxChunks).Verdict()
		if err != nil {
			_, ok := domain.InvalidReasonOf(err)
			require.True(t, ok, "every refusal names a design §5 reason: %v", err)
			return
		}
		got := snap.Meta()
		sum := sha256.Sum256(snap.Inventory().Canonical())
		require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), got.Digest)
		require.Equal(t, got.Digest, snap.Inventory().Digest())
		require.Len(t, snap.Chunks(), got.ChunkCount)
		for i, c := range snap.Chunks() {
			idx, err := strconv.Atoi(c.Annotations[domain.AnnotationChunkIndex])
			require.NoError(t, err)
			require.Equal(t, i, idx, "chunks are returned in index order")
			require.True(t, c.Owned())
		}
		require.False(t, got.SynthesisTime.After(now.Add(5*time.Minute)))
	})
}

// FuzzSplitJoin: splitting never loses, reorders or oversizes anything, is deterministic,
// and a snapshot written from the chunks reads back to the same inventory.
func FuzzSplitJoin(f *testing.F) {
	f.Add(uint8(3), "web", "frontend", uint16(300), uint8(64))
	f.Add(uint8(0), "", "", uint16(2), uint8(1))
	f.Add(uint8(40), "cm-", "<&>\u2028", uint16(200), uint8(64))
	f.Add(uint8(10), "x", strings.Repeat("v", 100), uint16(120), uint8(3))
	f.Add(uint8(5), "a", "", uint16(1), uint8(0))
	f.Add(uint8(64), "n", "l", uint16(70), uint8(0))
	f.Add(uint8(255), "long-name-", "label", uint16(65535), uint8(2))
	f.Fuzz(func(t *testing.T, n uint8, name, label string, maxBytes uint16, maxChunks uint8) {
		entries := make([]domain.Entry, int(n)%80)
		for i := range entries {
			entries[i] = domain.Entry{Group: []string{"", "apps"}[i%2], Version: "v1", Kind: "K", Namespace: "ns",
				Name: fmt.Sprintf("%s%d", name, i), Labels: map[string]string{"l": strings.Repeat(label, i%3)}}
		}
		inv, err := domain.NewInventory(entries)
		if err != nil {
			require.False(t, utf8.ValidString(name) && utf8.ValidString(label), "only invalid UTF-8 is refused: %v", err)
			return
		}
		limit, capN := int(maxBytes), int(maxChunks)
		chunks, err := domain.SplitInventory(inv, limit, capN)
		if err != nil {
			var tooLarge *domain.EntryTooLargeError
			var tooMany *domain.TooManyChunksError
			switch {
			case errors.As(err, &tooLarge):
				require.Greater(t, tooLarge.Bytes, limit)
			case errors.As(err, &tooMany):
				require.Greater(t, tooMany.Chunks, tooMany.Limit)
			default:
				require.Less(t, limit, 2, "unexpected error %v", err)
			}
			return
		}
		require.NotEmpty(t, chunks)
		if capN > 0 {
			require.LessOrEqual(t, len(chunks), capN)
		}
		for i, c := range chunks {
			require.LessOrEqual(t, c.Size(), limit)
			require.Equal(t, i, c.Index())
			require.Equal(t, len(chunks), c.Count())
		}
		require.Equal(t, string(inv.Canonical()), string(joinChunks(chunks)))
		again, err := domain.SplitInventory(inv, limit, capN)
		require.NoError(t, err)
		for i := range chunks {
			require.True(t, bytes.Equal(chunks[i].Data(), again[i].Data()))
		}

		m := meta(inv, oldCompUID, oldSynUUID, synTime)
		m.ChunkCount = len(chunks)
		secrets := make([]domain.ChunkSecret, len(chunks))
		for i, c := range chunks {
			secrets[len(chunks)-1-i] = domain.DesiredChunkSecret(invNS, m, c)
		}
		snap, err := domain.ReadHistory(secrets, now, capN).Verdict()
		require.NoError(t, err)
		require.Equal(t, string(inv.Canonical()), string(snap.Inventory().Canonical()))
	})
}

// FuzzReadSynthesis: arbitrary manifests never panic; failures are SliceErrors; whatever is
// recorded is also covered, and only produced resources are recorded.
func FuzzReadSynthesis(f *testing.F) {
	m := goldenManifests()
	f.Add(m[0], m[1], false, false, synUUID)
	f.Add(m[2], patchManifest("apps/v1", "Deployment", "ns", "x"), false, false, synUUID)
	f.Add(m[2], patchManifest("apps/v1", "Deployment", "ns", "x"), false, true, synUUID)
	f.Add(m[0], m[0], false, false, synUUID)
	f.Add(m[0], m[0], false, true, synUUID)
	f.Add(m[1], `{"apiVersion":"eno.azure.io/v1","kind":"Patch","metadata":{"name":"a"}}`, false, false, synUUID)
	f.Add("{", "null", false, false, synUUID)
	f.Add(`{"apiVersion":"apps/","kind":"K","metadata":{"name":"n"}}`, "[]", true, true, synUUID)
	f.Add(`{"apiVersion":"/v1","kind":"K","metadata":{"name":"n"}}`, `{"apiVersion":"a/b/v1","kind":"K","metadata":{"name":"n"}}`, false, false, synUUID)
	f.Add(m[0], m[1], false, false, oldSynUUID)
	f.Add(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","Name":"b"}}`, m[1], false, false, synUUID)
	f.Add(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"na\u006de":"a","labels":{"A":"1","a":"2"}}}`, m[1], true, false, synUUID)
	f.Add(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"metadata":{"name":"b"}}`, m[1], false, false, synUUID)
	f.Add(m[0], `{"apiVersion":"eno.azure.io/v1","kind":"Patch","metadata":{"name":"a"},"patch":{"apiVersion":"v1","kind":"Secret","Kind":"ConfigMap"}}`, false, false, synUUID)
	f.Fuzz(func(t *testing.T, m1, m2 string, d1, d2 bool, uuid string) {
		c := composition()
		s := slice(goldenSlice, domain.SliceResource{Manifest: m1, Deleted: d1}, domain.SliceResource{Manifest: m2, Deleted: d2})
		s.SynthesisUUID = uuid
		got, err := domain.ReadSynthesis(c, []domain.ResourceSlice{s})
		if err != nil {
			require.True(t, domain.IsSliceError(err), "%v", err)
			return
		}
		inv := got.Inventory()
		require.LessOrEqual(t, inv.Len(), 2)
		for _, e := range inv.Entries() {
			require.True(t, got.Covers(e.ID()))
		}
		if d1 && d2 {
			require.Equal(t, 0, inv.Len(), "tombstones are never recorded")
		}
		back, err := domain.DecodeEntries(inv.Canonical())
		require.NoError(t, err)
		require.Len(t, back, inv.Len())
		// Whatever is accepted has one identity: Kubernetes' exact-key reading and encoding/json's
		// case-insensitive one agree, and that identity is what is recorded or covered (design §4).
		for _, m := range []string{m1, m2} {
			exact, ok := exactIdentity(m)
			require.True(t, ok, "accepted manifest is JSON: %s", m)
			folded, ok := foldedIdentity(m)
			require.True(t, ok, "accepted manifest decodes: %s", m)
			require.Equal(t, exact, folded, "accepted manifest reads two ways: %s", m)
			if exact.Group != "eno.azure.io" || exact.Kind != "Patch" {
				require.True(t, got.Covers(exact), "%s", m)
			}
		}
	})
}

// FuzzCanonicalEntryMatchesMarshal: the canonical encoding of an entry is exactly
// encoding/json.Marshal of it, escaping included, and so is the whole array.
func FuzzCanonicalEntryMatchesMarshal(f *testing.F) {
	f.Add("apps", "v1", "Deployment", "team-a", "web", "app", "web", "1", "-1")
	f.Add("", "v1", "ConfigMap", "", "<script>", "a&b", "\u2028\u2029", "", "")
	f.Add("rbac.authorization.k8s.io", "v1", "ClusterRole", "", "web-reader", "", "", "", "")
	f.Add("g", "v", "K", "n", "\xff\xfe", "\x00", "\"\\", "\t", "\n")
	f.Add("", "", "K", "", "n", "", "", "", "")
	f.Fuzz(func(t *testing.T, group, version, kind, ns, name, lk, lv, rg, dg string) {
		e := domain.Entry{Group: group, Version: version, Kind: kind, Namespace: ns, Name: name}
		if lk != "" || lv != "" {
			e.Labels = map[string]string{lk: lv, "z-" + lk: lv}
		}
		if rg != "" || dg != "" {
			e.Annotations = map[string]string{domain.AnnotationReadinessGroup: rg, domain.AnnotationDeletionGroup: dg}
		}
		other := domain.Entry{Group: group, Version: version, Kind: kind, Namespace: ns + "-other", Name: name}
		inv, err := domain.NewInventory([]domain.Entry{e, other})
		if err != nil {
			return // an invalid entry; validation is tested elsewhere
		}
		one := mustInventory(t, []domain.Entry{e})
		want, err := json.Marshal(e)
		require.NoError(t, err)
		assert.Equal(t, "["+string(want)+"]", string(one.Canonical()))
		all, err := json.Marshal(inv.Entries())
		require.NoError(t, err)
		assert.Equal(t, string(all), string(inv.Canonical()))
		assert.Equal(t, len(all), inv.Size())
		// Whatever is accepted reads back to the same digest (found by FuzzSplitJoin: invalid
		// UTF-8 used to be accepted and then never verified).
		back, err := domain.DecodeEntries(inv.Canonical())
		require.NoError(t, err)
		assert.Equal(t, inv.Digest(), mustInventory(t, back).Digest())
	})
}
