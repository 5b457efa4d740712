package k8s

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// DownstreamObjects reads downstream objects' metadata, mapping each kind to its resource with a
// RESTMapper over cached discovery, refreshed once when a kind is not found (a CRD installed
// since is still seen). An object with no managedFields entry of its main resource is read
// whole, to tell a bare object from one whose history was stripped (domain.IsBare).
type DownstreamObjects struct {
	client metadata.Interface
	full   dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// NewDownstreamObjects reads through client, and full for whole objects, mapping kinds with disc.
func NewDownstreamObjects(client metadata.Interface, full dynamic.Interface, disc discovery.DiscoveryInterface) (*DownstreamObjects, error) {
	if client == nil || full == nil || disc == nil {
		return nil, errors.New("downstream objects: a metadata client, a dynamic client and a discovery client are required")
	}
	return &DownstreamObjects{client: client, full: full, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}, nil
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
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	if namespaced != (e.Namespace != "") {
		return domain.Observation{State: domain.ObjectUnreadable,
			Detail: fmt.Sprintf("the history's namespace %q does not fit the scope of %s", e.Namespace, mapping.Resource.GroupResource())}, nil
	}
	obj, err := d.client.Resource(mapping.Resource).Namespace(e.Namespace).Get(ctx, e.Name, metav1.GetOptions{})
	if o, done, err := readState(e, err); done {
		return o, err
	}
	o := domain.Observation{State: domain.ObjectPresent, Created: obj.CreationTimestamp.UTC(), UID: string(obj.UID)}
	for _, m := range obj.ManagedFields {
		if m.Subresource == "" {
			w := domain.ObjectWrite{Manager: m.Manager}
			if m.Time != nil {
				w.Time = m.Time.UTC()
			}
			o.Writes = append(o.Writes, w)
		}
	}
	if len(o.Writes) > 0 {
		return o, nil
	}
	whole, err := d.full.Resource(mapping.Resource).Namespace(e.Namespace).Get(ctx, e.Name, metav1.GetOptions{})
	if r, done, err := readState(e, err); done {
		return r, err
	}
	if string(whole.GetUID()) != o.UID || len(whole.GetManagedFields()) != len(obj.ManagedFields) {
		return domain.Observation{}, fmt.Errorf("reading %s downstream: it changed between two reads; read again", e.ID())
	}
	o.Bare = domain.IsBare(whole.Object)
	return o, nil
}

// readState turns a read's error into the observation it means: done is false when the read
// succeeded; NotFound is absent, Forbidden unreadable, any other failure returned for a retry.
func readState(e domain.Entry, err error) (o domain.Observation, done bool, _ error) {
	switch {
	case err == nil:
		return o, false, nil
	case apierrors.IsNotFound(err):
		return domain.Observation{State: domain.ObjectAbsent}, true, nil
	case apierrors.IsForbidden(err):
		return domain.Observation{State: domain.ObjectUnreadable, Detail: "forbidden"}, true, nil
	}
	return o, true, apiError(fmt.Sprintf("reading %s downstream", e.ID()), err)
}
