package sim

import (
	"context"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/apiserver"
)

// Widgets are a custom resource served downstream, for stories with a CRD among the tombstones.
var Widgets = apiserver.Resource{Group: "example.com", Version: "v1", Resource: "widgets", Kind: "Widget", Namespaced: true}

var (
	controlPlaneResources = []apiserver.Resource{apiserver.Compositions, apiserver.ResourceSlices, apiserver.Namespaces, apiserver.Events}
	downstreamResources   = []apiserver.Resource{apiserver.Secrets, apiserver.ConfigMaps, apiserver.Namespaces,
		apiserver.Events, apiserver.CustomResourceDefinitions, Widgets}
)

// cluster is one in-memory API server as the world uses it.
type cluster struct {
	*apiserver.Server
	resources []apiserver.Resource
	// intercepted: the ground truth logs each write request (downstream), so writes go over HTTP.
	intercepted bool
}

func newCluster(opts apiserver.Options) cluster {
	return cluster{Server: apiserver.New(opts), resources: opts.Resources, intercepted: opts.Intercept != nil}
}

// Client is a dynamic client acting as manager.
func (c cluster) Client(manager string) dynamic.Interface {
	return must(dynamic.NewForConfig(c.RESTConfig(manager)))
}

// RESTConfig is the server's config for manager.
func (c cluster) RESTConfig(manager string) *rest.Config { return c.Server.RESTConfig(manager) }

// ViewAt is the cluster as it was at rev.
func (c cluster) ViewAt(rev int64) view { return revView{v: c.Server.ViewAt(rev), c: c} }

type revView struct {
	v apiserver.View
	c cluster
}

func (r revView) resource(gvr schema.GroupVersionResource) apiserver.Resource {
	for _, res := range r.c.resources {
		if res.GroupVersionResource() == gvr {
			return res
		}
	}
	panic("sim: the cluster does not serve " + gvr.String())
}

func (r revView) Get(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	return r.v.Get(r.resource(gvr), namespace, name)
}

