package domain

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// The hand-written encoder must agree with encoding/json.Marshal byte for byte (design §3).

func marshalEntry(t testing.TB, e Entry) string {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func encodeEntry(t testing.TB, e Entry) string {
	t.Helper()
	s, _ := encodeEntryUTF8(t, e)
	return s
}

// encodeEntryUTF8 also reports whether the encoder saw only valid UTF-8, and checks the
// size estimate against the result.
func encodeEntryUTF8(t testing.TB, e Entry) (string, bool) {
	t.Helper()
	labels := appendSortedPairs(nil, e.Labels)
	annotations := appendSortedPairs(nil, e.Annotations)
	out, valid := appendEntryJSON(nil, &e, labels, annotations)
	size := entryJSONSize(&e, labels, annotations)
	if plain := !strings.ContainsFunc(string(out[1:len(out)-1]), func(r rune) bool { return r == '\\' }); plain && size != len(out) || size > len(out) {
		t.Fatalf("size estimate %d for %d bytes %q", size, len(out), out)
	}
	return string(out), valid
}

func TestAppendEntryMatchesMarshal(t *testing.T) {
	var allBytes, allRunes strings.Builder
	for b := range 256 {
		allBytes.WriteByte(byte(b))
	}
	for r := rune(0); r < 0x3000; r++ {
		allRunes.WriteRune(r)
	}
	tests := []struct {
		name string
		e    Entry
	}{
		{"zero entry", Entry{}},
		{"only name", Entry{Name: "n"}},
		{"all fields", Entry{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "team-a", Name: "web",
			Labels:      map[string]string{"app": "web", "tier": "frontend"},
			Annotations: map[string]string{AnnotationDeletionGroup: "-1", AnnotationReadinessGroup: "2"}}},
		{"empty maps are omitted", Entry{Version: "v1", Kind: "K", Name: "n", Labels: map[string]string{}, Annotations: map[string]string{}}},
		{"empty keys and values", Entry{Version: "v1", Kind: "K", Name: "n", Labels: map[string]string{"": "", "a": ""}}},
		{"html", Entry{Version: "v1", Kind: "K", Name: "<a href='x'>&amp;</a>", Labels: map[string]string{"<k>": "&", "&": "<>"}}},
		{"line and paragraph separators", Entry{Version: "v1", Kind: "K", Name: "a\u2028b\u2029c\u2027\u202a"}},
		{"control characters", Entry{Version: "v1", Kind: "K", Name: "\x00\x01\b\t\n\v\f\r\x1b\x1f\x7f"}},
		{"quotes and backslashes", Entry{Version: "v1", Kind: "K", Name: `"\"\\/'`}},
		{"invalid UTF-8", Entry{Version: "v1", Kind: "K", Name: "a\xffb\xc3\xe2\x82\xed\xa0\x80\xc0\x80\xf4\x90\x80\x80\x80z",
			Labels: map[string]string{"\xfe": "\xc3("}}},
		{"valid non-ASCII", Entry{Version: "v1", Kind: "K", Name: "caf\u00e9-\u6f22\u5b57-\U0001f600"}},
		{"every byte", Entry{Version: "v1", Kind: "K", Name: allBytes.String()}},
		{"every rune below U+3000", Entry{Version: "v1", Kind: "K", Name: allRunes.String()}},
		{"keys sort by raw bytes", Entry{Version: "v1", Kind: "K", Name: "n", Labels: map[string]string{
			"b": "1", "a": "2", "B": "3", "<": "4", "\u00e9": "5", "\xff": "6", "a\x00": "7", "": "8", "\u2028": "9"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := encodeEntry(t, tt.e), marshalEntry(t, tt.e); got != want {
				t.Fatalf("encoder and json.Marshal disagree\n got: %q\nwant: %q", got, want)
			}
		})
	}
}

func TestInventoryCanonicalMatchesMarshal(t *testing.T) {
	for _, entries := range [][]Entry{nil, {}, benchEntries(3000)} {
		inv, err := NewInventory(entries)
		if err != nil {
			t.Fatal(err)
		}
		sorted := slices.Clone(entries)
		slices.SortFunc(sorted, func(a, b Entry) int { return compareEntries(&a, &b) })
		if sorted == nil {
			sorted = []Entry{} // json.Marshal spells a nil slice "null"; the inventory is "[]"
		}
		want, err := json.Marshal(sorted)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(inv.Canonical(), want) {
			t.Fatalf("canonical encoding of %d entries differs from json.Marshal", len(entries))
		}
		if inv.Size() != len(want) {
			t.Fatalf("Size() = %d, want %d", inv.Size(), len(want))
		}
	}
}

// FuzzAppendEntryMatchesMarshal feeds arbitrary strings, including invalid UTF-8, to every
// field and map key.
func FuzzAppendEntryMatchesMarshal(f *testing.F) {
	f.Add("apps", "v1", "Deployment", "team-a", "web", "app", "web", "tier", "<&>", "-1")
	f.Add("", "v1", "K", "", "\u2028\u2029", "\xff", "\xc3", "", "\x00\x1f\x7f", "")
	f.Add("\"", "\\", "\b\f\n\r\t", "\u00e9", "\U0001f600", "a", "b", "a", "c", "\xed\xa0\x80")
	f.Fuzz(func(t *testing.T, group, version, kind, namespace, name, k1, v1, k2, v2, ann string) {
		e := Entry{Group: group, Version: version, Kind: kind, Namespace: namespace, Name: name}
		if k1 != "" || v1 != "" {
			e.Labels = map[string]string{k1: v1, k2: v2}
		}
		if ann != "" {
			e.Annotations = map[string]string{AnnotationDeletionGroup: ann, AnnotationReadinessGroup: v2}
		}
		got, valid := encodeEntryUTF8(t, e)
		if want := marshalEntry(t, e); got != want {
			t.Fatalf("encoder and json.Marshal disagree\n got: %q\nwant: %q", got, want)
		}
		if want := entryValidUTF8(e); valid != want {
			t.Fatalf("encoder says valid UTF-8 = %v, want %v", valid, want)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("encoding is not valid UTF-8: %q", got)
		}
	})
}

func entryValidUTF8(e Entry) bool {
	all := []string{e.Group, e.Version, e.Kind, e.Namespace, e.Name}
	for k, v := range e.Labels {
		all = append(all, k, v)
	}
	for k, v := range e.Annotations {
		all = append(all, k, v)
	}
	for _, s := range all {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// parseCanonical is a shortcut past encoding/json for the form this package writes. Whatever
// it accepts must decode to the same entries with encoding/json; the rest falls back.

// parseAccepted are in the strict form; parseRefused are not (though some decode).
var parseAccepted = []string{
	`[]`,
	`[{"version":"v1","kind":"K","name":"n"}]`,
	`[{"version":"v1","kind":"K","name":"n"},{"version":"v1","kind":"K","name":"m"}]`,
	`[{"version":"v1","kind":"K","name":"n","labels":{"a":"1","b":""}}]`,
	`[{"version":"v1","kind":"K","name":"n","labels":{"":"1"}}]`,
	`[{"version":"v1","kind":"K","name":"n","annotations":{"eno.azure.io/deletion-group":"-1"}}]`,
	`[{"version":"v1","kind":"K","name":"n","annotations":{"x":"1"}}]`, // parses; validation refuses it
	`[{"version":"v1","kind":"K","namespace":"ns","name":"n","labels":{"a":"1"},"annotations":{"eno.azure.io/readiness-group":"2"}}]`,
}

var parseRefused = []string{
	` []`, `[] `, `[ ]`, `null`, `{}`, `[{}]`, `[null]`, ``, `[`, `[{"version":"v1","kind":"K","name":"n"}`,
	`[{"version":"v1","kind":"K","name":"n"}]]`,
	`[{"version":"v1","kind":"K","name":"n"},]`,
	`[{"version":"v1","kind":"K","name":"n"} ]`,
	`[{"kind":"K","version":"v1","name":"n"}]`,
	`[{"version":"v1","version":"v2","kind":"K","name":"n"}]`,
	`[{"VERSION":"v1","kind":"K","name":"n"}]`,
	`[{"version":"v1","kind":"K","name":"n","extra":"x"}]`,
	`[{"group":"","version":"v1","kind":"K","name":"n"}]`,
	`[{"version":"v1","kind":"K","name":"n","labels":{}}]`,
	`[{"version":"v1","kind":"K","name":"n","labels":null}]`,
	`[{"version":"v1","kind":"K","name":"n","labels":{"b":"1","a":"2"}}]`,
	`[{"version":"v1","kind":"K","name":"n","labels":{"a":"1","a":"2"}}]`,
	`[{"version":"v1","kind":"K","name":"\u003c"}]`,
	`[{"version":"v1","kind":"K","name":"<"}]`,
	`[{"version":"v1","kind":"K","name":"caf` + "\u00e9" + `"}]`,
	"[{\"version\":\"v1\",\"kind\":\"K\",\"name\":\"\xff\"}]",
	"[{\"version\":\"v1\",\"kind\":\"K\",\"name\":\"a\tb\"}]",
	`[{"version":"v1","kind":"K","name":"a\"b"}]`,
	`[{"version":"v1","kind":"K","name":"n","annotations":{"eno.azure.io/deletion-group":"1"},"labels":{"a":"1"}}]`,
	`[{"version":"v1","kind":"K","name":1}]`,
	`[{"version":"v1","kind":"K","name":"n"}{"version":"v1","kind":"K","name":"m"}]`,
}

func FuzzParseCanonicalMatchesDecode(f *testing.F) {
	for _, s := range append(parseAccepted, parseRefused...) {
		f.Add([]byte(s))
	}
	inv, err := NewInventory(benchEntries(3))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(inv.Canonical())
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParseCanonical(t, data)
	})
}

func checkParseCanonical(t *testing.T, data []byte) bool {
	t.Helper()
	var fast inventoryParts
	if !fast.parseCanonical(data) {
		if len(fast.entries) != 0 || len(fast.pairs) != 0 || len(fast.bounds) != 0 {
			t.Fatalf("rejected input left %d entries, %d pairs, %d bounds behind", len(fast.entries), len(fast.pairs), len(fast.bounds))
		}
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var entries []Entry
	if err := dec.Decode(&entries); err != nil {
		t.Fatalf("parseCanonical accepted %q, encoding/json refuses it: %v", data, err)
	}
	if dec.InputOffset() != int64(len(data)) || entries == nil {
		t.Fatalf("parseCanonical accepted %q, encoding/json reads it differently", data)
	}
	slow := inventoryParts{bounds: []int{0}}
	for i := range entries {
		slow.add(&entries[i])
	}
	if len(fast.entries) != len(slow.entries) || !slices.Equal(fast.pairs, slow.pairs) || !slices.Equal(fast.bounds, slow.bounds) {
		t.Fatalf("parseCanonical and encoding/json disagree on %q:\n fast %+v\n slow %+v", data, fast, slow)
	}
	for i := range fast.entries {
		a, b := fast.entries[i], slow.entries[i]
		if a.ID() != b.ID() || a.Version != b.Version || a.Labels != nil || a.Annotations != nil {
			t.Fatalf("entry %d: parseCanonical %+v, encoding/json %+v", i, fast.entries[i], slow.entries[i])
		}
	}
	return true
}

func TestParseCanonical(t *testing.T) {
	inv, err := NewInventory(benchEntries(500))
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := SplitInventory(inv, 20_000, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		if !checkParseCanonical(t, c.Data()) {
			t.Fatalf("parseCanonical refused a chunk this package wrote")
		}
	}
	for _, s := range parseAccepted {
		if !checkParseCanonical(t, []byte(s)) {
			t.Errorf("parseCanonical refused %s", s)
		}
	}
	for _, s := range parseRefused {
		if checkParseCanonical(t, []byte(s)) {
			t.Errorf("parseCanonical accepted %s", s)
		}
	}
}

// The canonical order of design §3 is (group, kind, namespace, name, version), compared as byte
// strings. compareEntries (and ResourceID.Compare for identities) define it; sortedOrder spells
// it out again over ranks for speed. FuzzSortedOrderIsCanonical holds all three to the design's
// tuple on entries whose fields are drawn from values that tie, prefix one another and differ
// only in case or in bytes above ASCII.
func FuzzSortedOrderIsCanonical(f *testing.F) {
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
		order := sortedOrder(entries)
		got := make([]Entry, 0, len(order))
		for _, i := range order {
			got = append(got, entries[i])
		}
		want := slices.Clone(entries)
		slices.SortFunc(want, func(a, b Entry) int { return slices.Compare(tuple(&a), tuple(&b)) })
		if !slices.EqualFunc(got, want, func(a, b Entry) bool { return slices.Equal(tuple(&a), tuple(&b)) }) {
			t.Fatalf("sortedOrder disagrees with the canonical order\n got: %v\nwant: %v", got, want)
		}
		slices.Sort(order)
		for i, x := range order {
			if x != i {
				t.Fatalf("sortedOrder is not a permutation of the indexes: %v", order)
			}
		}
		if !isSortedEntries(got) {
			t.Fatalf("isSortedEntries refuses sortedOrder's result")
		}
	})
}
