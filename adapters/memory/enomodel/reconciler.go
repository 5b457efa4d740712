package enomodel

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Reconciler is one eno-reconciler process: the syntheses it has loaded, by UUID, each loaded
// once per process from the slices as they were then (resource/cache.go, reconstitution.go).
// A restart forgets them all.
type Reconciler struct {
	Name   string
	eno    *Eno
	loaded map[string]*loadedSynthesis
}

type loadedSynthesis struct {
	comp      types.NamespacedName
	resources map[Ref]*loadedResource
}

// loadedResource is one resource of a loaded synthesis: the manifest that won its identity
// (the greatest manifest hash, tree.go) and where it sits.
type loadedResource struct {
	slice              string
	index              int
	manifest           *unstructured.Unstructured
	raw                string
	deleted            bool
	compositionDeleted bool
}

// NewReconciler is a fresh eno-reconciler process.
func (e *Eno) NewReconciler(name string) *Reconciler {
	return &Reconciler{Name: name, eno: e, loaded: map[string]*loadedSynthesis{}}
}

// Restart forgets every loaded synthesis.
func (r *Reconciler) Restart() { r.loaded = map[string]*loadedSynthesis{} }

// Loaded reports whether the process holds the synthesis.
func (r *Reconciler) Loaded(uuid string) bool { _, ok := r.loaded[uuid]; return ok }

// Load is reconstitution: from its cached read of the Composition, the previous synthesis
// first, then the current one, the first not yet loaded is read from its slices live and
// loaded. A synthesis with a named slice missing loads nothing, and the next is tried
// (reconstitution.go ignores NotFound). At most one synthesis per step.
func (r *Reconciler) Load(ctx context.Context, ns, name string) (bool, error) {
	comp, err := r.eno.Cache(ns, name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
syntheses:
	for _, which := range []string{"previousSynthesis", "currentSynthesis"} {
		syn := synthesis(comp, which)
		if syn == nil || syn["synthesized"] == nil || r.Loaded(str(syn, "uuid")) {
			continue
		}
		l := &loadedSynthesis{comp: types.NamespacedName{Namespace: ns, Name: name}, resources: map[Ref]*loadedResource{}}
		hashes := map[Ref]uint64{}
		for _, n := range sliceNames(syn) {
			s, err := r.eno.slicesIn(ns).Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue syntheses // populateCache ignores NotFound: this one loads nothing, the next is tried
			}
			if err != nil {
				return false, err
			}
			items, _, _ := unstructured.NestedSlice(s.Object, "spec", "resources")
			for i, it := range items {
				m, _ := it.(map[string]any)
				raw := str(m, "manifest")
				obj, err := parseManifest(raw)
				if err != nil {
					return false, nil // "invalid resource - cannot load into cache": nothing loads
				}
				ref := RefOf(obj)
				if h, ok := hashes[ref]; ok && manifestHash(raw) < h {
					continue
				}
				hashes[ref] = manifestHash(raw)
				deleted, _ := m["deleted"].(bool)
				delete(obj.Object, "status")
				l.resources[ref] = &loadedResource{slice: n, index: i, manifest: obj, raw: raw, deleted: deleted,
					compositionDeleted: comp.GetDeletionTimestamp() != nil}
			}
		}
		r.loaded[str(syn, "uuid")] = l
		return true, nil
	}
	return false, nil
}

// Pending lists the resources of the current synthesis (by the process's cached Composition)
// that this process holds, in a stable order.
func (r *Reconciler) Pending(ns, name string) []Ref {
	comp, err := r.eno.Cache(ns, name)
	if err != nil {
		return nil
	}
	l := r.loaded[str(synthesis(comp, "currentSynthesis"), "uuid")]
	if l == nil {
		return nil
	}
	var out []Ref
	for ref := range l.resources {
		out = append(out, ref)
	}
	slices.SortFunc(out, func(a, b Ref) int {
		if a.String() < b.String() {
			return -1
		}
		if a.String() > b.String() {
			return 1
		}
		return 0
	})
	return out
}

