package domain

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"testing"
)

// TestSplitPacksChunksFull checks, at realistic inventory sizes and the default limit, that
// greedy splitting wastes no more than about one entry per chunk: ceil(bytes/limit) chunks or
// one more, every chunk but the last at least 99% full, none over the limit, and the chunks
// joined back give the canonical bytes.
func TestSplitPacksChunksFull(t *testing.T) {
	const limit = DefaultMaxChunkBytes
	const mib = 1 << 20
	sizes := []int{1 * mib, 5 * mib, 10 * mib, 25 * mib, 50 * mib}

	// One inventory of a little over 50 MiB; the smaller ones are its prefixes, which keeps
	// the test to a few seconds under -race.
	sample, err := NewInventory(benchEntries(2000))
	if err != nil {
		t.Fatal(err)
	}
	n := int(1.02 * float64(sizes[len(sizes)-1]) / (float64(sample.Size()) / 2000))
	full, err := NewInventory(benchEntries(n))
	if err != nil {
		t.Fatal(err)
	}
	if full.Size() < sizes[len(sizes)-1] {
		t.Fatalf("generated only %d bytes", full.Size())
	}
	checkPrefix(t, full, 1000)

	for _, size := range sizes {
		t.Run(fmt.Sprintf("%dMiB", size/mib), func(t *testing.T) {
			// The first k entries encode to starts[k] bytes, their ']' taking the place of a ','.
			k := sort.Search(full.Len()+1, func(k int) bool { return k > 0 && full.starts[k] >= size })
			inv := full.prefix(k)
			canonical := inv.canonical
			chunks, err := SplitInventory(inv, limit, 0)
			if err != nil {
				t.Fatal(err)
			}
			least := (len(canonical) + limit - 1) / limit
			t.Logf("%d entries, %d bytes, %d chunks (at least %d)", k, len(canonical), len(chunks), least)
			if len(chunks) < least || len(chunks) > least+1 {
				t.Errorf("%d chunks for %d bytes; want %d or %d", len(chunks), len(canonical), least, least+1)
			}
			// Walk the canonical bytes along the chunks: "[" + inner0 + "," + inner1 ... + "]".
			at, fullest, emptiest := 0, 0, limit
			for i, c := range chunks {
				data := c.Data()
				if c.Index() != i || c.Count() != len(chunks) {
					t.Fatalf("chunk %d says it is %d of %d", i, c.Index(), c.Count())
				}
				if len(data) > limit {
					t.Errorf("chunk %d holds %d bytes, over the limit of %d", i, len(data), limit)
				}
				if i < len(chunks)-1 {
					if len(data)*100 < limit*99 {
						t.Errorf("chunk %d holds %d bytes, under 99%% of the limit of %d", i, len(data), limit)
					}
					fullest, emptiest = max(fullest, len(data)), min(emptiest, len(data))
				}
				if len(data) < 2 || data[0] != '[' || data[len(data)-1] != ']' {
					t.Fatalf("chunk %d is not a JSON array: %.40q", i, data)
				}
				sep := byte(',')
				if i == 0 {
					sep = '['
				}
				inner := data[1 : len(data)-1]
				if at >= len(canonical) || canonical[at] != sep || !bytes.HasPrefix(canonical[at+1:], inner) {
					t.Fatalf("chunk %d does not continue the canonical encoding at byte %d", i, at)
				}
				at += 1 + len(inner)
			}
			if !bytes.Equal(canonical[at:], []byte("]")) {
				t.Errorf("the chunks joined stop at byte %d of %d", at, len(canonical))
			}
			if len(chunks) > 1 {
				t.Logf("full chunks hold %d to %d bytes (%.2f%% to %.2f%% of the limit)",
					emptiest, fullest, 100*float64(emptiest)/limit, 100*float64(fullest)/limit)
			}
		})
	}
}

// prefix is the inventory of the first n entries of inv, sharing inv's memory but for the
// encoding: a prefix of a canonical inventory is canonical, its encoding the same bytes closed
// by ']' where the ',' after entry n-1 was.
func (inv Inventory) prefix(n int) Inventory {
	end := inv.starts[n] - 1
	canonical := append(slices.Clip(inv.canonical[:end]), ']')
	sum := sha256.Sum256(canonical)
	return Inventory{
		entries:   inv.entries[:n:n],
		canonical: canonical,
		starts:    inv.starts[: n+1 : n+1],
		digest:    "sha256:" + hex.EncodeToString(sum[:]),
	}
}

// checkPrefix holds prefix to what NewInventory builds from the same entries.
func checkPrefix(t *testing.T, inv Inventory, n int) {
	t.Helper()
	entries := make([]Entry, n)
	for i := range entries {
		entries[i] = inv.entry(i)
	}
	want, err := NewInventory(entries)
	if err != nil {
		t.Fatal(err)
	}
	got := inv.prefix(n)
	if !bytes.Equal(got.canonical, want.canonical) || !slices.Equal(got.starts, want.starts) ||
		got.digest != want.digest || got.Len() != want.Len() {
		t.Fatalf("prefix(%d) differs from NewInventory of the same entries", n)
	}
}
