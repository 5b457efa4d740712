package kubetest

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// ApplyDownstream creates the objects of Eno manifests in the downstream cluster (here, the
// test API server itself), as eno-reconciler applies a synthesis before it is Ready and
// recorded: an object that exists is left as it is, so its creationTimestamp stays that of
// its first apply. Eno Patches are skipped (they patch objects Eno does not own), and so are
// manifests that are not JSON objects: hostile fixtures are for the controller to refuse.
// The objects' namespaces must exist.
func (c Clients) ApplyDownstream(ctx context.Context, manifests ...string) error {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Kube.Discovery()))
	for _, m := range manifests {
		var obj unstructured.Unstructured
		if err := json.Unmarshal([]byte(m), &obj.Object); err != nil || obj.GetKind() == "" || obj.GetName() == "" {
			continue
		}
		gvk := obj.GroupVersionKind()
		if gvk.Group == "eno.azure.io" && gvk.Kind == "Patch" {
			continue
		}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("mapping %s to a resource: %w", gvk, err)
		}
		var client dynamic.ResourceInterface = c.Dynamic.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			client = c.Dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := client.Create(ctx, &obj, metav1.CreateOptions{FieldManager: "eno"}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("applying %s %s/%s downstream: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}
