package domain

import (
	"encoding/json"
	"maps"
	"slices"
)

// AnnotationDisabledLater marks on a snapshot's Secret the entries a later synthesis disabled
// while it could not be recorded: recovery treats them as Disabled (design §4, disabled later).
const AnnotationDisabledLater = "eno.azure.io/inventory-disabled-later"

// DisabledLater is the value of AnnotationDisabledLater: the snapshot it marks (its source
// synthesis UUID; a mark of another snapshot is stale and ignored) and the identities.
type DisabledLater struct {
	Snapshot string            `json:"snapshot"`
	IDs      []disabledLaterID `json:"ids"`
}

type disabledLaterID struct {
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// NewlyDisabled lists, in canonical order, the entries snap records enabled, unmarked, that a
// later synthesis, newer, disables: what a mark must add; none means no write (disabled later).
func NewlyDisabled(snap Snapshot, newer SynthesisContents) []ResourceID {
	marked, all := snap.disabledLater()
	if all {
		return nil
	}
	disabledNow := map[ResourceID]bool{}
	for _, e := range newer.Inventory().Entries() {
		if e.Disabled() {
			disabledNow[e.ID()] = true
		}
	}
	// A tombstone keeps Eno's old manifest, so one disabled there is skipped and its object kept.
	for id := range newer.keptTombstones {
		disabledNow[id] = true
	}
	var out []ResourceID
	for _, e := range snap.inventory.Entries() {
		if id := e.ID(); disabledNow[id] && !e.Disabled() && !marked[id] {
			out = append(out, id)
		}
	}
	return out
}

// DisablesAny reports whether the synthesis disables anything a snapshot could record enabled:
// an entry, or a tombstone Eno skips for good. Without it, no snapshot needs reading (disabled later).
func (s SynthesisContents) DisablesAny() bool {
	return len(s.keptTombstones) > 0 || slices.ContainsFunc(s.inventory.Entries(), Entry.Disabled)
}

// MarkDisabledLater returns s, a Secret of snap, with ids added to its mark of snap.
func MarkDisabledLater(s ChunkSecret, snap Snapshot, ids []ResourceID) ChunkSecret {
	out := s.Clone()
	set := map[ResourceID]bool{}
	if m, ok := parseDisabledLater(s.Annotations[AnnotationDisabledLater]); ok && m.Snapshot == snap.meta.SynthesisUUID {
		for _, id := range m.IDs {
			set[ResourceID(id)] = true
		}
	}
	for _, id := range ids {
		set[id] = true
	}
	m := DisabledLater{Snapshot: snap.meta.SynthesisUUID}
	for _, id := range slices.SortedFunc(maps.Keys(set), ResourceID.Compare) {
		m.IDs = append(m.IDs, disabledLaterID(id))
	}
	raw, _ := json.Marshal(m) // strings only: cannot fail
	out.Annotations = merged(out.Annotations, map[string]string{AnnotationDisabledLater: string(raw)})
	return out
}

func parseDisabledLater(raw string) (DisabledLater, bool) {
	var m DisabledLater
	if err := json.Unmarshal([]byte(raw), &m); err != nil || m.Snapshot == "" {
		return DisabledLater{}, false
	}
	return m, true
}

// disabledLater is the union of the marks of snap on its Secrets. A mark that cannot be read
// may name anything: all is true, and no entry is tombstoned.
func (s Snapshot) disabledLater() (ids map[ResourceID]bool, all bool) {
	ids = map[ResourceID]bool{}
	for _, c := range s.chunks {
		raw, ok := c.Annotations[AnnotationDisabledLater]
		if !ok {
			continue
		}
		m, ok := parseDisabledLater(raw)
		switch {
		case !ok:
			return nil, true
		case m.Snapshot != s.meta.SynthesisUUID:
			continue // a mark of an earlier snapshot at this Secret's name
		}
		for _, id := range m.IDs {
			ids[ResourceID(id)] = true
		}
	}
	return ids, false
}

// SplitDisabledLater drops, as Disabled, the tombstones whose entries a later synthesis of the
// recorded Composition disabled before it could be recorded, as snap's marks say (disabled later).
func SplitDisabledLater(snap Snapshot, tombstones []Tombstone) (rest []Tombstone, disabled []DroppedTombstone) {
	marked, all := snap.disabledLater()
	return splitOff(tombstones, DropDisabled, func(t Tombstone) string {
		if all || marked[t.Entry.ID()] {
			return "disabled by a later synthesis that was never recorded (" + AnnotationDisabledLater + ")"
		}
		return ""
	})
}
