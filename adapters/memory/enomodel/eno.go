package enomodel

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// The control plane's resources.
var (
	CompositionGVR   = schema.GroupVersionResource{Group: "eno.azure.io", Version: "v1", Resource: "compositions"}
	ResourceSliceGVR = schema.GroupVersionResource{Group: "eno.azure.io", Version: "v1", Resource: "resourceslices"}
)

const (
	cleanupFinalizer = "eno.azure.io/cleanup"
	annoForce        = "eno.azure.io/force-resynthesis"
	annoDisable      = "eno.azure.io/disable-reconciliation"
	annoStrategy     = "eno.azure.io/deletion-strategy"
	// MaxSliceJSONBytes is the executor's slice budget (executor.go's maxSliceJsonBytes).
	MaxSliceJSONBytes = 512 * 1024
	// CleanupMinAge is how old an unreferenced slice must be before slice cleanup deletes it.
	CleanupMinAge = 5 * time.Second
)

// Mapper resolves a downstream manifest's kind to its resource and scope.
type Mapper func(gvk schema.GroupVersionKind) (gvr schema.GroupVersionResource, namespaced bool, ok bool)

// CompositionCache is Eno's informer read of a Composition: it may lag the API server. Its
// objects are shared, as an informer's are: never change them.
type CompositionCache func(namespace, name string) (*unstructured.Unstructured, error)

// Eno is a model of stock Eno v0.2.17 acting through the API: eno-controller's scheduling,
// executor, slice status, slice cleanup and composition deletion, and eno-reconciler processes
// with their per-process synthesis caches. Each exported step is one thing one of Eno's
// controllers does in one reconcile, so that a scheduler can interleave them with anything
// else; a step that has nothing to do says so and changes nothing.
type Eno struct {
	ControlPlane dynamic.Interface
	Downstream   dynamic.Interface
	Cache        CompositionCache
	Map          Mapper
	Now          func() time.Time
	// Outputs are the synthesizers' outputs, by Composition UID.
	Outputs map[types.UID][]*unstructured.Unstructured
	// SliceBytes is the executor's slice budget; 0 is Eno's, MaxSliceJSONBytes. A story may set
	// a smaller one to spread a small synthesis over several slices.
	SliceBytes int
	// InSync, when set, is told of each object a reconcile found in sync and left unwritten:
	// Eno takes it for the Composition all the same.
	InSync func(ref Ref, uid types.UID)

	seq int
	// forced holds the force-resynthesis values a synthesis was dispatched for.
	forced map[string]bool
	// cleanupIntent is how far slice cleanup got with each slice (namespace/name/UID).
	cleanupIntent map[string]cleanupStage
}

// NewEno is Eno on the two clusters.
func NewEno(cp, ds dynamic.Interface, cache CompositionCache, m Mapper, now func() time.Time) *Eno {
	return &Eno{ControlPlane: cp, Downstream: ds, Cache: cache, Map: m, Now: now,
		Outputs: map[types.UID][]*unstructured.Unstructured{}, forced: map[string]bool{}, cleanupIntent: map[string]cleanupStage{}}
}

func (e *Eno) next(prefix string) string {
	e.seq++
	return fmt.Sprintf("%s%08x-0000-4000-8000-%012x", prefix, e.seq, e.seq)
}

func (e *Eno) comps(ns string) dynamic.ResourceInterface {
	return e.ControlPlane.Resource(CompositionGVR).Namespace(ns)
}

func (e *Eno) slicesIn(ns string) dynamic.ResourceInterface {
	return e.ControlPlane.Resource(ResourceSliceGVR).Namespace(ns)
}

// synthesis reads one of status.{inFlight,current,previous}Synthesis.
func synthesis(comp *unstructured.Unstructured, which string) map[string]any {
	m, _, _ := unstructured.NestedMap(comp.Object, "status", which)
	return m
}

