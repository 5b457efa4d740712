package runnable

import (
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// clients are the controller's clients of both clusters, built once and shared by every
// attempt: each cluster's clients share one HTTP client and one rate limiter.
type clients struct {
	cpConfig, dsConfig *rest.Config
	cpHTTP, dsHTTP     *http.Client
	dynamic            dynamic.Interface  // control plane: Compositions and ResourceSlices, live
	cpMeta             metadata.Interface // control plane: the fleet index's Compositions
	core               corev1client.CoreV1Interface
	meta               metadata.Interface // downstream: objects' metadata, live
	dsDynamic          dynamic.Interface  // downstream: a bare object's whole content, live
	discovery          discovery.DiscoveryInterface
}

func newClients(cp, ds *rest.Config) (clients, error) {
	c := clients{cpConfig: cp, dsConfig: ds}
	var err error
	if c.cpHTTP, err = rest.HTTPClientFor(cp); err != nil {
		return c, fmt.Errorf("tombstone recovery: control plane client: %w", err)
	}
	if c.dsHTTP, err = rest.HTTPClientFor(ds); err != nil {
		return c, fmt.Errorf("tombstone recovery: downstream client: %w", err)
	}
	if c.dynamic, err = dynamic.NewForConfigAndClient(cp, c.cpHTTP); err != nil {
		return c, fmt.Errorf("tombstone recovery: control plane dynamic client: %w", err)
	}
	if c.cpMeta, err = metadata.NewForConfigAndClient(cp, c.cpHTTP); err != nil {
		return c, fmt.Errorf("tombstone recovery: control plane metadata client: %w", err)
	}
	if c.core, err = corev1client.NewForConfigAndClient(ds, c.dsHTTP); err != nil {
		return c, fmt.Errorf("tombstone recovery: downstream client: %w", err)
	}
	if c.meta, err = metadata.NewForConfigAndClient(ds, c.dsHTTP); err != nil {
		return c, fmt.Errorf("tombstone recovery: downstream metadata client: %w", err)
	}
	if c.dsDynamic, err = dynamic.NewForConfigAndClient(ds, c.dsHTTP); err != nil {
		return c, fmt.Errorf("tombstone recovery: downstream dynamic client: %w", err)
	}
	if c.discovery, err = discovery.NewDiscoveryClientForConfigAndClient(ds, c.dsHTTP); err != nil {
		return c, fmt.Errorf("tombstone recovery: downstream discovery client: %w", err)
	}
	return c, nil
}

// compositionObject is the unstructured Composition the caches and the watch are keyed by: the
// module reads Compositions as unstructured, with no dependency on Eno's Go module.
func compositionObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(k8s.CompositionGVR.GroupVersion().WithKind("Composition"))
	return u
}

// secretObject is the metadata-only inventory Secret the downstream cache is keyed by.
func secretObject() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}
}

// staticMapper maps the one kind a cache holds to its resource, so that no cache asks for
// discovery.
func staticMapper(gvk schema.GroupVersionKind, resource string) meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.AddSpecific(gvk, gvk.GroupVersion().WithResource(resource), gvk.GroupVersion().WithResource(resource), meta.RESTScopeNamespace)
	return m
}

// unsafeShared lets the caches hand out their own objects, without a deep copy per read: the
// adapters copy what they keep and never mutate them.
var unsafeShared = true

// compositionCache builds the controller's own cache of the shard's Compositions, unstructured,
// without managedFields, resynced every ResyncPeriod. It is the guest's second copy of the
// Compositions: the host's cache holds them typed, a type this module cannot import.
func (g *Guest) compositionCache() (cache.Cache, error) {
	byObject := cache.ByObject{Transform: k8s.DropManagedFields, UnsafeDisableDeepCopy: &unsafeShared}
	if g.s.CompositionNamespace != "" {
		byObject.Namespaces = map[string]cache.Config{g.s.CompositionNamespace: {}}
	}
	if g.s.selector != "" {
		sel, err := labels.Parse(g.s.selector)
		if err != nil {
			return nil, fmt.Errorf("tombstone recovery: composition selector: %w", err)
		}
		byObject.Label = sel
	}
	resync := g.s.ResyncPeriod
	obj := compositionObject()
	return cache.New(g.clients.cpConfig, cache.Options{
		HTTPClient: g.clients.cpHTTP,
		Mapper:     staticMapper(obj.GroupVersionKind(), k8s.CompositionGVR.Resource),
		SyncPeriod: &resync,
		ByObject:   map[client.Object]cache.ByObject{obj: byObject},
	})
}

// downstreamCluster builds the downstream cluster.Cluster. Its cache holds our inventory
// Secrets only, metadata only, in the inventory namespace, selected by our label and type: the
// API server sends no data at all, so the cache, the initial list and every watch event grow
// with the number of Secrets, not with the size of the inventories. Its client is never used:
// downstream objects are read live through the metadata client, so no informer is started per
// kind read.
func (g *Guest) downstreamCluster() (cluster.Cluster, error) {
	gvk := corev1.SchemeGroupVersion.WithKind("Secret")
	return cluster.New(g.clients.dsConfig, func(o *cluster.Options) {
		o.HTTPClient = g.clients.dsHTTP
		o.Logger = g.log
		o.MapperProvider = func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
			return staticMapper(gvk, "secrets"), nil
		}
		never := time.Duration(0) // nothing of a Secret is re-delivered on a timer
		o.Cache.SyncPeriod = &never
		o.Cache.ByObject = map[client.Object]cache.ByObject{secretObject(): {
			Namespaces: map[string]cache.Config{g.s.config.InventoryNamespace: {}},
			Label:      labels.SelectorFromSet(labels.Set{domain.LabelManagedBy: domain.ManagedByValue}),
			Field:      fields.OneTermEqualSelector("type", domain.SecretType),
			Transform:  k8s.DropManagedFields,
			// The store copies what it keeps and never mutates what the cache hands out.
			UnsafeDisableDeepCopy: &unsafeShared,
		}}
	})
}

// service builds app's Service over the adapters: reads of Compositions through the cached
// informer (the seam the simulation makes stale), the guard, decisions and every write live.
func (g *Guest) service(comps compositionLister, secrets *cachedSecrets, fleet *k8s.FleetIndex) (*app.Service, error) {
	c := g.clients
	compositions, err := k8s.NewCompositions(c.dynamic, comps)
	if err != nil {
		return nil, err
	}
	store, err := k8s.NewSecretStore(c.core, secrets, g.s.config.InventoryNamespace)
	if err != nil {
		return nil, err
	}
	deps := app.Deps{Compositions: compositions, Live: compositions, Decisions: compositions, Fleet: fleet, Store: store}
	if deps.Slices, err = k8s.NewSlices(c.dynamic); err != nil {
		return nil, err
	}
	if deps.Sink, err = k8s.NewTombstoneSink(c.dynamic); err != nil {
		return nil, err
	}
	if deps.Downstream, err = k8s.NewDownstreamObjects(c.meta, c.dsDynamic, c.discovery); err != nil {
		return nil, err
	}
	if deps.Events, err = k8s.NewRecorder(g.mgr.GetEventRecorderFor(k8s.DefaultEventSource)); err != nil {
		return nil, err
	}
	if g.metrics != nil {
		deps.Metrics = g.metrics
	}
	return app.New(g.s.config, deps)
}