func (r revView) List(gvr schema.GroupVersionResource, namespace string) ([]*unstructured.Unstructured, error) {
	list, err := r.v.List(r.resource(gvr), namespace, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// deletedObject is what a garbage collector or namespace controller removed.
type deletedObject struct {
	GVR             schema.GroupVersionResource
	Namespace, Name string
	Object          *unstructured.Unstructured
}

func (d deletedObject) String() string {
	return d.GVR.Resource + " " + d.Namespace + "/" + d.Name
}

// Collect runs the garbage collector, the namespace controller and the CRD finalizer once.
func (c cluster) Collect() []deletedObject {
	var out []deletedObject
	for _, batch := range [][]*unstructured.Unstructured{c.CollectGarbage(), c.FinishNamespaceDeletion(), c.FinishCRDDeletion()} {
		for _, u := range batch {
			gvk := u.GroupVersionKind()
			var gvr schema.GroupVersionResource
			for _, res := range c.resources {
				if res.GroupVersionKind() == gvk {
					gvr = res.GroupVersionResource()
				}
			}
			out = append(out, deletedObject{GVR: gvr, Namespace: u.GetNamespace(), Name: u.GetName(), Object: u})
		}
	}
	return out
}

// DirectReads is a dynamic client of manager whose reads are served by the server in process,
// with no HTTP round trip and no JSON. Its writes go over HTTP as any client's where the
// ground truth logs every write request (downstream), else in process too. Eno's model, the
// adversaries and the oracle use it; the replicas never do: they run the real adapters over
// HTTP.
func (c cluster) DirectReads(manager string, transport func(http.RoundTripper) http.RoundTripper) dynamic.Interface {
	cfg := rest.CopyConfig(c.RESTConfig(manager))
	if transport != nil {
		cfg.Transport = transport(cfg.Transport)
	}
	return directReads{Interface: must(dynamic.NewForConfig(cfg)), c: c, manager: manager}
}

type directReads struct {
	dynamic.Interface
	c       cluster
	manager string
}

func (d directReads) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	for _, res := range d.c.resources {
		if res.GroupVersionResource() == gvr {
			r := directResource{NamespaceableResourceInterface: d.Interface.Resource(gvr), ri: d.Interface.Resource(gvr), s: d.c.Server, res: res}
			if !d.c.intercepted {
				r.manager = d.manager
			}
			return r
		}
	}
	return d.Interface.Resource(gvr)
}

type directResource struct {
	dynamic.NamespaceableResourceInterface
	ri  dynamic.ResourceInterface
	s   *apiserver.Server
	res apiserver.Resource
	ns  string
	// manager, when set, writes in process as this field manager; else writes go over HTTP.
	manager string
}

func (r directResource) Namespace(ns string) dynamic.ResourceInterface {
	return directNamespaced{directResource{NamespaceableResourceInterface: r.NamespaceableResourceInterface, ri: r.NamespaceableResourceInterface.Namespace(ns), s: r.s, res: r.res, ns: ns, manager: r.manager}}
}

// writer is the field manager of an in-process write: the options' field manager, else the
// client's.
func (r directResource) writer(fieldManager string) string {
	if fieldManager != "" {
		return fieldManager
	}
	return r.manager
}

// inNamespace is obj in the client's namespace, as the URL would put it.
func (r directResource) inNamespace(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if ns := obj.GetNamespace(); r.res.Namespaced && ns != "" && ns != r.ns {
		return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	obj = obj.DeepCopy()
	if r.res.Namespaced {
		obj.SetNamespace(r.ns)
	}
	return obj, nil
}

func (r directResource) Get(ctx context.Context, name string, opts metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	if len(sub) > 0 {
		return r.ri.Get(ctx, name, opts, sub...)
	}
	return r.s.Get(r.res, r.ns, name)
}

func (r directResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return r.s.List(r.res, r.ns, opts)
}

// directNamespaced is a directResource in one namespace: its writes are the namespaced
// client's.
type directNamespaced struct{ directResource }

func (r directNamespaced) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	if r.manager == "" || len(sub) > 0 || len(opts.DryRun) > 0 {
		return r.ri.Create(ctx, obj, opts, sub...)
	}
	obj, err := r.inNamespace(obj)
	if err != nil {
		return nil, err
	}
	return r.s.Create(r.writer(opts.FieldManager), obj)
}

func (r directNamespaced) Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, sub ...string) (*unstructured.Unstructured, error) {
	if r.manager == "" || len(sub) > 0 || len(opts.DryRun) > 0 {
		return r.ri.Update(ctx, obj, opts, sub...)
	}
	obj, err := r.inNamespace(obj)
	if err != nil {
		return nil, err
	}
	return r.s.Update(r.writer(opts.FieldManager), obj)
}

func (r directNamespaced) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	if r.manager == "" || len(opts.DryRun) > 0 {
		return r.ri.UpdateStatus(ctx, obj, opts)
	}
	obj, err := r.inNamespace(obj)
	if err != nil {
		return nil, err
	}
	return r.s.UpdateStatus(r.writer(opts.FieldManager), obj)
}

func (r directNamespaced) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, sub ...string) error {
	if r.manager == "" || len(sub) > 0 || len(opts.DryRun) > 0 {
		return r.ri.Delete(ctx, name, opts, sub...)
	}
	_, err := r.s.Delete(r.manager, r.res, r.ns, name, opts)
	return err
}

func (r directNamespaced) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	if r.manager == "" || len(opts.DryRun) > 0 || len(sub) > 1 {
		return r.ri.Patch(ctx, name, pt, data, opts, sub...)
	}
	return r.s.Patch(r.writer(opts.FieldManager), r.res, r.ns, name, pt, data, strings.Join(sub, ""))
}
