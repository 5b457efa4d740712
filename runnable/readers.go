package runnable

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
)

// lineageField is the index of the cached inventory Secrets by lineage label.
const lineageField = "tombstone-recovery.lineage"

// compositionGV is Eno's Composition's group and version, read without importing Eno.
var compositionGV = k8s.CompositionGVR.GroupVersion()

// cachedCompositions is the client-go lister adapters/k8s reads the host's cached Compositions
// through (only runnable and cmd may import controller-runtime). obj and list are empty prototypes
// of the host's typed Compositions (adapters/k8s converts them). The objects read are the cache's
// own: the adapter copies what it keeps and never mutates them.
type cachedCompositions struct {
	cache cache.Cache
	obj   client.Object
	list  client.ObjectList
	// scope is the cache's namespace, "" for all; namespace is the one ByNamespace chose.
	scope, namespace string
}

// object is a new empty Composition of the cache's kind.
func (l cachedCompositions) object() client.Object { return l.obj.DeepCopyObject().(client.Object) }

func (l cachedCompositions) List(selector labels.Selector) ([]runtime.Object, error) {
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: selector}}
	if l.namespace != "" {
		if l.scope != "" && l.namespace != l.scope {
			return nil, nil
		}
		opts = append(opts, client.InNamespace(l.namespace))
	}
	list := l.list.DeepCopyObject().(client.ObjectList)
	if err := l.cache.List(context.Background(), list, opts...); err != nil {
		return nil, err
	}
	return meta.ExtractList(list)
}

// Get reads the cached Composition. One outside the cache's namespace is NotFound, as a
// client-go lister says: a namespaced controller-runtime cache refuses the read instead.
func (l cachedCompositions) Get(name string) (runtime.Object, error) {
	if l.scope != "" && l.namespace != l.scope {
		return nil, apierrors.NewNotFound(k8s.CompositionGVR.GroupResource(), name)
	}
	obj := l.object()
	return obj, l.cache.Get(context.Background(), client.ObjectKey{Namespace: l.namespace, Name: name}, obj)
}

func (l cachedCompositions) ByNamespace(namespace string) toolscache.GenericNamespaceLister {
	l.namespace = namespace
	return l
}

// cachedSecrets is the downstream cache of our inventory Secrets' metadata the SecretStore reads.
type cachedSecrets struct {
	cache     cache.Cache
	informer  cache.Informer
	namespace string
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
	return m, s.cache.Get(context.Background(), client.ObjectKey{Namespace: s.namespace, Name: name}, m) == nil
}
