package runnable

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// clients are the controller's clients of both clusters; each cluster's share one HTTP client and rate limiter.
type clients struct {
	cpConfig, dsConfig *rest.Config
	cpHTTP, dsHTTP     *http.Client
	dynamic            dynamic.Interface  // control plane: Compositions and ResourceSlices, live
	cpMeta             metadata.Interface // control plane: its kube-system Namespace
	core               corev1client.CoreV1Interface
	meta               metadata.Interface // downstream: objects' metadata, live
	dsDynamic          dynamic.Interface  // downstream: a bare object's whole content, live
	discovery          discovery.DiscoveryInterface
}

func newClients(cp, ds *rest.Config) (c clients, err error) {
	c.cpConfig, c.dsConfig = cp, ds
	if c.cpHTTP, err = rest.HTTPClientFor(cp); err == nil {
		c.dsHTTP, err = rest.HTTPClientFor(ds)
	}
	if err != nil {
		return c, err
	}
	var errs [6]error
	c.dynamic, errs[0] = dynamic.NewForConfigAndClient(cp, c.cpHTTP)
	c.cpMeta, errs[1] = metadata.NewForConfigAndClient(cp, c.cpHTTP)
	c.core, errs[2] = corev1client.NewForConfigAndClient(ds, c.dsHTTP)
	c.meta, errs[3] = metadata.NewForConfigAndClient(ds, c.dsHTTP)
	c.dsDynamic, errs[4] = dynamic.NewForConfigAndClient(ds, c.dsHTTP)
	c.discovery, errs[5] = discovery.NewDiscoveryClientForConfigAndClient(ds, c.dsHTTP)
	return c, errors.Join(errs[:]...)
}

// secretObject is the metadata-only inventory Secret the downstream cache is keyed by.
func secretObject() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}
}

// compositionCache is where the controller reads Compositions, and the source of their events.
type compositionCache struct {
	lister   toolscache.GenericLister
	source   source.Source
	informer func(context.Context) (cache.Informer, error) // got on the leader only
	run      manager.Runnable                              // standalone: the informer; nil: the host runs its cache
}

// compositions is the cache of Compositions: the host's when its scheme knows Eno's type
// (eno-reconciler's, typed), else, standalone, an informer of its own that keeps each Composition
// as read at its event (k8s.CompositionAsRead), run on the leader with the guest's parts.
func (g *Guest) compositions(h handler.EventHandler) (compositionCache, error) {
	obj, objErr := g.mgr.GetScheme().New(compositionGV.WithKind("Composition"))
	list, listErr := g.mgr.GetScheme().New(compositionGV.WithKind("CompositionList"))
	if objErr == nil && listErr == nil {
		l := cachedCompositions{cache: g.mgr.GetCache(), obj: obj.(client.Object), list: list.(client.ObjectList), scope: g.s.Scope.Namespace}
		return compositionCache{lister: l, source: source.Kind(l.cache, l.object(), h), informer: func(ctx context.Context) (cache.Informer, error) {
			return l.cache.GetInformer(ctx, l.object(), cache.BlockUntilSynced(false))
		}}, nil
	}
	sel := selectorString(g.s.CompositionSelector)
	inf := dynamicinformer.NewFilteredDynamicInformer(g.clients.dynamic, k8s.CompositionGVR, g.s.Scope.Namespace, g.s.ResyncPeriod,
		toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}, func(o *metav1.ListOptions) { o.LabelSelector = sel }).Informer()
	err := errors.Join(inf.SetTransform(k8s.CompositionAsRead), inf.SetWatchErrorHandlerWithContext(g.watchError(k8s.CompositionGVR.Resource)))
	if err != nil {
		return compositionCache{}, fmt.Errorf("building the composition cache: %w", err)
	}
	return compositionCache{lister: toolscache.NewGenericLister(inf.GetIndexer(), k8s.CompositionGVR.GroupResource()),
		source:   syncedInformer{&source.Informer{Informer: inf, Handler: h}},
		informer: func(context.Context) (cache.Informer, error) { return inf, nil },
		run:      manager.RunnableFunc(func(ctx context.Context) error { inf.RunWithContext(ctx); return nil })}, nil
}