func sliceNames(syn map[string]any) []string {
	if syn == nil {
		return nil
	}
	refs, _ := syn["resourceSlices"].([]any)
	var out []string
	for _, r := range refs {
		if m, ok := r.(map[string]any); ok {
			if n, ok := m["name"].(string); ok {
				out = append(out, n)
			}
		}
	}
	return out
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// latestUUID is the in-flight synthesis's UUID, else the current one's (getLatestSynthesisUUID).
func latestUUID(comp *unstructured.Unstructured) string {
	if in := synthesis(comp, "inFlightSynthesis"); in != nil {
		return str(in, "uuid")
	}
	return str(synthesis(comp, "currentSynthesis"), "uuid")
}

// Dispatch is the scheduling controller starting a synthesis: a Composition that has never
// synthesized, whose generation moved, or whose force-resynthesis names its latest synthesis,
// gets an in-flight synthesis with a new UUID. A deleting Composition is never synthesized.
func (e *Eno) Dispatch(ctx context.Context, ns, name string) (bool, error) {
	comp, err := e.comps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, ignoreNotFound(err)
	}
	if comp.GetDeletionTimestamp() != nil || synthesis(comp, "inFlightSynthesis") != nil {
		return false, nil
	}
	cur := synthesis(comp, "currentSynthesis")
	force := comp.GetAnnotations()[annoForce]
	forced := force != "" && force == latestUUID(comp) && !e.forced[force]
	observed, _, _ := unstructured.NestedInt64(comp.Object, "status", "currentSynthesis", "observedCompositionGeneration")
	if cur != nil && !forced && observed == comp.GetGeneration() {
		return false, nil
	}
	if forced {
		e.forced[force] = true
	}
	in := map[string]any{"uuid": e.next(""), "observedCompositionGeneration": comp.GetGeneration()}
	if err := unstructured.SetNestedMap(comp.Object, in, "status", "inFlightSynthesis"); err != nil {
		return false, err
	}
	_, err = e.comps(ns).UpdateStatus(ctx, comp, metav1.UpdateOptions{})
	return err == nil, ignoreConflict(err)
}

// Execute is the executor: it reads the slices the current synthesis names (a missing one is
// skipped), builds the new synthesis's slices from the synthesizer's output with every
// unreconciled tombstone carried (resource.Slice), writes them, and promotes the synthesis:
// current becomes previous. The status write re-reads the Composition; it fails, and the step
// is retried from the start, when the in-flight synthesis changed.
func (e *Eno) Execute(ctx context.Context, ns, name string) (bool, error) {
	comp, err := e.comps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, ignoreNotFound(err)
	}
	in := synthesis(comp, "inFlightSynthesis")
	if in == nil || comp.GetDeletionTimestamp() != nil {
		return false, nil
	}
	var previous []*unstructured.Unstructured
	for _, n := range sliceNames(synthesis(comp, "currentSynthesis")) {
		s, err := e.slicesIn(ns).Get(ctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return false, err
		}
		previous = append(previous, s)
	}
	built, err := buildSlices(comp, previous, e.Outputs[comp.GetUID()], cmp.Or(e.SliceBytes, MaxSliceJSONBytes))
	if err != nil {
		return false, err
	}
	var refs []any
	for _, s := range built {
		s.SetName(e.next(name + "-"))
		created, err := e.slicesIn(ns).Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		refs = append(refs, map[string]any{"name": created.GetName()})
	}
	// updateComposition: read again, promote if the in-flight synthesis is still this one.
	comp, err = e.comps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, ignoreNotFound(err)
	}
	now := synthesis(comp, "inFlightSynthesis")
	if now == nil || str(now, "uuid") != str(in, "uuid") {
		return false, nil
	}
	cur := synthesis(comp, "currentSynthesis")
	now["resourceSlices"] = refs
	now["synthesized"] = e.Now().UTC().Format(time.RFC3339)
	if refs == nil {
		delete(now, "resourceSlices")
	}
	status, _, _ := unstructured.NestedMap(comp.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	if cur != nil {
		status["previousSynthesis"] = cur
	}
	status["currentSynthesis"] = now
	delete(status, "inFlightSynthesis")
	comp.Object["status"] = status
	_, err = e.comps(ns).UpdateStatus(ctx, comp, metav1.UpdateOptions{})
	return err == nil, ignoreConflict(err)
}

