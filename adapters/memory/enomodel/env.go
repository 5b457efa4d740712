package enomodel

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/apiserver"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Env is one in-memory API server serving both Eno's control plane and the downstream cluster,
// with Eno on it: one eno-reconciler process and a Composition cache that never lags. Each
// method runs one of Eno's moves to its end (a synthesis, a reconcile, a deletion), for a story
// told step by step, where the simulation schedules Eno's steps one at a time.
type Env struct {
	Server     *apiserver.Server
	Eno        *Eno
	Reconciler *Reconciler
	// Downstream are the kinds Objects lists.
	Downstream []apiserver.Resource
	// Intercept, when set, judges each HTTP request (apiserver.Options.Intercept): a story's
	// faults.
	Intercept func(apiserver.Request) apiserver.Verdict

	admin        dynamic.Interface
	synthesizers int
}

// NewEnv serves Eno's kinds and, downstream, Secrets, ConfigMaps, Services, Deployments,
// CronJobs and ClusterRoles; every time stamp is now's.
func NewEnv(now func() time.Time) *Env {
	downstream := []apiserver.Resource{apiserver.Secrets, apiserver.ConfigMaps, apiserver.Services, apiserver.Deployments, apiserver.CronJobs, apiserver.ClusterRoles}
	resources := append([]apiserver.Resource{apiserver.Compositions, apiserver.ResourceSlices, apiserver.Namespaces, apiserver.Events}, downstream...)
	e := &Env{Downstream: downstream}
	s := apiserver.New(apiserver.Options{Clock: now, Resources: resources, Seed: 1, Intercept: func(r apiserver.Request) apiserver.Verdict {
		if e.Intercept != nil {
			return e.Intercept(r)
		}
		return apiserver.Proceed
	}})
	mapper := func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, bool) {
		for _, r := range downstream {
			if r.GroupVersionKind() == gvk {
				return r.GroupVersionResource(), r.Namespaced, true
			}
		}
		return schema.GroupVersionResource{}, false, false
	}
	cache := func(ns, name string) (*unstructured.Unstructured, error) {
		return s.Get(apiserver.Compositions, ns, name)
	}
	e.Server, e.Eno, e.admin = s, NewEno(s.Client("eno"), s.Client("eno"), cache, mapper, now), s.Client("kubectl")
	e.Reconciler = e.Eno.NewReconciler("eno-reconciler")
	return e
}

func (e *Env) comps(ns string) dynamic.ResourceInterface {
	return e.admin.Resource(CompositionGVR).Namespace(ns)
}

// CreateComposition creates the Composition as its owner does: with annotations, a synthesizer
// and Eno's finalizer, in its namespace (created if missing, for the downstream objects too).
// Eno has not synthesized it yet.
func (e *Env) CreateComposition(ctx context.Context, ref domain.CompositionRef, annotations map[string]string) error {
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ref.Namespace}}}
	if _, err := e.admin.Resource(apiserver.Namespaces.GroupVersionResource()).Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eno.azure.io/v1", "kind": "Composition",
		"metadata": map[string]any{"namespace": ref.Namespace, "name": ref.Name, "finalizers": []any{cleanupFinalizer}},
		"spec":     map[string]any{"synthesizer": map[string]any{"name": "synthesizer"}},
	}}
	u.SetAnnotations(annotations)
	_, err := e.comps(ref.Namespace).Create(ctx, u, metav1.CreateOptions{})
	return err
}