// syncedInformer is source.Informer that holds the controller's workers until the informer has
// synced, as source.Kind does.
type syncedInformer struct{ *source.Informer }

func (s syncedInformer) WaitForSync(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), s.Informer.Informer.HasSynced) {
		return fmt.Errorf("the composition cache did not sync: %w", ctx.Err())
	}
	return nil
}

// watchError logs a cache's failed list or watch, which its informer retries with backoff.
func (g *Guest) watchError(resource string) toolscache.WatchErrorHandlerWithContext {
	return func(_ context.Context, _ *toolscache.Reflector, err error) {
		if !errors.Is(err, io.EOF) && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			g.log.Error(err, "the "+resource+" cache cannot list or watch; retrying with backoff (is the list forbidden, or the cluster unreachable?)")
		}
	}
}

// downstreamCache holds our inventory Secrets' metadata (no data: the cache, list and watch grow
// with the number of Secrets, not the inventories' size), selected by namespace, label and type,
// never resynced, indexed by lineage. Other downstream objects are read live: no informer per kind.
func (g *Guest) downstreamCache(ctx context.Context) (*cachedSecrets, error) {
	// It maps Secrets to their resource itself (no discovery), and hands out its own objects
	// uncopied: the adapter copies what it keeps and never mutates them.
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(secretObject().GroupVersionKind(), meta.RESTScopeNamespace)
	unsafeShared, never := true, time.Duration(0)
	c, err := cache.New(g.clients.dsConfig, cache.Options{HTTPClient: g.clients.dsHTTP, Mapper: m, SyncPeriod: &never, DefaultWatchErrorHandler: g.watchError("secrets"),
		ByObject: map[client.Object]cache.ByObject{secretObject(): {
			Namespaces:            map[string]cache.Config{g.s.InventoryNamespace: {}},
			Label:                 labels.SelectorFromSet(labels.Set{domain.LabelManagedBy: domain.ManagedByValue}),
			Field:                 fields.OneTermEqualSelector("type", domain.SecretType),
			Transform:             k8s.DropManagedFields,
			UnsafeDisableDeepCopy: &unsafeShared,
		}}})
	if err != nil {
		return nil, fmt.Errorf("building the inventory secret cache: %w", err)
	}
	if err := c.IndexField(ctx, secretObject(), lineageField, func(o client.Object) []string { return k8s.LineageOf(o) }); err != nil {
		return nil, fmt.Errorf("indexing the inventory secrets by lineage: %w", err)
	}
	inf, err := c.GetInformer(ctx, secretObject(), cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("building the inventory secret informer: %w", err)
	}
	return &cachedSecrets{cache: c, informer: inf, namespace: g.s.InventoryNamespace}, nil
}

// service builds app's Service: Compositions read from the cache (the seam the simulation makes
// stale), the guard, decisions and every write live.
func (g *Guest) service(ctx context.Context, cached toolscache.GenericLister, secrets *cachedSecrets, fleet *k8s.FleetIndex) (*app.Service, error) {
	c, cfg := g.clients, g.s.Config
	comps, err := k8s.NewCompositions(c.dynamic, cached)
	deps := app.Deps{Compositions: comps, Live: comps, Decisions: comps, Fleet: fleet, Metrics: g.metrics}
	errs := make([]error, 5)
	deps.Store, errs[0] = k8s.NewSecretStore(c.core, secrets, g.s.InventoryNamespace)
	deps.Slices, errs[1] = k8s.NewSlices(c.dynamic)
	deps.Sink, errs[2] = k8s.NewTombstoneSink(c.dynamic)
	deps.Downstream, errs[3] = k8s.NewDownstreamObjects(c.meta, c.dsDynamic, c.discovery)
	deps.Events, errs[4] = k8s.NewRecorder(g.mgr.GetEventRecorderFor(k8s.DefaultEventSource))
	if err = errors.Join(append(errs, err)...); err == nil && cfg.ControlPlane == "" {
		cfg.ControlPlane, err = k8s.ControlPlaneID(ctx, c.cpMeta)
	}
	if err != nil {
		return nil, err
	}
	return app.New(cfg, deps)
}
