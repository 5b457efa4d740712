package k8s

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

var _ ports.DownstreamReader = (*DownstreamObjects)(nil)

// DownstreamObjects reads downstream objects' metadata through the metadata client, mapping each
// kind to its resource with a RESTMapper over discovery. Discovery is cached and refreshed once
// when a kind is not found, so a CRD installed since is still seen.
type DownstreamObjects struct {
	client metadata.Interface
	cache  discovery.CachedDiscoveryInterface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// NewDownstreamObjects reads through client, mapping kinds with disc.
func NewDownstreamObjects(client metadata.Interface, disc discovery.DiscoveryInterface) (*DownstreamObjects, error) {
	if client == nil || disc == nil {
		return nil, errors.New("downstream objects: a metadata client and a discovery client are required")
	}
	cache := memory.NewMemCacheClient(disc)
	return &DownstreamObjects{client: client, cache: cache, mapper: restmapper.NewDeferredDiscoveryRESTMapper(cache)}, nil
}

// ObserveObject reads e's object. NotFound is absent; Forbidden, or a kind the server does not
// serve, is unreadable (when in doubt, keep); any other failure is returned for a retry.
func (d *DownstreamObjects) ObserveObject(ctx context.Context, e domain.Entry) (domain.Observation, error) {
	gvk := schema.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind}
	mapping, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		d.mapper.Reset() // a kind installed since the cache was filled
		mapping, err = d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	switch {
	case meta.IsNoMatchError(err):
		return domain.Observation{State: domain.ObjectUnreadable, Detail: "the downstream API server does not serve " + gvk.String()}, nil
	case apierrors.IsForbidden(err):
		return domain.Observation{State: domain.ObjectUnreadable, Detail: "discovery is forbidden: " + err.Error()}, nil
	case err != nil:
		return domain.Observation{}, fmt.Errorf("mapping %s to a resource: %w", gvk, err)
	}
	res := d.client.Resource(mapping.Resource)
	var obj *metav1.PartialObjectMetadata
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	if namespaced != (e.Namespace != "") {
		return domain.Observation{State: domain.ObjectUnreadable,
			Detail: fmt.Sprintf("the history's namespace %q does not fit the scope of %s", e.Namespace, mapping.Resource.GroupResource())}, nil
	}
	if namespaced {
		obj, err = res.Namespace(e.Namespace).Get(ctx, e.Name, metav1.GetOptions{})
	} else {
		obj, err = res.Get(ctx, e.Name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		return domain.Observation{State: domain.ObjectAbsent}, nil
	case apierrors.IsForbidden(err):
		return domain.Observation{State: domain.ObjectUnreadable, Detail: "forbidden"}, nil
	case err != nil:
		return domain.Observation{}, apiError(fmt.Sprintf("reading %s downstream", e.ID()), err)
	}
	return domain.Observation{State: domain.ObjectPresent, Created: obj.CreationTimestamp.UTC(), Changed: lastWritten(obj.ManagedFields), UID: string(obj.UID)}, nil
}

// lastWritten is the newest time a field manager wrote the object itself; writes to a
// subresource (status, scale) do not count.
func lastWritten(entries []metav1.ManagedFieldsEntry) time.Time {
	var newest time.Time
	for _, e := range entries {
		if e.Subresource == "" && e.Time != nil && e.Time.After(newest) {
			newest = e.Time.UTC()
		}
	}
	return newest
}
