package domain

import "fmt"

// AnnotationHistoryWritten, on a recovery slice, is its history's write time (RFC 3339), for
// readers; each tombstone's precondition carries the time Eno checks (design §6.2).
const AnnotationHistoryWritten = "eno.azure.io/tombstone-recovery-history-written"

// ParseTombstone reads back a recovery slice's tombstone: its entry, and whether it was withdrawn
// (disabled with no override that could enable it, as a self-checking tombstone's may).
func ParseTombstone(r SliceResource) (Entry, bool, error) {
	t, withdrawn, err := readTombstone(r)
	return t.Entry, withdrawn, err
}

// readTombstone is ParseTombstone with the UID its precondition names, if it has one.
func readTombstone(r SliceResource) (Tombstone, bool, error) {
	if !r.Deleted {
		return Tombstone{}, false, fmt.Errorf("resource is not a tombstone")
	}
	m, err := readManifest([]byte(r.Manifest))
	if err != nil {
		return Tombstone{}, false, err
	}
	group, version := splitAPIVersion(m.APIVersion)
	e := Entry{Group: group, Version: version, Kind: m.Kind, Namespace: m.Namespace, Name: m.Name,
		Labels: m.Labels, Annotations: m.Annotations}
	if err := e.validateRequired(); err != nil {
		return Tombstone{}, false, err
	}
	if uid, _, ok := readSelfCheck(e.Annotations); ok {
		// The recorded entry, as the tombstone was built from it (its overrides were dropped).
		delete(e.Annotations, AnnotationDisableReconciliation)
		delete(e.Annotations, AnnotationOverrides)
		if len(e.Annotations) == 0 {
			e.Annotations = nil
		}
		return Tombstone{Entry: e, UID: uid}, false, nil
	}
	_, overridden := e.Annotations[AnnotationOverrides]
	return Tombstone{Entry: e}, e.Annotations[AnnotationDisableReconciliation] == "true" && !overridden, nil
}

// PendingTombstones lists a recovery slice's tombstones not yet withdrawn, in slice order.
func PendingTombstones(s ResourceSlice) ([]Tombstone, error) {
	var out []Tombstone
	for i, r := range s.Resources {
		t, withdrawn, err := readTombstone(r)
		if err != nil {
			return nil, fmt.Errorf("resource slice %s, resource %d: %w", s.Name, i, err)
		}
		if !withdrawn {
			out = append(out, t)
		}
	}
	return out, nil
}
