package domain

import (
	"fmt"
	"strings"
	"time"
)

// ObjectState is what a read of a downstream object found (design §6.3).
type ObjectState struct{ name string }

var (
	// ObjectPresent: the object exists; its creationTimestamp was read.
	ObjectPresent = ObjectState{"Present"}
	// ObjectAbsent: the API server answered NotFound for the object.
	ObjectAbsent = ObjectState{"NotFound"}
	// ObjectUnreadable: the object could not be read (Forbidden, an unknown kind).
	ObjectUnreadable = ObjectState{"Unreadable"}
	// ObjectProducedElsewhere: another Composition's slice applies it now (ProducedElsewhere).
	ObjectProducedElsewhere = ObjectState{"ProducedElsewhere"}
	// ObjectReadFailed: the read failed otherwise (a server error, a timeout): the object is
	// kept as unreadable when another read of the plan was answered (ReadOutage).
	ObjectReadFailed = ObjectState{"ReadFailed"}
)

func (s ObjectState) String() string { return s.name }

// Observation is one downstream object as read just before publishing its tombstone.
type Observation struct {
	State ObjectState
	// Created is the object's creationTimestamp (downstream clock, whole seconds).
	Created time.Time
	// Writes are the managedFields entries of the object's main resource (subresources aside).
	Writes []ObjectWrite
	// Bare: the object holds no field any manager could own (IsBare); read only without Writes.
	Bare bool
	// UID is the object's UID.
	UID string
	// Detail says why an object is unreadable.
	Detail string
}

// DropReason says why a tombstone is not published.
type DropReason struct{ name string }

var (
	// DropNotFound: the object is gone; there is nothing to delete.
	DropNotFound = DropReason{"NotFound"}
	// DropNewer: created after the history was written, it is not the object recorded.
	DropNewer = DropReason{"CreatedAfterHistory"}
	// DropUnreadable: the object could not be read; when in doubt, keep.
	DropUnreadable = DropReason{"Unreadable"}
	// DropUnknownWriteTime: the history's write time is unknown, so no object can be told apart
	// from one re-created since; every tombstone is kept back.
	DropUnknownWriteTime = DropReason{"UnknownWriteTime"}
	// DropDisabled: Entry.Disabled. Eno would skip the tombstone anyway, or might act on an
	// object another Composition now owns; no read is needed.
	DropDisabled = DropReason{"Disabled"}
	// DropChanged: the object was written after the history was (another manager took it
	// over, an operator edited it): it may no longer be the orphan the history recorded.
	DropChanged = DropReason{"ChangedAfterHistory"}
	// DropManagedElsewhere: a manager not Eno's (a GitOps tool, a person) manages it: theirs too,
	// whenever they wrote it; an identical apply leaves no time to compare (design §6.3).
	DropManagedElsewhere = DropReason{"ManagedElsewhere"}
	// DropProducedElsewhere: another Composition's synthesis produces it. Eno applies all with one
	// field manager, an in-sync object gets no write: no managedFields time shows the takeover.
	DropProducedElsewhere = DropReason{"ProducedElsewhere"}
	// DropCascading: an orphan whose deletion deletes other objects (Cascades): never handed to
	// Eno, approved or not; an operator deletes it after looking (design §6.3, R1).
	DropCascading = DropReason{"CascadingKind"}
	// DropNoReconciler: no eno-reconciler in use loads the tombstone (ResourceFilter): Eno would
	// carry it into every later synthesis and the Composition would never be Ready again.
	DropNoReconciler = DropReason{"NoReconcilerTakesIt"}
)

func (r DropReason) String() string { return r.name }

// verifiable reports whether the reason still proves something about the object: NotFound and
// newer objects are safe to leave, while the others keep an object that may be an orphan.
func (r DropReason) verifiable() bool {
	return r == DropNotFound || r == DropNewer || r == DropDisabled || r == DropProducedElsewhere
}

// DroppedTombstone is a tombstone recovery does not publish, and why.
type DroppedTombstone struct {
	Tombstone Tombstone
	Reason    DropReason
	Detail    string
}

