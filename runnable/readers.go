package runnable

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
)

// lineageField is the index of the cached inventory Secrets by lineage label.
const lineageField = "tombstone-recovery.lineage"

// compositionLister is the lister adapters/k8s reads cached Compositions through, over the
// controller's Composition cache. The cache hands out its own objects (UnsafeDisableDeepCopy):
// the adapter copies what it keeps and never mutates them.
type compositionLister struct {
	reader client.Reader
	// scope is the cache's namespace, "" for all; namespace is the one ByNamespace chose.
	scope, namespace string
}

var _ toolscache.GenericLister = compositionLister{}

func (l compositionLister) List(selector labels.Selector) ([]runtime.Object, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(compositionObject().GroupVersionKind())
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: selector}}
	if l.namespace != "" {
		if l.scope != "" && l.namespace != l.scope {
			return nil, nil
		}
		opts = append(opts, client.InNamespace(l.namespace))
	}
	if err := l.reader.List(context.Background(), list, opts...); err != nil {
		return nil, err
	}
	out := make([]runtime.Object, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// Get reads the cached Composition. One outside the cache's namespace is NotFound, as a
// client-go lister says: a namespaced controller-runtime cache refuses the read instead.
func (l compositionLister) Get(name string) (runtime.Object, error) {
	if l.scope != "" && l.namespace != l.scope {
		return nil, apierrors.NewNotFound(k8s.CompositionGVR.GroupResource(), name)
	}
	u := compositionObject()
	if err := l.reader.Get(context.Background(), client.ObjectKey{Namespace: l.namespace, Name: name}, u); err != nil {
		return nil, err
	}
	return u, nil
}

func (l compositionLister) ByNamespace(namespace string) toolscache.GenericNamespaceLister {
	return compositionLister{reader: l.reader, scope: l.scope, namespace: namespace}
}

// cachedSecrets is the cache of our inventory Secrets' metadata the SecretStore reads, over the
// downstream cluster's cache.
type cachedSecrets struct {
	cache     cache.Cache
	informer  cache.Informer
	namespace string
}

var _ k8s.CachedSecrets = (*cachedSecrets)(nil)

// newCachedSecrets indexes the downstream cache by lineage; call it before the cache starts.
func newCachedSecrets(ctx context.Context, c cache.Cache, namespace string) (*cachedSecrets, error) {
	if err := c.IndexField(ctx, secretObject(), lineageField, func(o client.Object) []string { return k8s.LineageOf(o) }); err != nil {
		return nil, fmt.Errorf("indexing the inventory secrets by lineage: %w", err)
	}
	inf, err := c.GetInformer(ctx, secretObject(), cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("building the inventory secret informer: %w", err)
	}
	return &cachedSecrets{cache: c, informer: inf, namespace: namespace}, nil
}

func (s *cachedSecrets) Synced() bool { return s.informer.HasSynced() }

func (s *cachedSecrets) ListLineage(lineage string) ([]*metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(secretObject().GroupVersionKind())
	if err := s.cache.List(context.Background(), list, client.InNamespace(s.namespace), client.MatchingFields{lineageField: lineage}); err != nil {
		return nil, err
	}
	out := make([]*metav1.PartialObjectMetadata, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (s *cachedSecrets) Get(name string) (*metav1.PartialObjectMetadata, bool) {
	m := secretObject()
	if err := s.cache.Get(context.Background(), client.ObjectKey{Namespace: s.namespace, Name: name}, m); err != nil {
		return nil, false
	}
	return m, true
}

// count is the number of Secrets the cache holds; 0 until it has synced.
func (s *cachedSecrets) count() int {
	if !s.Synced() {
		return 0
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(secretObject().GroupVersionKind())
	if err := s.cache.List(context.Background(), list, client.InNamespace(s.namespace)); err != nil {
		return 0
	}
	return len(list.Items)
}

// count is the number of Compositions l's cache holds; 0 until synced says it has synced.
func (l compositionLister) count(synced func() bool) int {
	if !synced() {
		return 0
	}
	objs, err := l.List(labels.Everything())
	if err != nil {
		return 0
	}
	return len(objs)
}
