package apiserver

import (
	"context"
	"errors"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// Client is a dynamic client of manager served in process (the methods of direct.go): no HTTP,
// no JSON and no Intercept, for a model's own requests. A write's field manager is its options',
// else manager. Watch, DeleteCollection and server-side apply are not served.
func (s *Server) Client(manager string) dynamic.Interface { return client{s: s, manager: manager} }

type client struct {
	s       *Server
	manager string
}

var errNotInProcess = errors.New("apiserver: not served in process")

func (c client) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	res, _ := c.s.resource(gvr.Group, gvr.Resource) // unserved: every call answers NotFound
	return resourceClient{client: c, res: res}
}

type resourceClient struct {
	client
	res Resource
	ns  string
}

func (r resourceClient) Namespace(ns string) dynamic.ResourceInterface { r.ns = ns; return r }

func (r resourceClient) writer(fieldManager string) string {
	if fieldManager != "" {
		return fieldManager
	}
	return r.manager
}

// inNamespace is obj in the client's namespace, as the URL would put it.
func (r resourceClient) inNamespace(obj *unstructured.Unstructured) *unstructured.Unstructured {
	obj = obj.DeepCopy()
	if r.res.Namespaced && r.ns != "" {
		obj.SetNamespace(r.ns)
	}
	return obj
}

func (r resourceClient) Get(_ context.Context, name string, _ metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	if len(sub) > 0 {
		return nil, errNotInProcess
	}
	return r.s.Get(r.res, r.ns, name)
}

func (r resourceClient) List(_ context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return r.s.List(r.res, r.ns, opts)
}

func (r resourceClient) Create(_ context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	if len(sub) > 0 {
		return nil, errNotInProcess
	}
	return r.s.Create(r.writer(opts.FieldManager), r.inNamespace(obj))
}

func (r resourceClient) Update(_ context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, sub ...string) (*unstructured.Unstructured, error) {
	if len(sub) > 0 {
		return r.UpdateStatus(context.Background(), obj, opts)
	}
	return r.s.Update(r.writer(opts.FieldManager), r.inNamespace(obj))
}

func (r resourceClient) UpdateStatus(_ context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	return r.s.UpdateStatus(r.writer(opts.FieldManager), r.inNamespace(obj))
}

func (r resourceClient) Delete(_ context.Context, name string, opts metav1.DeleteOptions, _ ...string) error {
	_, err := r.s.Delete(r.manager, r.res, r.ns, name, opts)
	return err
}

func (r resourceClient) Patch(_ context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	return r.s.Patch(r.writer(opts.FieldManager), r.res, r.ns, name, pt, data, strings.Join(sub, ""))
}

func (r resourceClient) DeleteCollection(context.Context, metav1.DeleteOptions, metav1.ListOptions) error {
	return errNotInProcess
}

func (r resourceClient) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, errNotInProcess
}

func (r resourceClient) Apply(context.Context, string, *unstructured.Unstructured, metav1.ApplyOptions, ...string) (*unstructured.Unstructured, error) {
	return nil, errNotInProcess
}

func (r resourceClient) ApplyStatus(context.Context, string, *unstructured.Unstructured, metav1.ApplyOptions) (*unstructured.Unstructured, error) {
	return nil, errNotInProcess
}
