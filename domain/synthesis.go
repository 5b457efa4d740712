package domain

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// ResourceSlice is the part of an Eno ResourceSlice this project reads (design §2).
type ResourceSlice struct {
	Namespace string
	Name      string
	Deleting  bool
	// SynthesisUUID is spec.synthesisUUID. Eno's own stamp says nothing about membership;
	// this controller sets it on its recovery slices to recognise them (design §6.2).
	SynthesisUUID string
	// Annotations are read only on recovery slices, where they carry the hand-off's decision.
	Annotations map[string]string
	// ControllerUID is the UID in the slice's controller owner reference, "" when none is set.
	ControllerUID string
	// ResourceVersion guards a rewrite of the slice.
	ResourceVersion string
	Resources       []SliceResource
}

// SliceResource is one entry of spec.resources.
type SliceResource struct {
	Manifest string
	Deleted  bool
}

// SliceProblem says why a synthesis's slices cannot be used.
type SliceProblem struct{ name string }

var (
	SliceMissing     = SliceProblem{"Missing"}
	SliceTerminating = SliceProblem{"Terminating"}
	SliceUnreadable  = SliceProblem{"Unreadable"}
	SliceMalformed   = SliceProblem{"Malformed"}
)

func (p SliceProblem) String() string { return p.name }

// SliceError: the current synthesis cannot be read in full; nothing is written, and it retries.
type SliceError struct {
	Slice   string
	Problem SliceProblem
	Detail  string
	Err     error
}

func (e *SliceError) Error() string {
	msg := fmt.Sprintf("resource slice %s is %s", e.Slice, e.Problem)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *SliceError) Unwrap() error { return e.Err }

// IsSliceError reports whether err stems from an unusable slice.
func IsSliceError(err error) bool {
	var se *SliceError
	return errors.As(err, &se)
}

// SynthesisContents is what the current synthesis produces, patches and tombstones.
type SynthesisContents struct {
	inventory Inventory
	// covered holds what it produces, patches (the Patch's target) or already tombstones.
	covered map[ResourceID]struct{}
	// keptTombstones are the tombstones Eno skips for good: disabled on the manifest, and not
	// by this controller's precondition, which may enable them.
	keptTombstones map[ResourceID]struct{}
	// anyNamespace holds every identity above with its namespace cleared: see Covers.
	anyNamespace map[ResourceID]struct{}
}

func (s SynthesisContents) Inventory() Inventory { return s.inventory }

// Covers reports whether the synthesis produces, patches or already tombstones id. An id without
// a namespace is covered in any namespace: the API server ignores a namespace on a cluster-scoped
// object, so that manifest applies the very object (design §6.3).
func (s SynthesisContents) Covers(id ResourceID) bool {
	set := s.covered
	if id.Namespace == "" {
		set = s.anyNamespace
	}
	_, ok := set[id]
	return ok
}

