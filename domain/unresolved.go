package domain

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Unresolved is an object a recovery kept for a person: listed in every later snapshot until it
// is gone or replaced. A report only: no plan reads it (design §3, §6.3).
type Unresolved struct {
	Group     string    `json:"group,omitempty"`
	Version   string    `json:"version,omitempty"`
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
	UID       string    `json:"uid,omitempty"`
	Reason    string    `json:"reason"`
	Detail    string    `json:"detail,omitempty"`
	Since     time.Time `json:"since"`
	// SourceSynthesisUUID is the synthesis whose recovery kept it.
	SourceSynthesisUUID string `json:"sourceSynthesisUUID"`
}

// Entry is the identity to read the object by.
func (u Unresolved) Entry() Entry {
	return Entry{Group: u.Group, Version: u.Version, Kind: u.Kind, Namespace: u.Namespace, Name: u.Name}
}

// NewUnresolved is t's object, kept for reason since the recovery of synthesis source.
func NewUnresolved(t Tombstone, reason, detail, source string, since time.Time) Unresolved {
	e := t.Entry
	return Unresolved{Group: e.Group, Version: e.Version, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name,
		UID: t.UID, Reason: reason, Detail: detail, Since: since, SourceSynthesisUUID: source}
}

// UnresolvedOf lists the objects plan kept for a person to resolve.
func UnresolvedOf(plan RecoveryPlan) []Unresolved {
	var out []Unresolved
	for _, dr := range plan.Dropped {
		if !dr.Reason.verifiable() {
			out = append(out, NewUnresolved(dr.Tombstone, dr.Reason.String(), dr.Detail, plan.Decision.SynthesisUUID, plan.Decision.DecidedAt))
		}
	}
	return out
}

// MergeUnresolved is old and fresh sorted, the first (old before fresh) per identity kept, so Since stays.
func MergeUnresolved(old, fresh []Unresolved) []Unresolved {
	out := slices.Concat(old, fresh)
	slices.SortStableFunc(out, func(a, b Unresolved) int { return a.Entry().ID().Compare(b.Entry().ID()) })
	return slices.CompactFunc(out, func(a, b Unresolved) bool { return a.Entry().ID() == b.Entry().ID() })
}

// StillUnresolved: a read of u's object leaves it listed unless NotFound or another UID (a failed read keeps it).
func StillUnresolved(u Unresolved, o Observation) bool {
	return o.State != ObjectAbsent && (u.UID == "" || o.UID == "" || o.UID == u.UID)
}

// EncodeUnresolved is the data of UnresolvedDataKey and its digest.
func EncodeUnresolved(us []Unresolved) ([]byte, string) {
	data, err := json.Marshal(us)
	if err != nil {
		panic(fmt.Sprintf("encoding unresolved entries: %v", err)) // plain values only
	}
	return data, sha256Digest(data)
}

