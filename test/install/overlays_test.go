package install

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

const (
	controlPlaneFile = "deploy/control-plane/release.yaml"
	downstreamFile   = "deploy/downstream/release-downstream.yaml"
	// enoCRDs are the stand-ins for Eno's CRDs that deploy/crds/README.md applies to a scratch
	// cluster; a real install has Eno's own.
	enoCRDs = "internal/kubetest/crds/eno-crds.yaml"
	// controllerUser is the ServiceAccount every release binds.
	controllerUser = "system:serviceaccount:eno-system:eno-tombstone-recovery"
	// remoteKubeconfigArg is the base Deployment's downstream kubeconfig, which one cluster drops.
	remoteKubeconfigArg = "--remote-kubeconfig=/etc/eno-tombstone-recovery/downstream/kubeconfig"
	fieldManager        = "test-install"
	policyGroup         = "admissionregistration.k8s.io"
)

// objectID names an object as kustomize does: group, kind, namespace and name.
type objectID struct{ group, kind, namespace, name string }

func (id objectID) String() string {
	return fmt.Sprintf("%s.%s %s/%s", id.kind, id.group, id.namespace, id.name)
}

func idOf(o *unstructured.Unstructured) objectID {
	gvk := o.GroupVersionKind()
	return objectID{gvk.Group, gvk.Kind, o.GetNamespace(), o.GetName()}
}

// byID indexes objects; an ID twice is a failure (kubectl would apply the second over the first).
func byID(t *testing.T, objs []*unstructured.Unstructured) map[objectID]*unstructured.Unstructured {
	t.Helper()
	out := map[objectID]*unstructured.Unstructured{}
	for _, o := range objs {
		require.NotContains(t, out, idOf(o), "an object twice")
		out[idOf(o)] = o
	}
	return out
}

// render runs `kustomize build` on a directory of deploy/.
func render(t *testing.T, dir string) map[objectID]*unstructured.Unstructured {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(kubetest.Context(t, time.Minute), kustomize, "build", filepath.Join(repoRoot, dir))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "kustomize build %s: %s", dir, stderr.String())
	objs, err := kubetest.DecodeManifests(stdout.Bytes())
	require.NoError(t, err, "decoding kustomize build %s", dir)
	require.NotEmpty(t, objs, dir)
	return byID(t, objs)
}

// releases reads release files as `kubectl apply -f` would; both in one cluster hold the same
// Namespace, ServiceAccount and impersonation Role and RoleBinding, each once.
func releases(t *testing.T, files ...string) map[objectID]*unstructured.Unstructured {
	t.Helper()
	out := map[objectID]*unstructured.Unstructured{}
	for _, f := range files {
		objs, err := kubetest.ReadManifests(repoRoot, f)
		require.NoError(t, err)
		for id, o := range byID(t, objs) {
			if shared, ok := out[id]; ok {
				require.Equal(t, shared.Object, o.Object, "%s is in both release files, so it must be the same", id)
			}
			out[id] = o
		}
	}
	return out
}

// TestBasesAndOverlays: each base and overlay renders to exactly the objects it promises, equal to
// the release files' but for one cluster's Deployment, and each object is accepted by server-side
// apply and then stored as rendered.
func TestBasesAndOverlays(t *testing.T) {
	crds, err := kubetest.ReadManifests(repoRoot, enoCRDs)
	require.NoError(t, err)
	applyAll(t, byID(t, crds))

	both := []string{controlPlaneFile, downstreamFile}
	for _, tc := range []struct {
		dir string
		// files are the release files whose objects the directory holds.
		files []string
		// policies: the admission policies and their bindings are kept.
		policies bool
	}{
		{dir: "deploy/control-plane", files: []string{controlPlaneFile}, policies: true},
		{dir: "deploy/downstream", files: []string{downstreamFile}, policies: true},
		{dir: "deploy/overlays/one-cluster", files: both, policies: true},
		{dir: "deploy/overlays/before-1.30", files: []string{controlPlaneFile}},
		{dir: "deploy/overlays/before-1.30-downstream", files: []string{downstreamFile}},
		{dir: "deploy/overlays/one-cluster-before-1.30", files: both},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			got, want := render(t, tc.dir), releases(t, tc.files...)
			if !tc.policies {
				maps.DeleteFunc(want, func(id objectID, _ *unstructured.Unstructured) bool { return id.group == policyGroup })
			}
			require.ElementsMatch(t, slices.Collect(maps.Keys(want)), slices.Collect(maps.Keys(got)), "the objects of %s", tc.dir)
			for id, o := range got {
				w := want[id]
				// One cluster reads the inventory with the Deployment's own identity.
				if id.kind == "Deployment" && len(tc.files) == 2 {
					w = w.DeepCopy()
					dropRemoteKubeconfig(t, w)
				}
				assert.Equal(t, w.Object, o.Object, "%s as %s renders it", id, tc.dir)
			}
			applyAll(t, got)
		})
	}
}