// buildSlices is resource.Slice: the outputs, then each resource of the previous slices that
// is not a Patch, not produced again, and not a reconciled deletion (a tombstone, or any
// resource of a terminating slice, whose status says reconciled) as a tombstone; cut at the
// slice budget, each slice owned by the Composition with Eno's finalizer and stamped with the
// current synthesis's UUID.
func buildSlices(comp *unstructured.Unstructured, previous []*unstructured.Unstructured, outputs []*unstructured.Unstructured, budget int) ([]*unstructured.Unstructured, error) {
	produced := map[Ref]bool{}
	var resources []map[string]any
	for _, o := range outputs {
		js, err := o.MarshalJSON()
		if err != nil {
			return nil, err
		}
		resources = append(resources, map[string]any{"manifest": string(js)})
		produced[RefOf(o)] = true
	}
	for _, s := range previous {
		items, _, _ := unstructured.NestedSlice(s.Object, "spec", "resources")
		states, _, _ := unstructured.NestedSlice(s.Object, "status", "resources")
		for i, it := range items {
			r, _ := it.(map[string]any)
			obj, err := parseManifest(str(r, "manifest"))
			if err != nil {
				return nil, fmt.Errorf("decoding resource %d of slice %s: %w", i, s.GetName(), err)
			}
			if obj.GetKind() == "Patch" && obj.GetAPIVersion() == "eno.azure.io/v1" {
				continue
			}
			deleted, _ := r["deleted"].(bool)
			reconciled := false
			if states != nil && i < len(states) {
				st, _ := states[i].(map[string]any)
				reconciled, _ = st["reconciled"].(bool)
			}
			if produced[RefOf(obj)] || ((deleted || s.GetDeletionTimestamp() != nil) && states != nil && reconciled) {
				continue
			}
			resources = append(resources, map[string]any{"manifest": str(r, "manifest"), "deleted": true})
		}
	}
	var out []*unstructured.Unstructured
	var cur *unstructured.Unstructured
	bytes := 0
	uuid := str(synthesis(comp, "currentSynthesis"), "uuid")
	for _, r := range resources {
		if cur == nil || bytes >= budget {
			bytes = 0
			cur = &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "eno.azure.io/v1", "kind": "ResourceSlice",
				"metadata": map[string]any{
					"namespace":  comp.GetNamespace(),
					"finalizers": []any{cleanupFinalizer},
					"ownerReferences": []any{map[string]any{
						"apiVersion": "eno.azure.io/v1", "kind": "Composition", "name": comp.GetName(),
						"uid": string(comp.GetUID()), "blockOwnerDeletion": true, "controller": true,
					}},
				},
				"spec": map[string]any{"resources": []any{}},
			}}
			if uuid != "" {
				_ = unstructured.SetNestedField(cur.Object, uuid, "spec", "synthesisUUID")
			}
			out = append(out, cur)
		}
		bytes += len(str(r, "manifest"))
		items, _, _ := unstructured.NestedSlice(cur.Object, "spec", "resources")
		_ = unstructured.SetNestedSlice(cur.Object, append(items, r), "spec", "resources")
	}
	return out, nil
}

// Ref is a resource's identity as Eno keys it: group, kind, namespace, name.
type Ref struct{ Group, Kind, Namespace, Name string }

func (r Ref) String() string {
	kind := r.Kind
	if r.Group != "" {
		kind += "." + r.Group
	}
	if r.Namespace == "" {
		return kind + " " + r.Name
	}
	return kind + " " + r.Namespace + "/" + r.Name
}

// RefOf is an object's Ref.
func RefOf(o *unstructured.Unstructured) Ref {
	gvk := o.GroupVersionKind()
	return Ref{Group: gvk.Group, Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()}
}

func parseManifest(s string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(s)); err != nil {
		return nil, err
	}
	return u, nil
}