// ReadSynthesis builds the contents of c's current synthesis from its slices, in the order
// status.currentSynthesis.resourceSlices names them; a terminating or malformed one is an error.
// That list alone decides membership: Eno stamps spec.synthesisUUID with whatever synthesis was
// current when its executor wrote the slice, so the stamp is not checked.
func ReadSynthesis(c Composition, slices []ResourceSlice) (SynthesisContents, error) {
	if c.Synthesis == nil || c.Synthesis.UUID == "" {
		return SynthesisContents{}, fmt.Errorf("composition %s has no current synthesis", c.Ref())
	}
	// A named slice that was not passed in would make its resources look orphaned.
	given := make(map[string]struct{}, len(slices))
	for _, s := range slices {
		given[s.Name] = struct{}{}
	}
	for _, name := range c.Synthesis.Slices {
		if _, ok := given[name]; !ok {
			return SynthesisContents{}, &SliceError{Slice: name, Problem: SliceMissing, Detail: "named by status.currentSynthesis.resourceSlices but not read"}
		}
	}
	contents := SynthesisContents{covered: map[ResourceID]struct{}{}, keptTombstones: map[ResourceID]struct{}{}}
	var entries []Entry
	for _, s := range slices {
		if s.Deleting {
			return SynthesisContents{}, &SliceError{Slice: s.Name, Problem: SliceTerminating, Detail: "it is being deleted"}
		}
		for i, r := range s.Resources {
			m, err := readManifest([]byte(r.Manifest))
			if err != nil {
				return SynthesisContents{}, &SliceError{Slice: s.Name, Problem: SliceMalformed, Detail: fmt.Sprintf("resource %d", i), Err: err}
			}
			if m.APIVersion == "" || m.Kind == "" || m.Name == "" {
				return SynthesisContents{}, &SliceError{Slice: s.Name, Problem: SliceMalformed, Detail: fmt.Sprintf("resource %d: manifest lacks apiVersion, kind or metadata.name", i)}
			}
			group, version := splitAPIVersion(m.APIVersion)
			if version == "" {
				return SynthesisContents{}, &SliceError{Slice: s.Name, Problem: SliceMalformed, Detail: fmt.Sprintf("resource %d: apiVersion %q has no version", i, m.APIVersion)}
			}
			isPatch := m.APIVersion == enoAPIVersion && m.Kind == patchKind
			switch {
			case isPatch:
				// A tombstoned Patch still names its target: when in doubt, keep (design §6).
				targetVersion, targetKind, err := m.patchTarget()
				if err != nil {
					return SynthesisContents{}, &SliceError{Slice: s.Name, Problem: SliceMalformed, Detail: fmt.Sprintf("resource %d", i), Err: err}
				}
				if targetVersion == "" || targetKind == "" {
					return SynthesisContents{}, &SliceError{Slice: s.Name, Problem: SliceMalformed, Detail: fmt.Sprintf("resource %d: Patch lacks patch.apiVersion or patch.kind", i)}
				}
				tg, _ := splitAPIVersion(targetVersion)
				contents.covered[ResourceID{Group: tg, Kind: targetKind, Namespace: m.Namespace, Name: m.Name}] = struct{}{}
			case r.Deleted:
				id := ResourceID{Group: group, Kind: m.Kind, Namespace: m.Namespace, Name: m.Name}
				contents.covered[id] = struct{}{}
				if _, _, ours := readSelfCheck(m.Annotations); !ours && m.Annotations[AnnotationDisableReconciliation] == "true" {
					contents.keptTombstones[id] = struct{}{}
				}
			default:
				e := Entry{Group: group, Version: version, Kind: m.Kind, Namespace: m.Namespace, Name: m.Name}
				if len(m.Labels) > 0 {
					e.Labels = m.Labels
				}
				// Only the group annotations were kept; an empty one is omitted. The map is m's own.
				maps.DeleteFunc(m.Annotations, func(_, v string) bool { return v == "" })
				if len(m.Annotations) > 0 {
					e.Annotations = m.Annotations
				}
				cascadeDisable(&e, c)
				entries = append(entries, e)
			}
		}
	}
	inv, err := newInventory(entries) // the entries and their maps are this function's own
	if err != nil {
		return SynthesisContents{}, &SliceError{Slice: "(synthesis " + c.Synthesis.UUID + ")", Problem: SliceMalformed, Err: err}
	}
	contents.inventory = inv
	for _, e := range inv.entries {
		contents.covered[e.ID()] = struct{}{}
	}
	contents.anyNamespace = map[ResourceID]struct{}{}
	for id := range contents.covered {
		id.Namespace = ""
		contents.anyNamespace[id] = struct{}{}
	}
	return contents, nil
}

// cascadeDisable records on e the Composition's disable-reconciliation when e has none, as Eno
// reads it. Eno marks a paused Composition Ready with manifests it never applied; an entry
// recorded while paused must never be tombstoned later (design §6.3, Disabled).
func cascadeDisable(e *Entry, c Composition) {
	// Only a pause is carried: an explicit "false" recorded into a tombstone would beat a pause
	// an operator later puts on the recreated Composition, since Eno reads the resource's first.
	v := c.Annotations[AnnotationDisableReconciliation]
	if v != "true" {
		return
	}
	if _, own := e.Annotations[AnnotationDisableReconciliation]; own {
		return
	}
	e.Annotations = merged(map[string]string{AnnotationDisableReconciliation: v}, e.Annotations)
}

// Production is what the fleet index keeps of one slice (design §6.3): its owner and fingerprints, never a manifest.
type Production struct {
	// Slice is the slice's "namespace/name"; Owner its controller's UID.
	Slice, Owner string
	ids          []uint64 // sorted
	// On a recovery slice: the fingerprints of its tombstones and the incarnation its history
	// names (AnnotationSourceUID), whose slices are no evidence.
	tombstones []uint64
	source     string
}

// ProductionOf reads what s applies or patches; an unreadable manifest names nothing: Eno cannot apply it either.
func ProductionOf(s ResourceSlice) Production {
	p := Production{Slice: s.Namespace + "/" + s.Name, Owner: s.ControllerUID, source: s.Annotations[AnnotationSourceUID]}
	ids := make([]uint64, 0, len(s.Resources))
	for _, r := range s.Resources {
		if r.Deleted {
			if t, _, err := ParseTombstone(r); err == nil && p.source != "" {
				p.tombstones = append(p.tombstones, fingerprint(t.ID()))
			}
			continue
		}
		m, err := readManifest([]byte(r.Manifest))
		if err != nil {
			continue
		}
		group, _ := splitAPIVersion(m.APIVersion)
		id := ResourceID{Group: group, Kind: m.Kind, Namespace: m.Namespace, Name: m.Name}
		if m.APIVersion == enoAPIVersion && m.Kind == patchKind {
			targetVersion, targetKind, err := m.patchTarget()
			if err != nil || targetKind == "" {
				continue
			}
			tg, _ := splitAPIVersion(targetVersion)
			id = ResourceID{Group: tg, Kind: targetKind, Namespace: m.Namespace, Name: m.Name}
		}
		ids = append(ids, fingerprint(id))
	}
	slices.Sort(ids)
	p.ids = slices.Clip(slices.Compact(ids))
	slices.Sort(p.tombstones)
	p.tombstones = slices.Compact(p.tombstones)
	return p
}