// splitOff drops, as reason, the tombstones for which detail says why, keeping the order given.
func splitOff(tombstones []Tombstone, reason DropReason, detail func(Tombstone) string) (rest []Tombstone, dropped []DroppedTombstone) {
	for _, t := range tombstones {
		if why := detail(t); why != "" {
			dropped = append(dropped, DroppedTombstone{Tombstone: t, Reason: reason, Detail: why})
		} else {
			rest = append(rest, t)
		}
	}
	return rest, dropped
}

// SplitDisabled drops, before any downstream read, what Eno could skip (Entry.Disabled).
func SplitDisabled(tombstones []Tombstone) (rest []Tombstone, disabled []DroppedTombstone) {
	return splitOff(tombstones, DropDisabled, func(t Tombstone) string {
		switch {
		case !t.Entry.Disabled():
			return ""
		case t.Entry.Annotations[AnnotationDisableReconciliation] == "true":
			return "recorded with " + AnnotationDisableReconciliation + "=true"
		}
		return "recorded with " + AnnotationOverrides + " that can disable reconciliation"
	})
}

// VerifyTombstones applies the checks at the moment of deletion (design §6.3) to a plan's
// tombstones, given each object's read, Eno's field managers and the history's write time
// (known false when unknown): the tombstones to publish and those dropped, in the order given.
// An object not read is unreadable. Times are the downstream's, in whole seconds: one created
// in the very second the history was written counts as older.
func VerifyTombstones(tombstones []Tombstone, observed map[ResourceID]Observation, eno EnoManagers, writeTime time.Time, known bool) (keep []Tombstone, dropped []DroppedTombstone) {
	for _, t := range tombstones {
		o, ok := observed[t.Entry.ID()]
		d := DroppedTombstone{Tombstone: t, Reason: DropUnreadable, Detail: o.Detail}
		switch {
		case !known:
			d.Reason, d.Detail = DropUnknownWriteTime, ""
		case !ok:
			d.Detail = "not read"
		case o.State == ObjectAbsent:
			d.Reason, d.Detail = DropNotFound, ""
		case o.State == ObjectProducedElsewhere:
			d.Reason = DropProducedElsewhere
		case o.State != ObjectPresent: // unreadable, as its detail says
		case o.Created.IsZero():
			// Some aggregated API servers report no creationTimestamp: such an object cannot be
			// told apart from one re-created since the history was written.
			d.Detail = "it reports no creationTimestamp"
		case o.Created.Truncate(time.Second).After(writeTime.Truncate(time.Second)):
			d.Reason, d.Detail = DropNewer, fmt.Sprintf("created %s, history written %s", o.Created.UTC().Format(time.RFC3339), writeTime.UTC().Format(time.RFC3339))
		case o.UID == "" || !celLiteral().MatchString(o.UID):
			d.Detail = fmt.Sprintf("its UID %q cannot be checked by its precondition", o.UID)
		default:
			var owned bool
			if d.Reason, d.Detail, owned = ownership(o, eno, writeTime); owned {
				t.UID = o.UID
				keep = append(keep, t)
				continue
			}
		}
		dropped = append(dropped, d)
	}
	return keep, dropped
}

// DroppedSummary counts the drops per reason, naming the first of each in canonical order, e.g.
// "dropped 3: 2 NotFound (first ConfigMap/ns/a), 1 Unreadable (first Role/ns/r: forbidden)".
func DroppedSummary(dropped []DroppedTombstone) string {
	if len(dropped) == 0 {
		return ""
	}
	var reasons []DropReason
	count := map[DropReason]int{}
	first := map[DropReason]DroppedTombstone{}
	for _, d := range dropped {
		if count[d.Reason] == 0 {
			reasons = append(reasons, d.Reason)
			first[d.Reason] = d
		} else if prev := first[d.Reason]; compareEntries(&d.Tombstone.Entry, &prev.Tombstone.Entry) < 0 {
			first[d.Reason] = d
		}
		count[d.Reason]++
	}
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		f := first[r]
		detail := f.Tombstone.Entry.ID().String()
		if f.Detail != "" {
			detail += ": " + f.Detail
		}
		parts[i] = fmt.Sprintf("%d %s (first %s)", count[r], r, detail)
	}
	return fmt.Sprintf("dropped %d: %s", len(dropped), strings.Join(parts, ", "))
}