// SliceStatus is the slice controller: it aggregates the current synthesis's slices into
// reconciled and ready, and sets force-resynthesis when a named slice is missing (not for a
// deleting Composition, not while one is in flight, not when already forced, and not within
// 5 s of the synthesis).
func (e *Eno) SliceStatus(ctx context.Context, ns, name string) (bool, error) {
	comp, err := e.comps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, ignoreNotFound(err)
	}
	cur := synthesis(comp, "currentSynthesis")
	if cur == nil {
		return false, nil
	}
	reconciled, ready := true, true
	for _, n := range sliceNames(cur) {
		s, err := e.slicesIn(ns).Get(ctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if comp.GetDeletionTimestamp() != nil {
				continue
			}
			return e.missingSlice(ctx, comp, cur)
		}
		if err != nil {
			return false, err
		}
		items, _, _ := unstructured.NestedSlice(s.Object, "spec", "resources")
		states, _, _ := unstructured.NestedSlice(s.Object, "status", "resources")
		if len(states) == 0 && len(items) > 0 {
			reconciled, ready = false, false
			break
		}
		orphan := comp.GetAnnotations()[annoStrategy] == "orphan"
		for _, st := range states {
			m, _ := st.(map[string]any)
			rec, _ := m["reconciled"].(bool)
			del, _ := m["deleted"].(bool)
			if !rec || (!del && !orphan && comp.GetDeletionTimestamp() != nil) {
				reconciled = false
			}
			if m["ready"] == nil {
				ready = false
			}
		}
	}
	if (cur["reconciled"] != nil) == reconciled && (cur["ready"] != nil) == ready {
		return false, nil
	}
	now := e.Now().UTC().Format(time.RFC3339)
	delete(cur, "reconciled")
	delete(cur, "ready")
	if reconciled {
		cur["reconciled"] = now
	}
	if ready && reconciled {
		cur["ready"] = now
	}
	_ = unstructured.SetNestedMap(comp.Object, cur, "status", "currentSynthesis")
	_, err = e.comps(ns).UpdateStatus(ctx, comp, metav1.UpdateOptions{})
	return err == nil, ignoreConflict(err)
}

func (e *Eno) missingSlice(ctx context.Context, comp *unstructured.Unstructured, cur map[string]any) (bool, error) {
	a := comp.GetAnnotations()
	if a["eno.azure.io/ignore-side-effects"] == "true" || synthesis(comp, "inFlightSynthesis") != nil ||
		(a[annoForce] != "" && a[annoForce] == latestUUID(comp)) {
		return false, nil
	}
	if t, err := time.Parse(time.RFC3339, str(cur, "synthesized")); err == nil && e.Now().Sub(t) < CleanupMinAge {
		return false, nil
	}
	if a == nil {
		a = map[string]string{}
	}
	a[annoForce] = latestUUID(comp)
	comp.SetAnnotations(a)
	_, err := e.comps(comp.GetNamespace()).Update(ctx, comp, metav1.UpdateOptions{})
	return err == nil, ignoreConflict(err)
}

// CleanupCheck is slice cleanup's first look at a slice, through its cache: a slice at least
// 5 s old that no synthesis of its owner references (nor the in-flight one by UUID) is marked
// for the second, live, check. A terminating slice has its finalizers released instead, unless
// it is named by the current synthesis of its owner and that synthesis is not reconciled.
func (e *Eno) CleanupCheck(ctx context.Context, ns, slice string) (bool, error) {
	s, err := e.slicesIn(ns).Get(ctx, slice, metav1.GetOptions{})
	if err != nil {
		return false, ignoreNotFound(err)
	}
	owner := controllerOf(s)
	if owner == "" {
		return false, nil // Eno dereferences it and panics: the slice is never cleaned
	}
	if s.GetDeletionTimestamp() != nil {
		return e.releaseFinalizer(ctx, s, owner)
	}
	if e.Now().Sub(s.GetCreationTimestamp().Time) < CleanupMinAge {
		return false, nil
	}
	comp, err := e.Cache(ns, owner)
	if err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	if shouldDelete(comp, s) {
		e.cleanupIntent[ns+"/"+slice+"/"+string(s.GetUID())] = cleanupCached
		return true, nil
	}
	return false, nil
}

