package k8s

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Eno's API, read as unstructured (design §2).
const (
	enoGroup             = "eno.azure.io"
	enoAPIVersion        = "eno.azure.io/v1"
	compositionKind      = "Composition"
	resourceSliceKind    = "ResourceSlice"
	compositionsResource = "compositions"
	slicesResource       = "resourceslices"
)

var (
	// CompositionGVR is the resource of Eno Compositions.
	CompositionGVR = schema.GroupVersionResource{Group: enoGroup, Version: "v1", Resource: compositionsResource}
	// ResourceSliceGVR is the resource of Eno ResourceSlices.
	ResourceSliceGVR = schema.GroupVersionResource{Group: enoGroup, Version: "v1", Resource: slicesResource}
)

// fieldError names a field of an object whose type or value is not what Eno's API defines.
func fieldError(path []string, val any, want string) error {
	return fmt.Errorf("field %s is %s, want %s", strings.Join(path, "."), describe(val), want)
}

func describe(v any) string {
	switch v := v.(type) {
	case string:
		if len(v) > 64 {
			v = v[:64] + "..."
		}
		return fmt.Sprintf("%q", v)
	case nil:
		return "null"
	}
	return fmt.Sprintf("a %T", v)
}

// nested returns the value at path; found is false when a step is absent or null.
// A step that is present but not an object is an error.
func nested(obj map[string]any, path ...string) (any, bool, error) {
	var cur any = obj
	for i, key := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			if cur == nil {
				return nil, false, nil
			}
			return nil, false, fieldError(path[:i], cur, "an object")
		}
		cur, ok = m[key]
		if !ok || cur == nil {
			return nil, false, nil
		}
	}
	return cur, true, nil
}

// opt returns the value at path, T's zero value when absent or null; a value of another type
// is an error that names want.
func opt[T any](obj map[string]any, want string, path ...string) (T, error) {
	var zero T
	v, found, err := nested(obj, path...)
	if err != nil || !found {
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, fieldError(path, v, want)
	}
	return t, nil
}

// compositionFromUnstructured reads the Composition's fields the controller uses. Malformed
// status fields are an error: the caller must not guess at a synthesis (design §2).
func compositionFromUnstructured(u *unstructured.Unstructured) (domain.Composition, error) {
	c := domain.Composition{
		Namespace:       u.GetNamespace(),
		Name:            u.GetName(),
		UID:             string(u.GetUID()),
		ResourceVersion: u.GetResourceVersion(),
		Labels:          maps.Clone(u.GetLabels()),
		Annotations:     maps.Clone(u.GetAnnotations()),
		Deleting:        u.GetDeletionTimestamp() != nil,
	}
	bad := func(err error) (domain.Composition, error) {
		return domain.Composition{}, fmt.Errorf("composition %s/%s is malformed: %w", c.Namespace, c.Name, err)
	}
	// Any status.inFlightSynthesis means a synthesis is under way; its UUID names it.
	if inFlight, found, err := nested(u.Object, "status", "inFlightSynthesis"); err != nil {
		return bad(err)
	} else if found {
		obj, _ := inFlight.(map[string]any)
		uuid, _ := opt[string](obj, "a string", "uuid")
		c.InFlightSynthesis = cmp.Or(uuid, "(unnamed)")
	}
	c.PreviousSynthesis = previousSynthesis(u)
	obj, err := opt[map[string]any](u.Object, "an object", "status", "currentSynthesis")
	if err != nil {
		return bad(err)
	}
	if obj == nil {
		return c, nil
	}
	s, err := currentSynthesis(obj)
	if err != nil {
		return bad(fmt.Errorf("status.currentSynthesis: %w", err))
	}
	c.Synthesis = s
	return c, nil
}

// currentSynthesis reads status.currentSynthesis: its UUID, when it was synthesized, whether it
// is Ready, and the names of its slices. Its errors name fields relative to it.
func currentSynthesis(obj map[string]any) (*domain.Synthesis, error) {
	uuid, err1 := opt[string](obj, "a string", "uuid")
	synthesized, err2 := opt[string](obj, "a string", "synthesized")
	if err := cmp.Or(err1, err2); err != nil {
		return nil, err
	}
	s := &domain.Synthesis{UUID: uuid}
	if synthesized != "" {
		t, err := time.Parse(time.RFC3339, synthesized)
		if err != nil {
			return nil, fmt.Errorf("synthesized %s is not RFC 3339: %w", describe(synthesized), err)
		}
		s.Synthesized = t.UTC()
	}
	// ready is a timestamp in Eno's API; set and non-empty means Ready.
	if v, found, _ := nested(obj, "ready"); found {
		switch v := v.(type) {
		case string:
			s.Ready = v != ""
		case bool:
			s.Ready = v
		default:
			return nil, fieldError([]string{"ready"}, v, "a timestamp string")
		}
	}
	refs, err := opt[[]any](obj, "a list", "resourceSlices")
	if err != nil {
		return nil, err
	}
	for i, r := range refs {
		path := fmt.Sprintf("resourceSlices[%d]", i)
		ref, ok := r.(map[string]any)
		if !ok {
			return nil, fieldError([]string{path}, r, "an object")
		}
		name, err := opt[string](ref, "a string", "name")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if name == "" {
			return nil, fmt.Errorf("%s.name is empty", path)
		}
		s.Slices = append(s.Slices, name)
	}
	if refs != nil && s.Slices == nil {
		s.Slices = []string{} // present but empty: the commit tests it as []
	}
	return s, nil
}