// Annotate sets one annotation of the Composition, as an operator's kubectl does.
func (e *Env) Annotate(ctx context.Context, ref domain.CompositionRef, key, value string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	_, err := e.comps(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// Synthesize makes the Composition's synthesizer produce outputs from now on, and lets Eno
// synthesize it (Follow). A Composition Eno synthesized before gets a new synthesizer, so that
// its generation moves: what makes Eno synthesize it again.
func (e *Env) Synthesize(ctx context.Context, ref domain.CompositionRef, outputs ...*unstructured.Unstructured) error {
	comp, err := e.comps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	e.Eno.Outputs[comp.GetUID()] = outputs
	if synthesis(comp, "currentSynthesis") != nil {
		e.synthesizers++
		patch := fmt.Sprintf(`{"spec":{"synthesizer":{"name":"synthesizer-%d"}}}`, e.synthesizers)
		if _, err := e.comps(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	// Eno's scheduler requeues a dispatch whose status write conflicts with another writer's (the
	// controllers' annotations): Follow reports that as nothing done, so it is tried again.
	for range 10 {
		if did, err := e.Follow(ctx, ref); err != nil || did {
			return err
		}
	}
	return fmt.Errorf("synthesizing %s: Eno did not", ref)
}

// Follow is Eno's scheduler and executor on the Composition: a synthesis is dispatched if one is
// due (none yet, a new generation, or force-resynthesis naming the latest synthesis), and the
// synthesis in flight (one an earlier conflict left there too) executed, carrying the current
// synthesis's unreconciled tombstones. It reports whether one was executed.
func (e *Env) Follow(ctx context.Context, ref domain.CompositionRef) (bool, error) {
	if _, err := e.Eno.Dispatch(ctx, ref.Namespace, ref.Name); err != nil {
		return false, err
	}
	return e.Eno.Execute(ctx, ref.Namespace, ref.Name)
}

// Reconcile runs eno-reconciler, the slice status and composition controllers on the
// Composition, slice cleanup on its namespace and the garbage collector, until nothing changes:
// each synthesis loaded, each resource of the current one applied or deleted, its slices'
// statuses aggregated (an applied synthesis is Ready); a deleting Composition's deletion
// reconciled, its finalizer released and its slices collected; slices of the namespace that no
// synthesis names, 5 s old, deleted. Eno's requests are served in process (Server.Client).
func (e *Env) Reconcile(ctx context.Context, ref domain.CompositionRef) error {
	ns, name := ref.Namespace, ref.Name
	for range 100 {
		changed, err := e.Reconciler.Load(ctx, ns, name)
		if err != nil {
			return err
		}
		for _, r := range e.Reconciler.Pending(ns, name) {
			a, err := e.Reconciler.ReconcileResource(ctx, ns, name, r)
			if err != nil {
				return err
			}
			changed = changed || a != ActionNone
		}
		for _, step := range []func(context.Context, string, string) (bool, error){e.Eno.SliceStatus, e.Eno.CompositionDeletion} {
			did, err := step(ctx, ns, name)
			if err != nil {
				return err
			}
			changed = changed || did
		}
		for _, s := range e.Server.Names(apiserver.ResourceSlices) {
			if s.Namespace != ns {
				continue
			}
			for _, step := range []func(context.Context, string, string) (bool, error){e.Eno.CleanupCheck, e.Eno.CleanupConfirm, e.Eno.CleanupDelete} {
				did, err := step(ctx, s.Namespace, s.Name)
				if err != nil {
					return err
				}
				changed = changed || did
			}
		}
		if len(e.Server.CollectGarbage()) == 0 && !changed {
			return nil
		}
	}
	return fmt.Errorf("reconciling %s: Eno does not settle", ref)
}

// DeleteOrphaning deletes the Composition as its owner does with
// eno.azure.io/deletion-strategy=orphan, and lets Eno reconcile the deletion (Reconcile): every
// object it applied stays downstream.
func (e *Env) DeleteOrphaning(ctx context.Context, ref domain.CompositionRef) error {
	if err := e.Annotate(ctx, ref, annoStrategy, "orphan"); err != nil {
		return err
	}
	if err := e.comps(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return e.Reconcile(ctx, ref)
}

// Objects lists the identity of every object downstream, in canonical order.
func (e *Env) Objects() []domain.ResourceID {
	var out []domain.ResourceID
	for _, res := range e.Downstream {
		list, err := e.Server.List(res, "", metav1.ListOptions{})
		if err != nil {
			panic(err) // a served resource: never
		}
		for _, u := range list.Items {
			out = append(out, domain.ResourceID{Group: res.Group, Kind: res.Kind, Namespace: u.GetNamespace(), Name: u.GetName()})
		}
	}
	slices.SortFunc(out, domain.ResourceID.Compare)
	return out
}

// Fleet is the fleet index of informers that are never behind.
func (e *Env) Fleet() Fleet {
	return Fleet{View: func() apiserver.View { return e.Server.ViewAt(e.Server.Revision()) }}
}
