package domain

import (
	"fmt"
	"slices"
)

// CarriedRecoverySlices names the recovery slices of c's previous synthesis, a hand-off Eno
// carried into the current one: once Ready, their objects should be gone (design §6.2).
func CarriedRecoverySlices(c Composition) []string {
	prev := c.PreviousSynthesis
	if prev == nil || prev.UUID == "" {
		return nil
	}
	return recoverySlicesIn(c.Name, prev.UUID, prev.Slices)
}

// CarriedTombstones reads the tombstones Eno may still act on (PendingTombstones) of a carried
// recovery slice, which must be this incarnation's hand-off of the previous synthesis.
func CarriedTombstones(c Composition, s ResourceSlice) ([]Tombstone, error) {
	prev := c.PreviousSynthesis
	switch {
	case prev == nil:
		return nil, fmt.Errorf("composition %s has no previous synthesis", c.Ref())
	case s.ControllerUID != c.UID:
		return nil, fmt.Errorf("resource slice %s is controlled by %q, not by this composition (UID %s)", s.Name, s.ControllerUID, c.UID)
	case s.SynthesisUUID != prev.UUID:
		return nil, fmt.Errorf("resource slice %s holds synthesis %q, not the previous synthesis %q", s.Name, s.SynthesisUUID, prev.UUID)
	}
	return PendingTombstones(s)
}

// RemainingOrphans lists the tombstones whose object a read found still present, in canonical
// order: Eno's carrying synthesis is Ready, yet these were not deleted.
func RemainingOrphans(tombstones []Tombstone, observed map[ResourceID]Observation) []Tombstone {
	var out []Tombstone
	for _, t := range tombstones {
		if o, ok := observed[t.Entry.ID()]; ok && o.State == ObjectPresent {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b Tombstone) int { return compareEntries(&a.Entry, &b.Entry) })
	return out
}