// previousSynthesis reads the UUID and slice names of status.previousSynthesis, leniently: it
// only serves the report after a hand-off, so anything unreadable reads as no previous synthesis.
func previousSynthesis(u *unstructured.Unstructured) *domain.Synthesis {
	uuid, _, _ := unstructured.NestedString(u.Object, "status", "previousSynthesis", "uuid")
	if uuid == "" {
		return nil
	}
	s := &domain.Synthesis{UUID: uuid}
	refs, _, _ := unstructured.NestedSlice(u.Object, "status", "previousSynthesis", "resourceSlices")
	for _, r := range refs {
		if ref, ok := r.(map[string]any); ok {
			if name, ok := ref["name"].(string); ok && name != "" {
				s.Slices = append(s.Slices, name)
			}
		}
	}
	return s
}

// readComposition is a Composition as read once, at its event, by the standalone cache's
// transform (CompositionAsRead), which keeps it in place of the decoded object (a fifth of it on
// the heap). It never changes after; each reader gets a copy.
type readComposition struct {
	metav1.ObjectMeta // the informer's key, resourceVersion and labels
	comp              domain.Composition
	// err is why the status cannot be read; comp then holds the identity and annotations only,
	// which ListCompositions keeps: a Composition sharing a lineage is never missed for its status.
	err error
}

func (r *readComposition) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (r *readComposition) DeepCopyObject() runtime.Object   { c := *r; return &c }

// composition is a copy of what was read, sharing nothing with the cache.
func (r *readComposition) composition() domain.Composition {
	c := r.comp
	c.Labels, c.Annotations = maps.Clone(c.Labels), maps.Clone(c.Annotations)
	for _, s := range []**domain.Synthesis{&c.Synthesis, &c.PreviousSynthesis} {
		if *s != nil {
			cp := **s
			cp.Slices = slices.Clone(cp.Slices)
			*s = &cp
		}
	}
	return c
}

// read reads u (compositionFromUnstructured) into a readComposition.
func read(u *unstructured.Unstructured) *readComposition {
	comp, err := compositionFromUnstructured(u)
	if err != nil {
		comp = domain.Composition{Namespace: u.GetNamespace(), Name: u.GetName(), UID: string(u.GetUID()),
			Labels: maps.Clone(u.GetLabels()), Annotations: maps.Clone(u.GetAnnotations())}
	}
	meta := metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName(), ResourceVersion: u.GetResourceVersion(), Labels: comp.Labels}
	return &readComposition{ObjectMeta: meta, comp: comp, err: err}
}

// CompositionAsRead is the standalone Composition cache's transform: read, at the event.
func CompositionAsRead(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return read(u), nil
	}
	return obj, nil
}

// sliceFromUnstructured reads the ResourceSlice's fields the controller uses. A malformed slice
// is a *domain.SliceError (design §2).
func sliceFromUnstructured(u *unstructured.Unstructured) (domain.ResourceSlice, error) {
	s := domain.ResourceSlice{
		Namespace: u.GetNamespace(),
		Name:      u.GetName(),
		Deleting:  u.GetDeletionTimestamp() != nil,
		// Kept for rewrites of recovery slices; compare slices by content, not by it.
		ResourceVersion: u.GetResourceVersion(),
	}
	if a := u.GetAnnotations(); len(a) > 0 {
		s.Annotations = maps.Clone(a)
	}
	if o := metav1.GetControllerOfNoCopy(u); o != nil {
		s.ControllerUID = string(o.UID)
	}
	bad := func(err error) (domain.ResourceSlice, error) {
		return domain.ResourceSlice{}, &domain.SliceError{Slice: s.Name, Problem: domain.SliceMalformed, Err: err}
	}
	uuid, err1 := opt[string](u.Object, "a string", "spec", "synthesisUUID")
	resources, err2 := opt[[]any](u.Object, "a list", "spec", "resources")
	if err := cmp.Or(err1, err2); err != nil {
		return bad(err)
	}
	s.SynthesisUUID = uuid
	for i, r := range resources {
		path := fmt.Sprintf("spec.resources[%d]", i)
		obj, ok := r.(map[string]any)
		if !ok {
			return bad(fieldError([]string{path}, r, "an object"))
		}
		manifest, err1 := opt[string](obj, "a string", "manifest")
		deleted, err2 := opt[bool](obj, "a bool", "deleted")
		if err := cmp.Or(err1, err2); err != nil {
			return bad(fmt.Errorf("%s: %w", path, err))
		}
		s.Resources = append(s.Resources, domain.SliceResource{Manifest: manifest, Deleted: deleted})
	}
	return s, nil
}