// Action is what one reconcile of a resource did.
type Action string

const (
	ActionNone     Action = "none"
	ActionDeleted  Action = "deleted"
	ActionApplied  Action = "applied"
	ActionDisabled Action = "disabled"
	ActionStatus   Action = "status"
)

// ReconcileResource is the reconciliation controller on one resource of the current synthesis
// of the Composition as its cache shows it: a live GET of the object, the overrides applied
// against it, then disable-reconciliation read (the resource's own value first, the
// Composition's as fallback). A deletion (a tombstone, or every resource of a deleting
// Composition) of an object that exists and is not terminating is a plain DELETE, unless the
// resource is orphaned by a deleting Composition; otherwise the slice status records the
// resource reconciled. Anything else is created or updated with Eno's field manager.
func (r *Reconciler) ReconcileResource(ctx context.Context, ns, name string, ref Ref) (Action, error) {
	comp, err := r.eno.Cache(ns, name)
	if err != nil {
		return ActionNone, ignoreNotFound(err)
	}
	l := r.loaded[str(synthesis(comp, "currentSynthesis"), "uuid")]
	if l == nil || l.resources[ref] == nil {
		return ActionNone, nil
	}
	res := l.resources[ref]
	gvr, namespaced, ok := r.eno.Map(res.manifest.GroupVersionKind())
	if !ok {
		return ActionNone, nil // no kind match: nothing to do yet
	}
	client := r.eno.Downstream.Resource(gvr)
	var ri interface {
		Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
	} = client
	if namespaced {
		ri = client.Namespace(ref.Namespace)
	}
	current, err := ri.Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		current, err = nil, nil
	}
	if err != nil {
		return ActionNone, err
	}
	snap, outcomes := ApplyOverrides(res.manifest, current, comp)
	if slices.Contains(outcomes, OverridePanics) {
		return ActionNone, fmt.Errorf("reconciling %s: the override has no path", ref)
	}
	disable := cascade(comp, snap, annoDisable) == "true"
	orphan := cascade(comp, snap, annoStrategy) == "orphan"
	deleted := res.compositionDeleted || res.deleted || disable
	switch {
	case disable:
		return r.status(r.markReconciled(ctx, ns, res, true))
	case deleted:
		if current == nil || current.GetDeletionTimestamp() != nil || (orphan && comp.GetDeletionTimestamp() != nil) {
			return r.status(r.markReconciled(ctx, ns, res, true))
		}
		var del interface {
			Delete(context.Context, string, metav1.DeleteOptions, ...string) error
		} = client
		if namespaced {
			del = client.Namespace(ref.Namespace)
		}
		if err := del.Delete(ctx, ref.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return ActionNone, err
		}
		return ActionDeleted, nil
	}
	desired := snap.DeepCopy()
	desired.SetAnnotations(pruneEno(desired.GetAnnotations()))
	desired.SetLabels(pruneEno(desired.GetLabels()))
	opts := metav1.CreateOptions{FieldManager: "eno"}
	if current == nil {
		var cr interface {
			Create(context.Context, *unstructured.Unstructured, metav1.CreateOptions, ...string) (*unstructured.Unstructured, error)
		} = client
		if namespaced {
			cr = client.Namespace(ref.Namespace)
		}
		if _, err := cr.Create(ctx, desired, opts); err != nil {
			return ActionNone, ignoreAlreadyExists(err)
		}
		return ActionApplied, nil
	}
	if !sameContent(current, desired) {
		desired.SetResourceVersion(current.GetResourceVersion())
		desired.SetUID(current.GetUID())
		// Eno applies server-side: labels and annotations another manager set stay.
		desired.SetLabels(overlay(current.GetLabels(), desired.GetLabels()))
		desired.SetAnnotations(overlay(current.GetAnnotations(), desired.GetAnnotations()))
		var up interface {
			Update(context.Context, *unstructured.Unstructured, metav1.UpdateOptions, ...string) (*unstructured.Unstructured, error)
		} = client
		if namespaced {
			up = client.Namespace(ref.Namespace)
		}
		if _, err := up.Update(ctx, desired, metav1.UpdateOptions{FieldManager: "eno"}); err != nil {
			return ActionNone, ignoreConflict(err)
		}
		return ActionApplied, nil
	}
	if r.eno.InSync != nil {
		r.eno.InSync(ref, current.GetUID())
	}
	return r.status(r.markReady(ctx, ns, res))
}

