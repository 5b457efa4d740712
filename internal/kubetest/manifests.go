package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// ManifestResources maps the kinds the release files of deploy/ hold to their resources. A kind
// missing here fails ApplyManifests, so a new kind in deploy/ is noticed.
var ManifestResources = map[string]schema.GroupVersionResource{
	"Namespace":                        {Version: "v1", Resource: "namespaces"},
	"ServiceAccount":                   {Version: "v1", Resource: "serviceaccounts"},
	"ClusterRole":                      {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"Role":                             {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":                      {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"PodDisruptionBudget":              {Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
	"ValidatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
	"ValidatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
}

// skippedManifestKinds need a kubelet or an image; the tests run the controller themselves.
var skippedManifestKinds = map[string]bool{"Deployment": true}

// ReadManifests decodes the multi-document YAML files (paths relative to root).
func ReadManifests(root string, files ...string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		objs, err := DecodeManifests(data)
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", f, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// ApplyManifests creates every object of the files (paths relative to root) with cfg, except the
// workloads, which need a kubelet. An object that exists already is left as it is.
func ApplyManifests(ctx context.Context, cfg *rest.Config, root string, files ...string) error {
	objs, err := ReadManifests(root, files...)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		kind := obj.GetKind()
		if skippedManifestKinds[kind] {
			continue
		}
		gvr, ok := ManifestResources[kind]
		if !ok {
			return fmt.Errorf("the manifests hold a %s, which kubetest does not know how to apply", kind)
		}
		var client dynamic.ResourceInterface = dyn.Resource(gvr)
		if ns := obj.GetNamespace(); ns != "" {
			client = dyn.Resource(gvr).Namespace(ns)
		}
		if _, err := client.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", kind, obj.GetName(), err)
		}
	}
	return nil
}

// Impersonating returns a copy of cfg that acts as user with groups (the admin may impersonate
// anyone), for instance a ServiceAccount's own identity.
func Impersonating(cfg *rest.Config, user string, groups ...string) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	out.UserAgent = "kubetest/" + user
	return out
}