// sha256Digest is "sha256:<hex>" of data.
func sha256Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// decodeUnresolved reads chunk s's unresolved entries: from format 3, chunk 0 only, matching their digest.
func decodeUnresolved(s ChunkSecret, index int) ([]Unresolved, error) {
	data, ok := s.Data[UnresolvedDataKey]
	if s.Annotations[AnnotationFormat] != FormatUnresolved || index != 0 {
		if ok {
			return nil, fmt.Errorf("data key %s is only in chunk 0 of format %s", UnresolvedDataKey, FormatUnresolved)
		}
		return nil, nil
	}
	if !ok {
		return nil, fmt.Errorf("data key %s is missing", UnresolvedDataKey)
	}
	if got, want := sha256Digest(data),
		s.Annotations[AnnotationUnresolvedDigest]; got != want {
		return nil, fmt.Errorf("unresolved entries hash to %s, annotation %s says %q", got, AnnotationUnresolvedDigest, truncate(want, 80))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var us []Unresolved
	if err := dec.Decode(&us); err != nil {
		return nil, fmt.Errorf("decoding unresolved entries: %w", err)
	}
	d := dismissedIn(s)
	return slices.DeleteFunc(us, func(u Unresolved) bool { return slices.Contains(d.IDs, u.Entry().ID().String()) }), nil
}

// dismissal is AnnotationUnresolvedDismissed's value: entries of one snapshot dismissed.
type dismissal struct {
	Snapshot string   `json:"snapshot"`
	IDs      []string `json:"ids"`
}

// dismissedIn is s's dismissal of its own snapshot's entries; any other value dismisses nothing.
func dismissedIn(s ChunkSecret) dismissal {
	var d dismissal
	if json.Unmarshal([]byte(s.Annotations[AnnotationUnresolvedDismissed]), &d) != nil || d.Snapshot != s.Annotations[AnnotationSourceSynthesisUUID] {
		return dismissal{Snapshot: s.Annotations[AnnotationSourceSynthesisUUID]}
	}
	return d
}

// Dismiss is chunk 0's Secret s with us dismissed too, what it dismissed before kept: written as
// an annotation, so the history's write time stays (design §3).
func Dismiss(s ChunkSecret, us []Unresolved) ChunkSecret {
	d := dismissedIn(s)
	for _, u := range us {
		if id := u.Entry().ID().String(); !slices.Contains(d.IDs, id) {
			d.IDs = append(d.IDs, id)
		}
	}
	data, _ := json.Marshal(d) // plain values only
	s.Annotations = merged(s.Annotations, map[string]string{AnnotationUnresolvedDismissed: string(data)})
	return s
}

// WithUnresolved returns chunk 0's Secret carrying us in format 3; without any, in format 2.
func WithUnresolved(s ChunkSecret, us []Unresolved) ChunkSecret {
	if len(us) == 0 {
		return s
	}
	data, digest := EncodeUnresolved(us)
	s.Data[UnresolvedDataKey] = data
	s.Annotations[AnnotationFormat] = FormatUnresolved
	s.Annotations[AnnotationUnresolvedDigest] = digest
	return s
}

// UnresolvedIn lists the unresolved entries of the chunk-0 Secrets recorded for c, or names them.
func UnresolvedIn(secrets []ChunkSecret, c CompositionRef) (us []Unresolved, unreadable []string) {
	for _, s := range secrets {
		a := s.Annotations
		if !s.Owned() || a[AnnotationChunkIndex] != "0" || a[AnnotationCompositionNamespace] != c.Namespace || a[AnnotationCompositionName] != c.Name {
			continue
		}
		got, err := decodeUnresolved(s, 0)
		if err != nil {
			unreadable = append(unreadable, s.Name)
		}
		us = append(us, got...)
	}
	return us, unreadable
}

// AnnotationKept, on part 0 of a hand-off's recovery slices, lists what the Recovered plan kept
// for a person (UnresolvedOf): the recording of the carrying synthesis carries it (design §3).
const AnnotationKept = "eno.azure.io/tombstone-recovery-kept"

// maxKeptBytes bounds AnnotationKept, well within the API server's 256 KiB for all of a slice's
// annotations: entries past it are not carried (the decision's message still counts them).
const maxKeptBytes = 128 << 10

// fitUnresolved is the longest prefix of us whose encoding is at most limit bytes.
func fitUnresolved(us []Unresolved, limit int) []Unresolved {
	n := len("[]") - 1
	for i, u := range us {
		b, _ := json.Marshal(u)
		if n += len(b) + 1; n > limit {
			return us[:i]
		}
	}
	return us
}

// KeptIn lists what the Recovered plan kept for a person, from its hand-off's recovery slices.
func KeptIn(slices []ResourceSlice) ([]Unresolved, error) {
	var out []Unresolved
	for _, s := range slices {
		v, ok := s.Annotations[AnnotationKept]
		if !ok {
			continue
		}
		var us []Unresolved
		if err := json.Unmarshal([]byte(v), &us); err != nil {
			return out, fmt.Errorf("recovery slice %s: %s: %w", s.Name, AnnotationKept, err)
		}
		out = append(out, us...)
	}
	return out, nil
}

// UnresolvedOfRefused lists, when c's decision on its current synthesis refused the history
// (InventoryInvalid, OtherNamespace), what its Secrets recorded for c held and inv does not,
// within maxKeptBytes: never checked, so the recording replacing them carries it (design §3).
// It names the Secrets whose data does not decode, and counts the entries past the bound.
func UnresolvedOfRefused(c Composition, secrets []ChunkSecret, inv Inventory, since time.Time) (us []Unresolved, unreadable []string, omitted int) {
	d, ok := c.Decision()
	if !ok || d.SynthesisUUID != c.SynthesisUUID() || d.Outcome != OutcomeInventoryInvalid && d.Reason != ReasonOtherNamespace {
		return nil, nil, 0
	}
	held := map[ResourceID]bool{}
	for _, e := range inv.Entries() {
		held[e.ID()] = true
	}
	for _, s := range secrets {
		source := s.Annotations[AnnotationSourceSynthesisUUID]
		if _, another := s.RecordedForAnother(c.Ref()); another || !s.Owned() || source == c.SynthesisUUID() {
			continue
		}
		entries, err := DecodeEntries(s.Data[SecretDataKey])
		if err != nil {
			unreadable = append(unreadable, s.Name)
			continue
		}
		for _, e := range entries {
			if !held[e.ID()] {
				us = append(us, NewUnresolved(Tombstone{Entry: e}, cmp.Or(d.Reason, d.Outcome.String()), "in a history recovery refused: never checked", source, since))
			}
		}
	}
	fit := fitUnresolved(us, maxKeptBytes)
	return fit, unreadable, len(us) - len(fit)
}
