package image

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// releaseFiles are the release: the control plane's file and the downstream cluster's.
var releaseFiles = []string{"control-plane/release.yaml", "downstream/release-downstream.yaml"}

// readRelease decodes every object of the release files.
func readRelease(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, f := range releaseFiles {
		data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", f))
		require.NoError(t, err)
		objs, err := kubetest.DecodeManifests(data)
		require.NoError(t, err, "decoding deploy/%s", f)
		require.NotEmpty(t, objs, "deploy/%s", f)
		out = append(out, objs...)
	}
	return out
}

// applyRelease applies every object of the release with server-side apply, as
// `kubectl apply --server-side` does, and returns them as the API server stored them.
func applyRelease(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	c := env.AdminClients(t)
	ctx := kubetest.Context(t, 2*time.Minute)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Kube.Discovery()))
	var stored []*unstructured.Unstructured
	for _, obj := range readRelease(t) {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s is a kind the API server serves", gvk)
		client := c.Dynamic.Resource(m.Resource)
		var got *unstructured.Unstructured
		if ns := obj.GetNamespace(); ns != "" {
			got, err = client.Namespace(ns).Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "test-image", Force: true})
		} else {
			got, err = client.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "test-image", Force: true})
		}
		require.NoError(t, err, "server-side apply of %s %s", gvk.Kind, obj.GetName())
		stored = append(stored, got)
	}
	return stored
}

// TestReleaseAppliesServerSide: every object of the release is accepted by kube-apiserver with
// server-side apply (no dry run), and the Deployment is the one the product promises.
func TestReleaseAppliesServerSide(t *testing.T) {
	stored := applyRelease(t)
	kinds := map[string]int{}
	var deploy *unstructured.Unstructured
	for _, o := range stored {
		kinds[o.GetKind()]++
		if o.GetKind() == "Deployment" {
			deploy = o
		}
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "PodDisruptionBudget"} {
		assert.NotZero(t, kinds[k], "the release holds a %s", k)
	}
	require.NotNil(t, deploy)
	replicas, _, _ := unstructured.NestedInt64(deploy.Object, "spec", "replicas")
	assert.EqualValues(t, 2, replicas)
	tmpl, _, _ := unstructured.NestedMap(deploy.Object, "spec", "template")
	ann, _, _ := unstructured.NestedStringMap(tmpl, "metadata", "annotations")
	assert.Equal(t, map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080", "prometheus.io/path": "/metrics"}, ann)
	podSec, _, _ := unstructured.NestedMap(tmpl, "spec", "securityContext")
	assert.Equal(t, true, podSec["runAsNonRoot"])
	assert.EqualValues(t, 65532, podSec["runAsUser"])
	assert.Equal(t, "RuntimeDefault", podSec["seccompProfile"].(map[string]any)["type"])
	containers, _, _ := unstructured.NestedSlice(tmpl, "spec", "containers")
	require.Len(t, containers, 1)
	ctr := containers[0].(map[string]any)
	assert.Equal(t, "eno-tombstone-recovery:dev", ctr["image"], "the default `make release IMAGE=…` replaces")
	sec := ctr["securityContext"].(map[string]any)
	assert.Equal(t, false, sec["allowPrivilegeEscalation"])
	assert.Equal(t, true, sec["readOnlyRootFilesystem"])
	assert.Equal(t, []any{"ALL"}, sec["capabilities"].(map[string]any)["drop"])
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		port, _, _ := unstructured.NestedString(ctr, probe, "httpGet", "port")
		assert.Equal(t, "probes", port, probe)
	}
	limits, _, _ := unstructured.NestedStringMap(ctr, "resources", "limits")
	assert.NotEmpty(t, limits["cpu"])
	assert.NotEmpty(t, limits["memory"])
	env := map[string]string{}
	for _, e := range ctr["env"].([]any) {
		e := e.(map[string]any)
		res, _, _ := unstructured.NestedString(e, "valueFrom", "resourceFieldRef", "resource")
		env[e["name"].(string)] = res
	}
	assert.Equal(t, "limits.memory", env["GOMEMLIMIT"])
	assert.Equal(t, "limits.cpu", env["GOMAXPROCS"])

	// Every argument is a flag of the image's own `run`.
	args, _, _ := unstructured.NestedStringSlice(ctr, "args")
	require.NotEmpty(t, args)
	assert.Equal(t, "run", args[0])
	flags := runFlags(t)
	for _, a := range args[1:] {
		name := strings.SplitN(strings.TrimLeft(a, "-"), "=", 2)[0]
		assert.True(t, strings.HasPrefix(a, "--") && flags[name], "%s is not a flag of tombstone-recovery run", a)
	}
}

// runFlags are the flags `tombstone-recovery run -h` of the image's binary lists.
func runFlags(t *testing.T) map[string]bool {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(img.rootfs, "tombstone-recovery"), "run", "-h")
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), "run -h: %s", stderr.String())
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(stderr.String(), -1) {
		flags[m[1]] = true
	}
	require.True(t, flags["leader-elect"], "run -h lists its flags:\n%s", stderr.String())
	return flags
}

// waitForRBAC waits until the release's bindings authorize the controller's identity.
func waitForRBAC(t *testing.T, ns string) {
	t.Helper()
	user := kubetest.NewClients(t, env.UserConfig(controllerUser))
	kubetest.WaitFor(t, "the release's RBAC to take effect", func(ctx context.Context) error {
		if _, err := user.Dynamic.Resource(kubetest.CompositionResource).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
			return err
		}
		_, err := user.Kube.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
}