// Threatens reports whether p, a slice of neither recovery slice r's Composition nor its source,
// applies or patches what r tombstones: the pending hand-off's watch looks again (design §6.2).
func (p Production) Threatens(r Production) bool {
	if len(r.tombstones) == 0 || p.Owner == "" || p.Owner == r.Owner || p.Owner == r.source {
		return false
	}
	for _, id := range p.ids {
		if _, ok := slices.BinarySearch(r.tombstones, id); ok {
			return true
		}
		if _, ok := slices.BinarySearch(r.tombstones, id&^nsBits|clusterScoped); ok {
			return true
		}
	}
	return false
}

// Threats finds the recovery slices with tombstones a slice threatens at the cost of its own
// identities, not the fleet's, each with what its caller keeps (V). Not safe for concurrent use.
type Threats[V any] struct {
	held map[string]threat[V]           // by Production.Slice
	by   map[uint64]map[string]struct{} // tombstone fingerprint → slices
}

type threat[V any] struct {
	p Production
	v V
}

// Set holds r, replacing what r.Slice held; a slice with no tombstones to watch is dropped.
func (w *Threats[V]) Set(r Production, v V) {
	w.Forget(r.Slice)
	if len(r.tombstones) == 0 {
		return
	}
	if w.held == nil {
		w.held, w.by = map[string]threat[V]{}, map[uint64]map[string]struct{}{}
	}
	w.held[r.Slice] = threat[V]{p: r, v: v}
	for _, t := range r.tombstones {
		if w.by[t] == nil {
			w.by[t] = map[string]struct{}{}
		}
		w.by[t][r.Slice] = struct{}{}
	}
}

// Forget drops the slice "namespace/name".
func (w *Threats[V]) Forget(slice string) {
	for _, t := range w.held[slice].p.tombstones {
		if delete(w.by[t], slice); len(w.by[t]) == 0 {
			delete(w.by, t)
		}
	}
	delete(w.held, slice)
}

// Of returns what is kept of each held slice p threatens, once each.
func (w *Threats[V]) Of(p Production) []V {
	var out []V
	seen := map[string]bool{}
	for _, id := range p.ids {
		for _, t := range []uint64{id, id&^nsBits | clusterScoped} {
			for s := range w.by[t] {
				if r := w.held[s]; !seen[s] && p.Threatens(r.p) {
					seen[s] = true
					out = append(out, r.v)
				}
			}
		}
	}
	return out
}

// produces: p applies or patches fp's identity, one without a namespace in any (as on a cluster-scoped kind).
func (p Production) produces(fp uint64) bool {
	if fp&nsBits != clusterScoped {
		_, ok := slices.BinarySearch(p.ids, fp)
		return ok
	}
	i, _ := slices.BinarySearch(p.ids, fp&^nsBits)
	return i < len(p.ids) && p.ids[i]&^nsBits == fp&^nsBits
}

// A fingerprint is 64 bits: the high 48 of the sha256 of the identity without its namespace, the
// low 16 (nsBits) of its namespace's. Two identities match only if their names' 48 bits do, so
// one namespace's many names rarely collide. A slice producing either of two identities with one
// fingerprint counts for both: an object kept, never one deleted (design §6.3).
func fingerprint(id ResourceID) uint64 {
	name, ns := sha256.Sum256([]byte(id.Group+"\x00"+id.Kind+"\x00"+id.Name)), sha256.Sum256([]byte(id.Namespace))
	return binary.BigEndian.Uint64(name[:8])&^nsBits | uint64(binary.BigEndian.Uint16(ns[:2]))
}

const nsBits = 1<<16 - 1

// clusterScoped is the namespace bits of an identity without a namespace.
var clusterScoped = fingerprint(ResourceID{}) & nsBits

// ProducedElsewhere maps each of ids that a slice of all not of the excluded owners (UIDs) applies
// or patches to that slice; terminating or older ones count too: when in doubt, keep.
func ProducedElsewhere(all []Production, ids []ResourceID, excluded ...string) map[ResourceID]string {
	out := map[ResourceID]string{}
	fps := make([]uint64, len(ids))
	for i, id := range ids {
		fps[i] = fingerprint(id)
	}
	for _, p := range all {
		if p.Owner == "" || slices.Contains(excluded, p.Owner) {
			continue
		}
		for i, id := range ids {
			if p.produces(fps[i]) && (out[id] == "" || p.Slice < out[id]) {
				out[id] = p.Slice
			}
		}
	}
	return out
}
