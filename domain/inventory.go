package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// DuplicateEntryError reports two entries of one identity: a malformed synthesis.
type DuplicateEntryError struct {
	ID ResourceID
}

func (e *DuplicateEntryError) Error() string {
	return fmt.Sprintf("resource %s appears more than once", e.ID)
}

// Inventory is a canonical, validated set of entries with its encoding and digest.
// It shares nothing mutable with its callers: accessors hand out copies.
type Inventory struct {
	// entries are in canonical order; their maps are the inventory's own, nil when empty.
	entries []Entry
	// canonical is the compact JSON array of all entries, as encoding/json writes it (design §3).
	// starts[i] is the offset of entry i in it and starts[len(entries)] is len(canonical), so
	// entry i is canonical[starts[i]:starts[i+1]-1], without the ',' or ']' that follows it.
	canonical []byte
	starts    []int
	digest    string
}

// NewInventory sorts, validates and encodes entries. Duplicate identities are an error.
// It copies what it keeps, so the caller may change entries and their maps afterwards.
func NewInventory(entries []Entry) (Inventory, error) {
	own := slices.Clone(entries)
	for i, e := range own {
		own[i].Labels, own[i].Annotations = maps.Clone(e.Labels), maps.Clone(e.Annotations)
	}
	return newInventory(own)
}

// newInventory is NewInventory of entries it may keep and reorder. Errors come per entry in the
// order given (fields, annotations, UTF-8), then a duplicate identity in canonical order.
func newInventory(entries []Entry) (Inventory, error) {
	for i := range entries {
		e := &entries[i]
		if err := e.validateFields(); err != nil {
			return Inventory{}, err
		}
		// encoding/json writes invalid UTF-8 as \ufffd, which decodes to other bytes: the
		// digest would never verify on read.
		if !e.validUTF8() {
			return Inventory{}, fmt.Errorf("entry %q has a string that is not valid UTF-8", e.ID().String())
		}
		if len(e.Labels) == 0 {
			e.Labels = nil
		}
		if len(e.Annotations) == 0 {
			e.Annotations = nil
		}
	}
	sortEntries(entries)
	n := len(entries)
	inv := Inventory{entries: entries, starts: make([]int, n+1)}
	// One buffer of the right size: the encoding is the inventory's largest part, and growing
	// it by doubling would take about twice as much memory while it is built.
	size := 2 + max(n-1, 0)
	for i := range entries {
		size += entries[i].encodedSize()
	}
	var buf bytes.Buffer
	buf.Grow(size)
	enc := json.NewEncoder(&buf)
	buf.WriteByte('[')
	for i := range entries {
		e := &entries[i]
		if i > 0 && entries[i-1].ID() == e.ID() {
			return Inventory{}, &DuplicateEntryError{ID: e.ID()}
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		inv.starts[i] = buf.Len()
		if err := enc.Encode(e); err != nil {
			return Inventory{}, fmt.Errorf("encoding entry %s: %w", e.ID(), err)
		}
		buf.Truncate(buf.Len() - 1) // the newline Encode ends with
	}
	buf.WriteByte(']')
	inv.starts[n] = buf.Len()
	inv.canonical = buf.Bytes()
	inv.digest = sha256Digest(inv.canonical)
	return inv, nil
}

// encodedSize is the length of e's encoding when no string needs escaping, else a lower bound:
// '{', then per field `"name":"value"` or `"name":{"k":"v",...}` and the ',' or '}' after it.
func (e *Entry) encodedSize() int {
	n := 1
	for _, f := range [...][2]string{{"group", e.Group}, {"version", e.Version}, {"kind", e.Kind}, {"namespace", e.Namespace}, {"name", e.Name}} {
		if f[1] != "" {
			n += len(f[0]) + len(f[1]) + 6
		}
	}
	for _, f := range [...]struct {
		name string
		m    map[string]string
	}{{"labels", e.Labels}, {"annotations", e.Annotations}} {
		if len(f.m) > 0 {
			n += len(f.name) + 5
			for k, v := range f.m {
				n += len(k) + len(v) + 6
			}
		}
	}
	return n
}

// sortEntries puts entries in canonical order. Entries that tie are duplicates, an error.
func sortEntries(entries []Entry) {
	if !isSortedEntries(entries) {
		slices.SortFunc(entries, func(a, b Entry) int { return compareEntries(&a, &b) })
	}
}

func isSortedEntries(entries []Entry) bool {
	return slices.IsSortedFunc(entries, func(a, b Entry) int { return compareEntries(&a, &b) })
}

// entry returns a copy of entry i with fresh maps.
func (inv Inventory) entry(i int) Entry {
	e := inv.entries[i]
	e.Labels, e.Annotations = maps.Clone(e.Labels), maps.Clone(e.Annotations)
	return e
}

// Entries returns a deep copy of the entries in canonical order.
func (inv Inventory) Entries() []Entry {
	out := slices.Clone(inv.entries)
	for i := range out {
		out[i] = inv.entry(i)
	}
	return out
}

// Len is the number of entries.
func (inv Inventory) Len() int { return len(inv.entries) }

// Size is the length in bytes of the canonical encoding.
func (inv Inventory) Size() int { return len(inv.canonical) }

// Digest is "sha256:<hex>" of the canonical encoding.
func (inv Inventory) Digest() string { return inv.digest }

// Canonical returns the compact JSON array of all entries (design §3).
func (inv Inventory) Canonical() []byte {
	if inv.canonical == nil {
		return []byte("[]")
	}
	// A copy: callers must not be able to change what SplitInventory and Digest see.
	return bytes.Clone(inv.canonical)
}

// DecodeEntries parses one chunk's data: a JSON array of entries in format "1".
func DecodeEntries(data []byte) ([]Entry, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var entries []Entry
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("decoding inventory chunk: %w", err)
	}
	// dec.More() misses a stray ']' or '}', so check that only whitespace follows.
	if len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0 {
		return nil, fmt.Errorf("decoding inventory chunk: trailing data after the array")
	}
	if entries == nil {
		return nil, fmt.Errorf("decoding inventory chunk: not a JSON array")
	}
	// encoding/json decodes only to valid UTF-8 (invalid input becomes U+FFFD), so the
	// UTF-8 pass of validate would find nothing.
	for _, e := range entries {
		if err := e.validateFields(); err != nil {
			return nil, err
		}
	}
	return entries, nil
}