// CleanupConfirm is slice cleanup's second, live, check of a slice CleanupCheck marked. The
// DELETE follows it in the same reconcile (CleanupDelete); they are separate steps here so that
// a schedule can put a write between them.
func (e *Eno) CleanupConfirm(ctx context.Context, ns, slice string) (bool, error) {
	s, err := e.slicesIn(ns).Get(ctx, slice, metav1.GetOptions{})
	if err != nil {
		return false, ignoreNotFound(err)
	}
	key := ns + "/" + slice + "/" + string(s.GetUID())
	if e.cleanupIntent[key] != cleanupCached {
		return false, nil
	}
	comp, err := e.comps(ns).Get(ctx, controllerOf(s), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	if apierrors.IsNotFound(err) {
		comp = nil
	}
	if !shouldDelete(comp, s) {
		delete(e.cleanupIntent, key)
		return false, nil
	}
	e.cleanupIntent[key] = cleanupConfirmed
	return true, nil
}

// CleanupDelete is the DELETE, with a UID precondition, of a slice CleanupConfirm confirmed.
func (e *Eno) CleanupDelete(ctx context.Context, ns, slice string) (bool, error) {
	for key, stage := range e.cleanupIntent {
		if stage != cleanupConfirmed || !strings.HasPrefix(key, ns+"/"+slice+"/") {
			continue
		}
		delete(e.cleanupIntent, key)
		uid := types.UID(strings.TrimPrefix(key, ns+"/"+slice+"/"))
		err := e.slicesIn(ns).Delete(ctx, slice, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		return err == nil, ignoreNotFound(ignoreConflict(err))
	}
	return false, nil
}

type cleanupStage int

const (
	cleanupCached cleanupStage = iota + 1
	cleanupConfirmed
)

// PendingCleanup lists the slices CleanupCheck marked and CleanupDelete has not acted on.
func (e *Eno) PendingCleanup() []string {
	var out []string
	for k := range e.cleanupIntent {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func shouldDelete(comp, s *unstructured.Unstructured) bool {
	if comp == nil {
		return true
	}
	if in := synthesis(comp, "inFlightSynthesis"); in != nil && str(in, "uuid") == str(s.Object["spec"].(map[string]any), "synthesisUUID") {
		return false
	}
	for _, which := range []string{"currentSynthesis", "previousSynthesis"} {
		if slices.Contains(sliceNames(synthesis(comp, which)), s.GetName()) {
			return false
		}
	}
	return true
}

func (e *Eno) releaseFinalizer(ctx context.Context, s *unstructured.Unstructured, owner string) (bool, error) {
	if len(s.GetFinalizers()) == 0 {
		return false, nil
	}
	comp, err := e.comps(s.GetNamespace()).Get(ctx, owner, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	if err == nil {
		cur := synthesis(comp, "currentSynthesis")
		if cur != nil && cur["reconciled"] == nil && slices.Contains(sliceNames(cur), s.GetName()) {
			return false, nil
		}
	}
	patch := []byte(`[{"op": "remove", "path": "/metadata/finalizers"}]`)
	_, err = e.slicesIn(s.GetNamespace()).Patch(ctx, s.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{})
	return err == nil, ignoreNotFound(err)
}

func controllerOf(u *unstructured.Unstructured) string {
	for _, o := range u.GetOwnerReferences() {
		if o.Controller != nil && *o.Controller {
			return o.Name
		}
	}
	return ""
}

// CompositionDeletion is the composition controller on a deleting Composition: once, the
// current synthesis gets a new UUID over the same slices (so every reconciler loads it again,
// now as a deletion); once that synthesis is reconciled, Eno's finalizer is removed.
func (e *Eno) CompositionDeletion(ctx context.Context, ns, name string) (bool, error) {
	comp, err := e.comps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, ignoreNotFound(err)
	}
	if comp.GetDeletionTimestamp() == nil {
		return false, nil
	}
	if cur := synthesis(comp, "currentSynthesis"); cur != nil {
		observed, _, _ := unstructured.NestedInt64(comp.Object, "status", "currentSynthesis", "observedCompositionGeneration")
		if observed != comp.GetGeneration() {
			cur["observedCompositionGeneration"] = comp.GetGeneration()
			cur["uuid"] = e.next("")
			cur["synthesized"] = e.Now().UTC().Format(time.RFC3339)
			delete(cur, "reconciled")
			delete(cur, "ready")
			_ = unstructured.SetNestedMap(comp.Object, cur, "status", "currentSynthesis")
			_, err := e.comps(ns).UpdateStatus(ctx, comp, metav1.UpdateOptions{})
			return err == nil, ignoreConflict(err)
		}
		if cur["reconciled"] == nil {
			return false, nil
		}
	}
	fin := comp.GetFinalizers()
	if !slices.Contains(fin, cleanupFinalizer) {
		return false, nil
	}
	comp.SetFinalizers(slices.DeleteFunc(fin, func(f string) bool { return f == cleanupFinalizer }))
	_, err = e.comps(ns).Update(ctx, comp, metav1.UpdateOptions{})
	return err == nil, ignoreConflict(err)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func manifestHash(s string) uint64 {
	h := fnv.New64()
	h.Write([]byte(s))
	return h.Sum64()
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
