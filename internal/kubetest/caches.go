package kubetest

import (
	"context"
	"errors"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// The caches of tests that wire the adapters by hand, configured as runnable configures
// controller-runtime's: Compositions without managedFields; our inventory Secrets' metadata
// only, selected by our label and type, indexed by lineage.

// Informer runs one client-go informer from Start until its context ends.
type Informer struct {
	inf  cache.SharedIndexInformer
	once sync.Once
	wg   sync.WaitGroup
}

// Informer is the underlying informer.
func (i *Informer) Informer() cache.SharedIndexInformer { return i.inf }

// Start runs the informer until ctx ends; later calls do nothing.
func (i *Informer) Start(ctx context.Context) {
	i.once.Do(func() {
		i.wg.Add(1)
		go func() { defer i.wg.Done(); i.inf.RunWithContext(ctx) }()
	})
}

// WaitForCacheSync blocks until the cache holds the initial list, or ctx ends.
func (i *Informer) WaitForCacheSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), i.inf.HasSynced) {
		return errors.New("the cache did not sync")
	}
	return nil
}

// Wait blocks until the informer started by Start has stopped.
func (i *Informer) Wait() { i.wg.Wait() }

// dropManagedFields is the caches' transform.
func dropManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// CompositionInformer caches the Compositions of namespace ("" for all).
type CompositionInformer struct{ Informer }

// NewCompositionInformer builds the informer without starting it.
func NewCompositionInformer(dyn dynamic.Interface, namespace string) *CompositionInformer {
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, CompositionResource, namespace, 0, cache.Indexers{}, nil).Informer()
	_ = inf.SetTransform(dropManagedFields) // fails only once started
	return &CompositionInformer{Informer{inf: inf}}
}

// Lister reads the cache, for k8s.NewCompositions.
func (i *CompositionInformer) Lister() cache.GenericLister {
	return cache.NewGenericLister(i.inf.GetIndexer(), CompositionResource.GroupResource())
}

// SecretCache caches our inventory Secrets' metadata in namespace; it is a k8s.CachedSecrets.
type SecretCache struct {
	Informer
	namespace string
}

// NewSecretCache builds the cache without starting it.
func NewSecretCache(meta metadata.Interface, namespace string) *SecretCache {
	managed := labels.Set{domain.LabelManagedBy: domain.ManagedByValue}.AsSelector().String()
	ofOurType := fields.OneTermEqualSelector("type", domain.SecretType).String()
	byLineage := func(obj any) ([]string, error) {
		if l, ok := obj.(metav1.Object).GetLabels()[domain.LabelLineage]; ok {
			return []string{l}, nil
		}
		return nil, nil
	}
	inf := metadatainformer.NewFilteredMetadataInformer(meta, corev1.SchemeGroupVersion.WithResource("secrets"), namespace, 0,
		cache.Indexers{"lineage": byLineage},
		func(o *metav1.ListOptions) { o.LabelSelector, o.FieldSelector = managed, ofOurType }).Informer()
	_ = inf.SetTransform(dropManagedFields)
	return &SecretCache{Informer: Informer{inf: inf}, namespace: namespace}
}

// Synced is true once the cache holds the initial list.
func (s *SecretCache) Synced() bool { return s.inf.HasSynced() }

// ListLineage lists the cached Secrets of the lineage.
func (s *SecretCache) ListLineage(lineage string) ([]*metav1.PartialObjectMetadata, error) {
	objs, err := s.inf.GetIndexer().ByIndex("lineage", lineage)
	out := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*metav1.PartialObjectMetadata))
	}
	return out, err
}

// Get is the cached Secret of that name.
func (s *SecretCache) Get(name string) (*metav1.PartialObjectMetadata, bool) {
	obj, ok, err := s.inf.GetIndexer().GetByKey(s.namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*metav1.PartialObjectMetadata), true
}
