package domain_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

func TestGoldenInventory(t *testing.T) {
	inv := goldenInventory(t)
	assert.Equal(t, goldenCanonical, string(inv.Canonical()))
	assert.Len(t, inv.Canonical(), 460)
	assert.Equal(t, 460, inv.Size())
	assert.Equal(t, goldenDigest, inv.Digest())
	assert.Equal(t, 3, inv.Len())
	assert.Equal(t, []domain.ResourceID{cmID, deployID, roleID},
		[]domain.ResourceID{inv.Entries()[0].ID(), inv.Entries()[1].ID(), inv.Entries()[2].ID()})
}

func TestGoldenInventoryFromManifests(t *testing.T) {
	contents := readSynthesis(t, goldenManifests()...)
	inv := contents.Inventory()
	assert.Equal(t, goldenCanonical, string(inv.Canonical()))
	assert.Equal(t, goldenDigest, inv.Digest())
}

func TestInventoryCanonicalOrder(t *testing.T) {
	e := func(group, version, kind, ns, name string) domain.Entry {
		return domain.Entry{Group: group, Version: version, Kind: kind, Namespace: ns, Name: name}
	}
	tests := []struct {
		name  string
		in    []domain.Entry
		order []string // names in the expected order
	}{
		{"group first", []domain.Entry{e("b", "v1", "A", "a", "1"), e("a", "v1", "Z", "z", "2")}, []string{"2", "1"}},
		{"core group sorts before named groups", []domain.Entry{e("apps", "v1", "A", "", "1"), e("", "v1", "Z", "", "2")}, []string{"2", "1"}},
		{"kind before namespace", []domain.Entry{e("", "v1", "B", "a", "1"), e("", "v1", "A", "z", "2")}, []string{"2", "1"}},
		{"namespace before name", []domain.Entry{e("", "v1", "A", "b", "1"), e("", "v1", "A", "a", "2")}, []string{"2", "1"}},
		{"cluster-scoped before namespaced", []domain.Entry{e("", "v1", "A", "a", "1"), e("", "v1", "A", "", "2")}, []string{"2", "1"}},
		{"name before version", []domain.Entry{e("", "v1", "A", "", "b"), e("", "v2", "A", "", "a")}, []string{"a", "b"}},
		{"byte order, uppercase first", []domain.Entry{e("", "v1", "A", "", "b"), e("", "v1", "A", "", "B")}, []string{"B", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := mustInventory(t, tt.in)
			var got []string
			for _, en := range inv.Entries() {
				got = append(got, en.Name)
			}
			assert.Equal(t, tt.order, got)
		})
	}
}

func TestInventoryOrderIndependentOfInput(t *testing.T) {
	entries := goldenEntries()
	want := goldenInventory(t)
	perms := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, p := range perms {
		inv := mustInventory(t, []domain.Entry{entries[p[0]], entries[p[1]], entries[p[2]]})
		assert.Equal(t, want.Canonical(), inv.Canonical(), "permutation %v", p)
		assert.Equal(t, want.Digest(), inv.Digest())
	}
}