// recoverySlice is a ResourceSlice that hands part, one part of h's tombstones, to Eno: owned by
// the Composition as its controller (eno-controller's slice cleanup dereferences that
// reference), carrying Eno's own finalizer, spec.synthesisUUID set to the synthesis it is for,
// and the hand-off's decision in an annotation (design §6.2).
func recoverySlice(s domain.ResourceSlice, comp domain.Composition) *unstructured.Unstructured {
	resources := make([]any, len(s.Resources))
	for i, r := range s.Resources {
		resources[i] = map[string]any{"manifest": r.Manifest, "deleted": r.Deleted}
	}
	t := true
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": enoAPIVersion,
		"kind":       resourceSliceKind,
		"spec": map[string]any{
			"synthesisUUID": s.SynthesisUUID,
			"resources":     resources,
		},
	}}
	u.SetNamespace(s.Namespace)
	u.SetName(s.Name)
	u.SetLabels(map[string]string{domain.LabelManagedBy: domain.ManagedByValue})
	u.SetAnnotations(s.Annotations)
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: enoAPIVersion, Kind: compositionKind, Name: comp.Name, UID: types.UID(comp.UID),
		Controller: &t, BlockOwnerDeletion: &t}})
	u.SetFinalizers([]string{domain.SliceFinalizer})
	return u
}

// chunkFromSecret copies a Secret into the domain's view; the copy shares nothing with a cache.
func chunkFromSecret(s *corev1.Secret) domain.ChunkSecret {
	return domain.ChunkSecret{
		Namespace:       s.Namespace,
		Name:            s.Name,
		Type:            string(s.Type),
		Labels:          maps.Clone(s.Labels),
		Annotations:     maps.Clone(s.Annotations),
		ResourceVersion: s.ResourceVersion,
		UID:             string(s.UID),
		DataWrittenAt:   dataWrittenAt(s.CreationTimestamp.Time, s.ManagedFields),
		Data:            cloneData(s.Data),
	}
}

// cloneData is a deep copy of a Secret's data.
func cloneData(data map[string][]byte) map[string][]byte {
	out := maps.Clone(data)
	for k, v := range out {
		out[k] = bytes.Clone(v)
	}
	return out
}

// dataWrittenAt is when this controller last wrote the Secret's data, zero when unknown: the
// rule is domain.DataWrittenByUs (design §6.3, rewritten history); this reads the managedFields it needs.
func dataWrittenAt(created time.Time, entries []metav1.ManagedFieldsEntry) time.Time {
	writes := make([]domain.ManagedWrite, 0, len(entries))
	for _, e := range entries {
		w := domain.ManagedWrite{Manager: e.Manager, Subresource: e.Subresource, Unreadable: true}
		if e.Time != nil {
			w.Time = e.Time.Time
		}
		if e.FieldsType == "FieldsV1" && e.FieldsV1 != nil {
			var fields map[string]json.RawMessage
			if json.Unmarshal(e.FieldsV1.Raw, &fields) == nil {
				_, w.OwnsData = fields["f:data"]
				w.Unreadable = false
			}
		}
		writes = append(writes, w)
	}
	t, _ := domain.DataWrittenByUs(created, writes)
	return t
}

// secretFromChunk builds the Secret that stores c.
func secretFromChunk(c domain.ChunkSecret) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name, ResourceVersion: c.ResourceVersion}}
	applyChunk(s, c)
	return s
}

// applyChunk writes the fields a chunk defines onto s: type, labels, annotations and data.
// Everything else on s (owner references, finalizers, ...) is kept.
func applyChunk(s *corev1.Secret, c domain.ChunkSecret) {
	s.Type = corev1.SecretType(c.Type)
	s.Labels = maps.Clone(c.Labels)
	s.Annotations = maps.Clone(c.Annotations)
	s.Data = cloneData(c.Data)
}
