package domain

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
	inventoryParts
	// canonical is the compact JSON array of all entries. starts[i] is the offset of entry i
	// in it and starts[len(entries)] is len(canonical), so entry i is
	// canonical[starts[i]:starts[i+1]-1], without the ',' or ']' that follows it.
	canonical []byte
	starts    []int
	digest    string
}

// inventoryParts are entries in the layout Inventory keeps: identity fields in entries (their
// maps always nil), and labels and annotations in one slice for all entries, each run sorted
// by key. Entry i's labels are pairs[bounds[2i]:bounds[2i+1]] and its annotations
// pairs[bounds[2i+1]:bounds[2i+2]]. No maps means no per-entry copies or allocations.
type inventoryParts struct {
	entries []Entry
	pairs   []kv
	bounds  []int
}

func (p *inventoryParts) labels(i int) []kv { return p.pairs[p.bounds[2*i]:p.bounds[2*i+1]] }
func (p *inventoryParts) annotations(i int) []kv {
	return p.pairs[p.bounds[2*i+1]:p.bounds[2*i+2]]
}

// add appends a copy of e.
func (p *inventoryParts) add(e *Entry) {
	if len(p.bounds) == 0 {
		p.bounds = append(p.bounds, 0)
	}
	p.entries = append(p.entries, Entry{Group: e.Group, Version: e.Version, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name})
	p.pairs = appendSortedPairs(p.pairs, e.Labels)
	p.bounds = append(p.bounds, len(p.pairs))
	p.pairs = appendSortedPairs(p.pairs, e.Annotations)
	p.bounds = append(p.bounds, len(p.pairs))
}

// NewInventory sorts, validates and encodes entries. Duplicate identities are an error.
// It copies what it keeps, so the caller may change entries and their maps afterwards.
func NewInventory(entries []Entry) (Inventory, error) {
	n := len(entries)
	pairs := 0
	for i := range entries {
		pairs += len(entries[i].Labels) + len(entries[i].Annotations)
	}
	p := inventoryParts{pairs: make([]kv, 0, pairs), bounds: make([]int, 1, 2*n+1)}
	if entries != nil {
		p.entries = make([]Entry, 0, n)
	}
	if isSortedEntries(entries) {
		for i := range entries {
			p.add(&entries[i])
		}
	} else {
		for _, i := range sortedOrder(entries) {
			p.add(&entries[i])
		}
	}
	return p.build(true)
}

// sortedOrder returns the indexes of entries in compareEntries' order. Group, kind and
// namespace repeat a lot, so they are first replaced by their ranks among their distinct
// values: most comparisons then read only a compact array, not strings scattered over the heap.
// Settling rank ties with compareEntries would read those strings again and make this sort
// 1.5–2.5× slower (10k–100k entries), so the order is spelled out here once more;
// FuzzSortedOrderIsCanonical proves the two agree.
func sortedOrder(entries []Entry) []int {
	type key struct {
		group, kind, namespace uint32
		i                      int
	}
	keys := make([]key, len(entries))
	for i := range keys {
		keys[i].i = i
	}
	rank(entries, func(e *Entry) string { return e.Group }, func(i int, r uint32) { keys[i].group = r })
	rank(entries, func(e *Entry) string { return e.Kind }, func(i int, r uint32) { keys[i].kind = r })
	rank(entries, func(e *Entry) string { return e.Namespace }, func(i int, r uint32) { keys[i].namespace = r })
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(a.group, b.group); c != 0 {
			return c
		}
		if c := cmp.Compare(a.kind, b.kind); c != 0 {
			return c
		}
		if c := cmp.Compare(a.namespace, b.namespace); c != 0 {
			return c
		}
		x, y := &entries[a.i], &entries[b.i]
		if c := strings.Compare(x.Name, y.Name); c != 0 {
			return c
		}
		return strings.Compare(x.Version, y.Version)
	})
	order := make([]int, len(keys))
	for i, k := range keys {
		order[i] = k.i
	}
	return order
}