func TestInventoryDuplicateIdentity(t *testing.T) {
	base := domain.Entry{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "ns", Name: "web"}
	tests := []struct {
		name string
		dup  domain.Entry
	}{
		{"identical", base},
		{"other version", domain.Entry{Group: "apps", Version: "v2", Kind: "Deployment", Namespace: "ns", Name: "web"}},
		{"other labels", domain.Entry{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "ns", Name: "web", Labels: map[string]string{"a": "b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Unrelated entries around the pair prove the check is not positional.
			_, err := domain.NewInventory([]domain.Entry{tt.dup, entriesN(2)[0], base, entriesN(2)[1]})
			var dup *domain.DuplicateEntryError
			require.ErrorAs(t, err, &dup)
			assert.Equal(t, base.ID(), dup.ID)
			assert.Contains(t, err.Error(), "Deployment.apps/ns/web")
		})
	}
	t.Run("same name in another namespace, kind or group is distinct", func(t *testing.T) {
		_, err := domain.NewInventory([]domain.Entry{base,
			{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "other", Name: "web"},
			{Group: "apps", Version: "v1", Kind: "StatefulSet", Namespace: "ns", Name: "web"},
			{Group: "extensions", Version: "v1", Kind: "Deployment", Namespace: "ns", Name: "web"}})
		require.NoError(t, err)
	})
}

func TestInventoryEmpty(t *testing.T) {
	for name, in := range map[string][]domain.Entry{"nil": nil, "empty": {}} {
		t.Run(name, func(t *testing.T) {
			inv := mustInventory(t, in)
			assert.Equal(t, "[]", string(inv.Canonical()))
			assert.Equal(t, 2, inv.Size())
			assert.Equal(t, 0, inv.Len())
			assert.Equal(t, "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945", inv.Digest())
		})
	}
}

func TestInventoryEncodingMatchesEncodingJSON(t *testing.T) {
	tests := []struct {
		name  string
		entry domain.Entry
	}{
		{"html characters are escaped", domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a",
			Labels: map[string]string{"x": "<b>&amp;</b>", "<k>": "&"}}},
		{"line and paragraph separators", domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a",
			Labels: map[string]string{"x": "a\u2028b\u2029c"}}},
		{"control characters and quotes", domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a",
			Labels: map[string]string{"x": "\x00\t\n\"\\/\x7f"}}},
		{"U+FFFD stays literal", domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a\ufffd"}},
		{"non-ASCII stays literal", domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "caf\u00e9-\u6f22"}},
		{"map keys sorted", domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a",
			Labels: map[string]string{"z": "1", "a": "2", "m": "3", "A": "4"}}},
		{"empty maps omitted", domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a",
			Labels: map[string]string{}, Annotations: map[string]string{}}},
		{"all fields", goldenEntries()[2]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := mustInventory(t, []domain.Entry{tt.entry})
			want, err := json.Marshal(tt.entry)
			require.NoError(t, err)
			assert.Equal(t, "["+string(want)+"]", string(inv.Canonical()))
			assert.Equal(t, len(want)+2, inv.Size())
		})
	}
}

func TestInventoryHTMLEscapingIsLiteral(t *testing.T) {
	inv := mustInventory(t, []domain.Entry{{Version: "v1", Kind: "ConfigMap", Name: "a",
		Labels: map[string]string{"x": "<&>"}}})
	assert.Equal(t, `[{"version":"v1","kind":"ConfigMap","name":"a","labels":{"x":"\u003c\u0026\u003e"}}]`, string(inv.Canonical()))
}

func TestInventoryFieldOrderAndOmission(t *testing.T) {
	inv := mustInventory(t, []domain.Entry{{Group: "g", Version: "v", Kind: "K", Namespace: "n", Name: "m",
		Labels: map[string]string{"l": "1"}, Annotations: map[string]string{domain.AnnotationDeletionGroup: "3"}}})
	assert.Equal(t, `[{"group":"g","version":"v","kind":"K","namespace":"n","name":"m","labels":{"l":"1"},"annotations":{"eno.azure.io/deletion-group":"3"}}]`, string(inv.Canonical()))
	inv = mustInventory(t, []domain.Entry{{Version: "v", Kind: "K", Name: "m"}})
	assert.Equal(t, `[{"version":"v","kind":"K","name":"m"}]`, string(inv.Canonical()))
}

