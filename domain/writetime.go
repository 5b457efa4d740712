package domain

import "time"

// FieldManager is the field manager of every write this controller makes downstream. The
// history's write time is read from its managedFields entries only (design §6.3, rewritten history).
const FieldManager = "eno-tombstone-recovery"

// MarkFieldManager is the field manager of the writes that only mark a snapshot
// (AnnotationDisabledLater): they must not move FieldManager's time (design §4, disabled later).
const MarkFieldManager = "eno-tombstone-recovery-mark"

// ManagedWrite is one managedFields entry of an inventory Secret, as the write time reads it.
type ManagedWrite struct {
	Manager     string
	Subresource string
	// Time is the entry's time; zero when it carries none.
	Time time.Time
	// OwnsData: the entry's fields include the Secret's data (f:data).
	OwnsData bool
	// Unreadable: the entry's fields cannot be read; they may include the data.
	Unreadable bool
}

// DataWrittenByUs is when this controller last wrote the Secret's data: the newest time of a
// FieldManager entry owning it (an unreadable entry of ours is no write of it; another's may be).
// It is unknown when there is none (stripped, taken over), when another entry that may own the
// data is newer or has no time, or when the Secret was created after it (a restore): neither
// ever moves the time later (design §6.3, rewritten history).
func DataWrittenByUs(created time.Time, writes []ManagedWrite) (time.Time, bool) {
	var ours time.Time
	for _, w := range writes {
		if w.Manager == FieldManager && w.Subresource == "" && w.OwnsData && w.Time.After(ours) {
			ours = w.Time
		}
	}
	if ours.IsZero() || created.IsZero() || created.Truncate(time.Second).After(ours.Truncate(time.Second)) {
		return time.Time{}, false
	}
	for _, w := range writes {
		if w.Manager == FieldManager && w.Subresource == "" || !(w.OwnsData || w.Unreadable) {
			continue
		}
		if w.Time.IsZero() || w.Time.Truncate(time.Second).After(ours.Truncate(time.Second)) {
			return time.Time{}, false
		}
	}
	return ours.UTC(), true
}
