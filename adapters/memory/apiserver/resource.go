package apiserver

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource is one resource the server serves. The zero value of the unexported part describes a
// custom resource (a CRD's objects): metadata.generation is kept, and an update must carry a
// resourceVersion. The built-in values below set what kube-apiserver does differently.
type Resource struct {
	Group, Version string
	Resource       string // the plural, as in the URL
	Kind           string
	Namespaced     bool
	Status         bool // has a status subresource

	builtin bool // served by kube-apiserver itself: no generation, unconditional updates
}

// The resources the simulation serves, as kube-apiserver serves them with Eno's CRDs installed.
var (
	Compositions   = Resource{Group: "eno.azure.io", Version: "v1", Resource: "compositions", Kind: "Composition", Namespaced: true, Status: true}
	ResourceSlices = Resource{Group: "eno.azure.io", Version: "v1", Resource: "resourceslices", Kind: "ResourceSlice", Namespaced: true, Status: true}
	Secrets        = Resource{Version: "v1", Resource: "secrets", Kind: "Secret", Namespaced: true, builtin: true}
	ConfigMaps     = Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true, builtin: true}
	Namespaces     = Resource{Version: "v1", Resource: "namespaces", Kind: "Namespace", Status: true, builtin: true}
	Events         = Resource{Version: "v1", Resource: "events", Kind: "Event", Namespaced: true, builtin: true}
	// CRDs are served by the apiextensions server inside kube-apiserver: generation is kept and
	// updates are conditional, as for custom resources.
	CustomResourceDefinitions = Resource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions", Kind: "CustomResourceDefinition", Status: true}
)

// DefaultResources are Eno's two kinds and the built-in ones above.
func DefaultResources() []Resource {
	return []Resource{Compositions, ResourceSlices, Secrets, ConfigMaps, Namespaces, Events, CustomResourceDefinitions}
}

// GroupVersionResource names the resource.
func (r Resource) GroupVersionResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
}

// GroupVersionKind names the resource's kind.
func (r Resource) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

func (r Resource) apiVersion() string { return r.GroupVersionKind().GroupVersion().String() }

func (r Resource) groupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.Group, Resource: r.Resource}
}

// keepsGeneration is whether metadata.generation is set: CRD-served kinds and CRDs themselves.
func (r Resource) keepsGeneration() bool { return !r.builtin }

// unconditionalUpdate is whether a PUT without resourceVersion overwrites (kube-apiserver's
// built-in strategies) rather than failing 422 (apiextensions strategies).
func (r Resource) unconditionalUpdate() bool { return r.builtin }

func (r Resource) is(other Resource) bool {
	return r.Group == other.Group && r.Resource == other.Resource
}

// crdName is the name of the CustomResourceDefinition that defines r: <plural>.<group>.
func (r Resource) crdName() string { return r.Resource + "." + r.Group }

// fieldLabels are the field selector labels the real server accepts for r.
func (r Resource) fieldLabels() []string {
	labels := []string{"metadata.name", "metadata.namespace"}
	switch {
	case r.is(Secrets):
		labels = append(labels, "type")
	case r.is(Namespaces):
		labels = append(labels, "status.phase")
	}
	return labels
}

// verbs are the verbs the simulation serves for r (no watch, no deletecollection).
var verbs = []string{"create", "delete", "get", "list", "patch", "update"}

func singular(kind string) string { return strings.ToLower(kind) }

// Built-in kinds a story deploys downstream, beside DefaultResources.
var (
	Services     = Resource{Version: "v1", Resource: "services", Kind: "Service", Namespaced: true, Status: true, builtin: true}
	Deployments  = Resource{Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment", Namespaced: true, Status: true, builtin: true}
	CronJobs     = Resource{Group: "batch", Version: "v1", Resource: "cronjobs", Kind: "CronJob", Namespaced: true, Status: true, builtin: true}
	ClusterRoles = Resource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles", Kind: "ClusterRole", builtin: true}
)