// dropRemoteKubeconfig is what one cluster changes: the Deployment's --remote-kubeconfig and the
// Secret volume it names, and nothing else.
func dropRemoteKubeconfig(t *testing.T, deploy *unstructured.Unstructured) {
	t.Helper()
	pod, _, _ := unstructured.NestedFieldNoCopy(deploy.Object, "spec", "template", "spec")
	spec := pod.(map[string]any)
	ctr := spec["containers"].([]any)[0].(map[string]any)
	args := ctr["args"].([]any)
	require.Contains(t, args, remoteKubeconfigArg)
	ctr["args"] = slices.DeleteFunc(slices.Clone(args), func(a any) bool { return a == remoteKubeconfigArg })
	require.Len(t, ctr["volumeMounts"], 1, "the base mounts only the downstream kubeconfig")
	ctr["volumeMounts"] = []any{}
	require.Len(t, spec["volumes"], 1, "the base has only the downstream kubeconfig's volume")
	spec["volumes"] = []any{}
}

// applyAll applies every object with server-side apply, as `kubectl apply --server-side` does,
// then reads each back: it exists, and what the API server does not default is as rendered.
func applyAll(t *testing.T, objs map[objectID]*unstructured.Unstructured) {
	t.Helper()
	c := env.AdminClients(t)
	ctx := kubetest.Context(t, 2*time.Minute)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Kube.Discovery()))
	ids := slices.SortedFunc(maps.Keys(objs), func(a, b objectID) int {
		// Namespaces and CRDs first, as kubectl orders them.
		return cmpBool(!first(a.kind), !first(b.kind))
	})
	for _, id := range ids {
		obj := objs[id]
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s is a kind the API server serves", id)
		var client dynamic.ResourceInterface = c.Dynamic.Resource(m.Resource)
		if id.namespace != "" {
			client = c.Dynamic.Resource(m.Resource).Namespace(id.namespace)
		}
		_, err = client.Apply(ctx, id.name, obj, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
		require.NoError(t, err, "server-side apply of %s", id)
		stored, err := client.Get(ctx, id.name, metav1.GetOptions{})
		require.NoError(t, err, "%s exists once applied", id)
		for _, field := range []string{"rules", "roleRef", "subjects"} {
			assert.Equal(t, obj.Object[field], stored.Object[field], "%s: %s as stored", id, field)
		}
		if id.kind == "Deployment" {
			want, got := podSpec(obj), podSpec(stored)
			assert.Equal(t, names(want["volumes"]), names(got["volumes"]), "%s: volumes as stored", id)
			wantCtr, gotCtr := orEmpty(want["containers"]), orEmpty(got["containers"])
			require.Len(t, gotCtr, len(wantCtr), id)
			for i := range wantCtr {
				w, g := wantCtr[i].(map[string]any), gotCtr[i].(map[string]any)
				assert.Equal(t, w["args"], g["args"], "%s: args as stored", id)
				assert.Equal(t, names(w["volumeMounts"]), names(g["volumeMounts"]), "%s: volume mounts as stored", id)
			}
		}
	}
}

// podSpec is a Deployment's spec.template.spec.
func podSpec(deploy *unstructured.Unstructured) map[string]any {
	spec, _, _ := unstructured.NestedMap(deploy.Object, "spec", "template", "spec")
	return spec
}

func first(kind string) bool { return kind == "Namespace" || kind == "CustomResourceDefinition" }

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// names are the names of a list of objects (containers, volumes).
func names(list any) []string {
	out := []string{}
	for _, item := range orEmpty(list) {
		out = append(out, item.(map[string]any)["name"].(string))
	}
	return out
}

func orEmpty(list any) []any {
	l, _ := list.([]any)
	return l
}

// TestOneClusterGrantsBothSides: in one cluster the controller's single ServiceAccount holds the
// control plane's grants and the downstream's, the inventory Secrets and the reads of
// downstream objects included.
func TestOneClusterGrantsBothSides(t *testing.T) {
	applyAll(t, render(t, "deploy/overlays/one-cluster"))
	c := env.AdminClients(t)
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Verb: "list", Group: "eno.azure.io", Resource: "compositions"},
		{Verb: "patch", Group: "eno.azure.io", Resource: "compositions", Subresource: "status"},
		{Verb: "create", Group: "eno.azure.io", Resource: "resourceslices"},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "eno-system"},
		{Verb: "watch", Resource: "secrets", Namespace: "kube-system"},
		{Verb: "create", Resource: "secrets", Namespace: "kube-system"},
		{Verb: "update", Resource: "secrets", Namespace: "kube-system"},
		{Verb: "get", Group: "apps", Resource: "deployments", Namespace: "team-a"},
		{Verb: "get", Resource: "configmaps", Namespace: "team-a"},
	} {
		kubetest.WaitFor(t, fmt.Sprintf("%s may %s %s/%s in %q", controllerUser, ra.Verb, ra.Resource, ra.Subresource, ra.Namespace), func(ctx context.Context) error {
			review, err := c.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: controllerUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:eno-system", "system:authenticated"},
				ResourceAttributes: &ra,
			}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if !review.Status.Allowed {
				return fmt.Errorf("not allowed: %s", review.Status.Reason)
			}
			return nil
		})
	}
	// Never delete: RBAC alone keeps every Secret, with or without the policies.
	review, err := c.Kube.AuthorizationV1().SubjectAccessReviews().Create(kubetest.Context(t, time.Minute), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: controllerUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:eno-system", "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "delete", Resource: "secrets", Namespace: "kube-system"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.False(t, review.Status.Allowed, "%s may delete Secrets in kube-system", controllerUser)
}
