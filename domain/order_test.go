package domain

import (
	"encoding/json"
	"slices"
	"testing"
)

// The canonical order of design §3 is (group, kind, namespace, name, version), compared as byte
// strings. compareEntries (and ResourceID.Compare for identities) define it, and sortEntries
// sorts by it. FuzzCanonicalOrder holds all three to the design's tuple on entries whose fields
// are drawn from values that tie, prefix one another and differ only in case or in bytes above
// ASCII.
func FuzzCanonicalOrder(f *testing.F) {
	// Each entry takes 5 bytes, one per field, indexing values.
	values := []string{"", "a", "ab", "b", "B", "\u00e9", "a\x00"}
	for _, seed := range [][]byte{
		{},
		{0, 0, 0, 0, 0},
		{0, 0, 0, 0, 2, 0, 0, 0, 0, 1}, // versions of one identity, out of order
		{0, 0, 0, 3, 0, 0, 0, 0, 1, 0}, // names, out of order
		// each field out of order after ties in the fields before it
		{3, 0, 0, 0, 0, 1, 4, 0, 0, 0, 1, 1, 5, 0, 0, 1, 1, 1, 6, 0, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1},
		{5, 5, 5, 5, 5, 1, 1, 1, 1, 1, 4, 4, 4, 4, 4}, // "B" < "a" < "é": bytes, not letters
		{2, 2, 2, 2, 2, 6, 6, 6, 6, 6, 1, 1, 1, 1, 1}, // "a" < "a\x00" < "ab": a prefix first
		[]byte("the quick brown fox jumps over the lazy dog, twice: the quick brown fox"),
	} {
		f.Add(seed)
	}
	tuple := func(e *Entry) []string { return []string{e.Group, e.Kind, e.Namespace, e.Name, e.Version} }
	f.Fuzz(func(t *testing.T, data []byte) {
		var entries []Entry
		for ; len(data) >= 5 && len(entries) < 64; data = data[5:] {
			v := func(i int) string { return values[int(data[i])%len(values)] }
			entries = append(entries, Entry{Group: v(0), Kind: v(1), Namespace: v(2), Name: v(3), Version: v(4)})
		}
		for i := range entries {
			for j := range entries {
				a, b := &entries[i], &entries[j]
				want := slices.Compare(tuple(a), tuple(b))
				if got := compareEntries(a, b); got != want {
					t.Fatalf("compareEntries(%v, %v) = %d, want %d", tuple(a), tuple(b), got, want)
				}
				if got, want := a.ID().Compare(b.ID()), slices.Compare(tuple(a)[:4], tuple(b)[:4]); got != want {
					t.Fatalf("ResourceID.Compare(%v, %v) = %d, want %d", a.ID(), b.ID(), got, want)
				}
			}
		}
		got := slices.Clone(entries)
		sortEntries(got)
		want := slices.Clone(entries)
		slices.SortFunc(want, func(a, b Entry) int { return slices.Compare(tuple(&a), tuple(&b)) })
		if !slices.EqualFunc(got, want, func(a, b Entry) bool { return slices.Equal(tuple(&a), tuple(&b)) }) {
			t.Fatalf("sortEntries disagrees with the canonical order\n got: %v\nwant: %v", got, want)
		}
		if !isSortedEntries(got) {
			t.Fatalf("isSortedEntries refuses sortEntries' result")
		}
	})
}

// TestEncodedSize: the canonical buffer is sized once, exactly when no string needs escaping.
func TestEncodedSize(t *testing.T) {
	entries := append(benchEntries(300), Entry{Version: "v1", Kind: "K", Name: "n"},
		Entry{Version: "v1", Kind: "K", Name: "m", Labels: map[string]string{"": ""}})
	for _, e := range entries {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.encodedSize(); got != len(b) {
			t.Fatalf("encodedSize = %d, encoding/json writes %d bytes: %s", got, len(b), b)
		}
	}
	escaped := Entry{Version: "v1", Kind: "K", Name: "<&>", Labels: map[string]string{"a\n": "\u2028"}}
	if b, _ := json.Marshal(escaped); escaped.encodedSize() > len(b) {
		t.Fatalf("encodedSize %d is over the %d bytes of %s", escaped.encodedSize(), len(b), b)
	}
	inv, err := NewInventory(entries)
	if err != nil {
		t.Fatal(err)
	}
	if c := cap(inv.canonical); c < len(inv.canonical) || c > len(inv.canonical)+8192 {
		t.Fatalf("the canonical buffer holds %d bytes in %d", len(inv.canonical), c)
	}
}