func TestInventoryRejectsInvalidEntries(t *testing.T) {
	tests := []struct {
		name  string
		entry domain.Entry
		want  string
	}{
		{"no version", domain.Entry{Kind: "K", Name: "n"}, "no version"},
		{"no kind", domain.Entry{Version: "v1", Name: "n"}, "no kind"},
		{"no name", domain.Entry{Version: "v1", Kind: "K"}, "no name"},
		{"foreign annotation", domain.Entry{Version: "v1", Kind: "K", Name: "n",
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}}, "last-applied"},
		// Marshal would write \ufffd, which decodes to other bytes: the digest could never verify.
		{"invalid utf-8 name", domain.Entry{Version: "v1", Kind: "K", Name: "a\x8d"}, "UTF-8"},
		{"invalid utf-8 group", domain.Entry{Group: "\xff", Version: "v1", Kind: "K", Name: "n"}, "UTF-8"},
		{"invalid utf-8 label key", domain.Entry{Version: "v1", Kind: "K", Name: "n", Labels: map[string]string{"\xc3": "v"}}, "UTF-8"},
		{"invalid utf-8 label value", domain.Entry{Version: "v1", Kind: "K", Name: "n", Labels: map[string]string{"k": "\xc3("}}, "UTF-8"},
		{"invalid utf-8 annotation value", domain.Entry{Version: "v1", Kind: "K", Name: "n",
			Annotations: map[string]string{domain.AnnotationDeletionGroup: "\xe2\x82"}}, "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := domain.NewInventory([]domain.Entry{tt.entry})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestInventoryIsImmutable(t *testing.T) {
	entries := goldenEntries()
	inv := mustInventory(t, entries)
	// Mutating the caller's input or a returned copy must not change the inventory.
	entries[2].Labels["app"] = "changed"
	got := inv.Entries()
	got[0].Labels["app"] = "changed"
	got[0].Name = "changed"
	assert.Equal(t, "web", inv.Entries()[0].Labels["app"])
	assert.Equal(t, "web-settings", inv.Entries()[0].Name)
	assert.Equal(t, goldenCanonical, string(inv.Canonical()))
}

func TestEntryAPIVersionAndResourceIDString(t *testing.T) {
	assert.Equal(t, "v1", domain.Entry{Version: "v1"}.APIVersion())
	assert.Equal(t, "apps/v1", domain.Entry{Group: "apps", Version: "v1"}.APIVersion())
	assert.Equal(t, "ConfigMap/team-a/web-settings", cmID.String())
	assert.Equal(t, "Deployment.apps/team-a/web", deployID.String())
	assert.Equal(t, "ClusterRole.rbac.authorization.k8s.io/web-reader", roleID.String())
}

func TestDecodeEntries(t *testing.T) {
	valid := []struct {
		name string
		data string
		want int
	}{
		{"golden", goldenCanonical, 3},
		{"golden chunk 1", goldenChunk1, 2},
		{"empty array", "[]", 0},
		{"surrounding whitespace", " \n[]\t\r\n", 0},
	}
	for _, tt := range valid {
		t.Run(tt.name, func(t *testing.T) {
			got, err := domain.DecodeEntries([]byte(tt.data))
			require.NoError(t, err)
			assert.NotNil(t, got)
			assert.Len(t, got, tt.want)
		})
	}
	invalid := []struct {
		name string
		data string
	}{
		{"empty", ""},
		{"garbage", "not json"},
		{"null", "null"},
		{"object", `{"version":"v1","kind":"K","name":"n"}`},
		{"truncated", goldenCanonical[:100]},
		{"truncated at the end", goldenCanonical[:len(goldenCanonical)-1]},
		{"trailing array", "[][]"},
		{"trailing garbage", "[] x"},
		{"trailing close bracket", "[]]"},
		{"trailing close brace", "[]}"},
		{"unknown field", `[{"version":"v1","kind":"K","name":"n","spec":{}}]`},
		{"wrong field type", `[{"version":1,"kind":"K","name":"n"}]`},
		{"null entry", `[null]`},
		{"entry without name", `[{"version":"v1","kind":"K"}]`},
		{"foreign annotation", `[{"version":"v1","kind":"K","name":"n","annotations":{"a":"b"}}]`},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			_, err := domain.DecodeEntries([]byte(tt.data))
			assert.Error(t, err)
		})
	}
}

func TestDecodeEntriesRoundTripsCanonical(t *testing.T) {
	inv := goldenInventory(t)
	got, err := domain.DecodeEntries(inv.Canonical())
	require.NoError(t, err)
	assert.Equal(t, inv.Entries(), got)
}