// rank calls set(i, r) with the rank r of field(&entries[i]) among the field's distinct values.
func rank(entries []Entry, field func(*Entry) string, set func(int, uint32)) {
	ids := make(map[string]uint32)
	var distinct []string
	at := make([]uint32, len(entries))
	for i := range entries {
		v := field(&entries[i])
		id, ok := ids[v]
		if !ok {
			id = uint32(len(distinct))
			ids[v] = id
			distinct = append(distinct, v)
		}
		at[i] = id
	}
	byValue := make([]uint32, len(distinct))
	for i := range byValue {
		byValue[i] = uint32(i)
	}
	slices.SortFunc(byValue, func(a, b uint32) int { return strings.Compare(distinct[a], distinct[b]) })
	rankOf := make([]uint32, len(distinct))
	for r, id := range byValue {
		rankOf[id] = uint32(r)
	}
	for i, id := range at {
		set(i, rankOf[id])
	}
}

// build validates and encodes p, sorting it first unless the caller knows it is sorted.
// Per entry in canonical order, errors come as before: missing fields, foreign annotations,
// invalid UTF-8, then a duplicate identity.
func (p inventoryParts) build(sorted bool) (Inventory, error) {
	if len(p.bounds) == 0 {
		p.bounds = []int{0}
	}
	if !sorted && !isSortedEntries(p.entries) {
		q := inventoryParts{pairs: make([]kv, 0, len(p.pairs)), bounds: make([]int, 1, len(p.bounds))}
		q.entries = make([]Entry, 0, len(p.entries))
		for _, i := range sortedOrder(p.entries) {
			q.entries = append(q.entries, p.entries[i])
			q.pairs = append(q.pairs, p.labels(i)...)
			q.bounds = append(q.bounds, len(q.pairs))
			q.pairs = append(q.pairs, p.annotations(i)...)
			q.bounds = append(q.bounds, len(q.pairs))
		}
		p = q
	}
	n := len(p.entries)
	// Size the buffer once: exact unless some string needs escaping.
	size := 2 + max(n-1, 0)
	for i := range p.entries {
		size += entryJSONSize(&p.entries[i], p.labels(i), p.annotations(i))
	}
	inv := Inventory{inventoryParts: p, starts: make([]int, n+1)}
	buf := make([]byte, 0, size)
	buf = append(buf, '[')
	for i := range p.entries {
		e := &p.entries[i]
		if err := e.validateRequired(); err != nil {
			return Inventory{}, err
		}
		for _, a := range p.annotations(i) {
			if err := e.checkAnnotationKey(a.k); err != nil {
				return Inventory{}, err
			}
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		inv.starts[i] = len(buf)
		var ok bool
		if buf, ok = appendEntryJSON(buf, e, p.labels(i), p.annotations(i)); !ok {
			return Inventory{}, e.invalidUTF8Error()
		}
		if i > 0 && p.entries[i-1].ID() == e.ID() {
			return Inventory{}, &DuplicateEntryError{ID: e.ID()}
		}
	}
	buf = append(buf, ']')
	inv.starts[n] = len(buf)
	inv.canonical = buf
	sum := sha256.Sum256(buf)
	inv.digest = "sha256:" + hex.EncodeToString(sum[:])
	return inv, nil
}

func isSortedEntries(entries []Entry) bool {
	for i := 1; i < len(entries); i++ {
		if compareEntries(&entries[i-1], &entries[i]) > 0 {
			return false
		}
	}
	return true
}

// entry returns a copy of entry i with fresh maps; a map is nil when it would be empty.
func (inv Inventory) entry(i int) Entry {
	e := inv.entries[i]
	e.Labels = pairsMap(inv.labels(i))
	e.Annotations = pairsMap(inv.annotations(i))
	return e
}

func pairsMap(pairs []kv) map[string]string {
	if len(pairs) == 0 {
		return nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		m[p.k] = p.v
	}
	return m
}

// Entries returns a deep copy of the entries in canonical order.
func (inv Inventory) Entries() []Entry {
	if inv.entries == nil {
		return nil
	}
	out := make([]Entry, len(inv.entries))
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

// IDs returns the identities of all entries, each with a deep copy of its entry.
func (inv Inventory) IDs() map[ResourceID]Entry {
	out := make(map[ResourceID]Entry, len(inv.entries))
	for i, e := range inv.entries {
		out[e.ID()] = inv.entry(i)
	}
	return out
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