// status is ActionStatus when the slice status changed, ActionNone when it already said so.
func (r *Reconciler) status(changed bool, err error) (Action, error) {
	if changed {
		return ActionStatus, err
	}
	return ActionNone, err
}

// sameContent compares what Eno would apply: labels, annotations and the top-level fields
// other than metadata and status.
func sameContent(current, desired *unstructured.Unstructured) bool {
	for k, v := range desired.GetLabels() {
		if current.GetLabels()[k] != v {
			return false
		}
	}
	for k, v := range desired.GetAnnotations() {
		if current.GetAnnotations()[k] != v {
			return false
		}
	}
	for k, v := range desired.Object {
		if k == "metadata" || k == "status" || k == "apiVersion" || k == "kind" {
			continue
		}
		if mustJSON(current.Object[k]) != mustJSON(v) {
			return false
		}
	}
	return true
}

// overlay is base with over's keys set over it.
func overlay(base, over map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

func pruneEno(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if len(k) < len("eno.azure.io/") || k[:len("eno.azure.io/")] != "eno.azure.io/" {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func ignoreAlreadyExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// cascade is cascadeAnnotation: the resource's own value, present at all, wins; the
// Composition's is the fallback.
func cascade(comp, res *unstructured.Unstructured, key string) string {
	if v, ok := res.GetAnnotations()[key]; ok {
		return v
	}
	return comp.GetAnnotations()[key]
}

func (r *Reconciler) markReconciled(ctx context.Context, ns string, res *loadedResource, deleted bool) (bool, error) {
	return r.writeState(ctx, ns, res, map[string]any{"reconciled": true, "deleted": deleted,
		"ready": r.eno.Now().UTC().Format(time.RFC3339)})
}

func (r *Reconciler) markReady(ctx context.Context, ns string, res *loadedResource) (bool, error) {
	return r.writeState(ctx, ns, res, map[string]any{"reconciled": true, "ready": r.eno.Now().UTC().Format(time.RFC3339)})
}

// writeState patches the slice status at the resource's position, sizing the list to the
// slice's resources as Eno's write buffer does. A slice that is gone takes no status. The
// ready time is kept once set, so that a repeated reconcile changes nothing.
func (r *Reconciler) writeState(ctx context.Context, ns string, res *loadedResource, state map[string]any) (bool, error) {
	s, err := r.eno.slicesIn(ns).Get(ctx, res.slice, metav1.GetOptions{})
	if err != nil {
		return false, ignoreNotFound(err)
	}
	items, _, _ := unstructured.NestedSlice(s.Object, "spec", "resources")
	states, _, _ := unstructured.NestedSlice(s.Object, "status", "resources")
	for len(states) < len(items) {
		states = append(states, map[string]any{})
	}
	if res.index >= len(states) {
		return false, nil
	}
	if old, _ := states[res.index].(map[string]any); old != nil && old["ready"] != nil {
		state["ready"] = old["ready"]
	}
	if mustJSON(states[res.index]) == mustJSON(state) {
		return false, nil
	}
	states[res.index] = state
	if err := unstructured.SetNestedSlice(s.Object, states, "status", "resources"); err != nil {
		return false, err
	}
	_, err = r.eno.slicesIn(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{})
	return err == nil, ignoreNotFound(ignoreConflict(err))
}
