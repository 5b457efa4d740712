package k8s

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
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

// The caches the tests read through, as runnable configures controller-runtime's: Compositions
// as read (CompositionAsRead); our Secrets' metadata only, selected by our label and type.

// startCompositionInformer runs a Composition informer over namespace until the returned stop
// is called or the test ends, and waits for it to sync.
func startCompositionInformer(t *testing.T, dyn dynamic.Interface, namespace string) (cache.SharedIndexInformer, func()) {
	t.Helper()
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, CompositionGVR, namespace, 0, cache.Indexers{}, nil).Informer()
	require.NoError(t, inf.SetTransform(CompositionAsRead))
	return inf, run(t, inf)
}

// run runs inf until the returned stop is called or the test ends, and waits for it to sync.
func run(t *testing.T, inf cache.SharedIndexInformer) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	require.True(t, cache.WaitForCacheSync(testContext(t).Done(), inf.HasSynced))
	return stop
}

// secretCache is a CachedSecrets over a client-go metadata informer.
type secretCache struct {
	inf       cache.SharedIndexInformer
	namespace string
}

func newSecretCache(t *testing.T, meta metadata.Interface, namespace string) *secretCache {
	t.Helper()
	managed := labels.Set{domain.LabelManagedBy: domain.ManagedByValue}.AsSelector().String()
	ofOurType := fields.OneTermEqualSelector("type", domain.SecretType).String()
	inf := metadatainformer.NewFilteredMetadataInformer(meta, corev1.SchemeGroupVersion.WithResource("secrets"), namespace, 0,
		cache.Indexers{"lineage": func(obj any) ([]string, error) { return LineageOf(obj.(metav1.Object)), nil }},
		func(o *metav1.ListOptions) { o.LabelSelector, o.FieldSelector = managed, ofOurType }).Informer()
	require.NoError(t, inf.SetTransform(DropManagedFields))
	return &secretCache{inf: inf, namespace: namespace}
}

func (s *secretCache) Synced() bool { return s.inf.HasSynced() }

func (s *secretCache) ListLineage(lineage string) ([]*metav1.PartialObjectMetadata, error) {
	objs, err := s.inf.GetIndexer().ByIndex("lineage", lineage)
	out := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*metav1.PartialObjectMetadata))
	}
	return out, err
}

func (s *secretCache) Get(name string) (*metav1.PartialObjectMetadata, bool) {
	obj, ok, err := s.inf.GetIndexer().GetByKey(s.namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*metav1.PartialObjectMetadata), true
}
