package domain

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
type Inventory struct {
	entries []Entry
	encoded [][]byte // compact JSON of each entry, in canonical order
	size    int      // length of the canonical encoding
	digest  string
}

// NewInventory sorts, validates and encodes entries. Duplicate identities are an error.
func NewInventory(entries []Entry) (Inventory, error) {
	// Deep copy: the encoding and digest must not drift if the caller mutates its maps later.
	sorted := cloneEntries(entries)
	slices.SortFunc(sorted, func(a, b Entry) int { return compareEntries(&a, &b) })
	inv := Inventory{entries: sorted, encoded: make([][]byte, len(sorted)), size: 2}
	for i := range sorted {
		if err := sorted[i].validate(); err != nil {
			return Inventory{}, err
		}
		if i > 0 && sorted[i-1].ID() == sorted[i].ID() {
			return Inventory{}, &DuplicateEntryError{ID: sorted[i].ID()}
		}
		enc, err := json.Marshal(&sorted[i])
		if err != nil {
			return Inventory{}, fmt.Errorf("encoding entry %s: %w", sorted[i].ID(), err)
		}
		inv.encoded[i] = enc
		inv.size += len(enc)
	}
	if len(sorted) > 1 {
		inv.size += len(sorted) - 1
	}
	sum := sha256.Sum256(inv.Canonical())
	inv.digest = "sha256:" + hex.EncodeToString(sum[:])
	return inv, nil
}

// Entries returns a deep copy of the entries in canonical order.
func (inv Inventory) Entries() []Entry { return cloneEntries(inv.entries) }

func cloneEntries(in []Entry) []Entry {
	if in == nil {
		return nil
	}
	out := make([]Entry, len(in))
	for i, e := range in {
		out[i] = e.clone()
	}
	return out
}

// Len is the number of entries.
func (inv Inventory) Len() int { return len(inv.entries) }

// Size is the length in bytes of the canonical encoding.
func (inv Inventory) Size() int { return inv.size }

// Digest is "sha256:<hex>" of the canonical encoding.
func (inv Inventory) Digest() string { return inv.digest }

// Canonical returns the compact JSON array of all entries (SPEC §3).
func (inv Inventory) Canonical() []byte {
	return joinArray(inv.encoded, inv.size)
}

// IDs returns the identities of all entries.
func (inv Inventory) IDs() map[ResourceID]Entry {
	out := make(map[ResourceID]Entry, len(inv.entries))
	for _, e := range inv.entries {
		out[e.ID()] = e
	}
	return out
}

func joinArray(parts [][]byte, size int) []byte {
	buf := make([]byte, 0, size)
	buf = append(buf, '[')
	for i, p := range parts {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, p...)
	}
	return append(buf, ']')
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
	for _, e := range entries {
		if err := e.validate(); err != nil {
			return nil, err
		}
	}
	return entries, nil
}
