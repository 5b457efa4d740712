package sim

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// view is the API as it was at one revision.
type view interface {
	Get(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error)
	List(gvr schema.GroupVersionResource, namespace string) ([]*unstructured.Unstructured, error)
}

var secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// staleLister is a replica's Composition cache: the informer's lister as it serves a view some
// writes old, through the standalone cache's transform (k8s.CompositionAsRead).
type staleLister struct {
	view func() view
	ns   string
	// shard, when set, is the only namespace the informer watches (--composition-namespace).
	shard string
}

var _ cache.GenericLister = (*staleLister)(nil)

func (l *staleLister) List(selector labels.Selector) ([]runtime.Object, error) {
	ns := l.ns
	if l.shard != "" {
		if ns != "" && ns != l.shard {
			return nil, nil
		}
		ns = l.shard
	}
	items, err := l.view().List(enomodel.CompositionGVR, ns)
	if err != nil {
		return nil, err
	}
	var out []runtime.Object
	for _, u := range items {
		if selector.Matches(labels.Set(u.GetLabels())) {
			c, _ := k8s.CompositionAsRead(u.DeepCopy())
			out = append(out, c.(runtime.Object))
		}
	}
	return out, nil
}

func (l *staleLister) Get(name string) (runtime.Object, error) {
	if l.shard != "" && l.ns != l.shard {
		return nil, notFound(enomodel.CompositionGVR, name)
	}
	u, err := l.view().Get(enomodel.CompositionGVR, l.ns, name)
	if err != nil {
		return nil, err
	}
	c, _ := k8s.CompositionAsRead(u.DeepCopy())
	return c.(runtime.Object), nil
}

func (l *staleLister) ByNamespace(ns string) cache.GenericNamespaceLister {
	return &staleLister{view: l.view, ns: ns, shard: l.shard}
}

// staleChunks is the SecretStore with its cache of our Secrets' metadata serving a view some
// writes old; every live read and write is the real store's.
type staleChunks struct {
	*k8s.SecretStore
	view func() view
}

func (s *staleChunks) ListCachedChunks(_ context.Context, lineage domain.Lineage) ([]domain.ChunkSecret, error) {
	items, err := s.view().List(secretsGVR, domain.DefaultInventoryNamespace)
	if err != nil {
		return nil, err
	}
	var out []domain.ChunkSecret
	for _, u := range items {
		typ, _, _ := unstructured.NestedString(u.Object, "type")
		l := u.GetLabels()
		if typ != domain.SecretType || l[domain.LabelManagedBy] != domain.ManagedByValue || l[domain.LabelLineage] != lineage.String() {
			continue
		}
		out = append(out, domain.ChunkSecret{Namespace: u.GetNamespace(), Name: u.GetName(), Type: typ,
			Labels: u.GetLabels(), Annotations: u.GetAnnotations(), ResourceVersion: u.GetResourceVersion()})
	}
	return out, nil
}

func notFound(gvr schema.GroupVersionResource, name string) error {
	return apierrors.NewNotFound(gvr.GroupResource(), name)
}
