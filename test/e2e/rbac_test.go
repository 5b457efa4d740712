package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
	"github.com/Azure/eno-tombstone-recovery/runnable"
)

// applyRBAC creates every RBAC object of a deploy/ release file through the typed RBAC client.
func applyRBAC(t *testing.T, kube kubernetes.Interface, file string) {
	t.Helper()
	applyRBACObjects(t, kube, file, deployRBAC(t, file))
}

// deployRBAC decodes the RBAC objects of a deploy/ release file: exactly what a release binds.
func deployRBAC(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", file))
	require.NoError(t, err)
	objs, err := kubetest.DecodeManifests(data)
	require.NoError(t, err, "decoding %s", file)
	var rbac []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GroupVersionKind().Group == rbacv1.GroupName {
			rbac = append(rbac, obj)
		}
	}
	return rbac
}

// The release files of deploy/: the control plane's and the downstream cluster's.
const (
	releaseFile           = "control-plane/release.yaml"
	releaseDownstreamFile = "downstream/release-downstream.yaml"
)

// applyRBACObjects creates RBAC objects through the typed RBAC client.
func applyRBACObjects(t *testing.T, kube kubernetes.Interface, file string, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := testContext(t)
	rbac := kube.RbacV1()
	var err error
	applied := 0
	for _, obj := range objs {
		doc := obj.Object
		conv := runtime.DefaultUnstructuredConverter
		kind, _ := doc["kind"].(string)
		switch kind {
		case "ClusterRole":
			var o rbacv1.ClusterRole
			require.NoError(t, conv.FromUnstructured(doc, &o))
			_, err = rbac.ClusterRoles().Create(ctx, &o, metav1.CreateOptions{})
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			require.NoError(t, conv.FromUnstructured(doc, &o))
			_, err = rbac.ClusterRoleBindings().Create(ctx, &o, metav1.CreateOptions{})
		case "Role":
			var o rbacv1.Role
			require.NoError(t, conv.FromUnstructured(doc, &o))
			_, err = rbac.Roles(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
		case "RoleBinding":
			var o rbacv1.RoleBinding
			require.NoError(t, conv.FromUnstructured(doc, &o))
			_, err = rbac.RoleBindings(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
		default:
			t.Fatalf("%s holds a %q; this test applies RBAC kinds only", file, kind)
		}
		if !apierrors.IsAlreadyExists(err) { // from an earlier run under -count
			require.NoError(t, err, "creating %s from %s", kind, file)
		}
		applied++
	}
	require.NotZero(t, applied, "%s holds no objects", file)
}

// TestLeastPrivilege runs the binary as the ServiceAccount identity bound only to deploy/'s
// RBAC: the whole lifecycle works, with leader election, and requests beyond it are denied.
func TestLeastPrivilege(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ensureNamespace(t, c, "eno-system")
	applyRBAC(t, c.Kube, releaseFile)
	applyRBAC(t, c.Kube, releaseDownstreamFile)
	ns := c.NewNamespace(t, "least-privilege")
	user := kubetest.NewClients(t, env.UserConfig(controllerUser))

	// The RBAC authorizer reads bindings through an informer; wait until they apply.
	waitFor(t, "deploy/ RBAC to take effect", func(ctx context.Context) error {
		if _, err := user.Dynamic.Resource(compositionGVR).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
			return err
		}
		if _, err := user.Kube.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return err
		}
		if _, err := user.Kube.CoordinationV1().Leases("eno-system").Get(ctx, "rbac-probe", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("lease get: %v", err)
		}
		return nil
	})

	ctl := startController(t, controllerUser, "--composition-namespace="+ns,
		"--leader-elect", "--leader-election-namespace=eno-system")

	const name = "api"
	lineage := lineageOf(ns, name)
	comp := createComposition(t, c, ns, name)
	first := newSynthesis(time.Now().Add(-10*time.Minute), []resource{
		{Manifest: object("v1", "ConfigMap", ns, "api-config", map[string]string{"app": "api"}, nil, nil)},
		{Manifest: deployment(ns, "api", map[string]string{"app": "api"}, nil)},
		{Manifest: service(ns, "api", nil)},
	})
	publish(t, c, comp, first)
	d := waitForDecision(t, c, ns, name, first.UUID)
	assert.Equal(t, "NoInventory", d.Outcome.String())
	_, secrets := waitForSnapshot(t, c, "kube-system", lineage, string(comp.GetUID()), first.UUID)
	require.Len(t, secrets, 1)

	// The shard's own Lease: replicas scoped to other namespaces elect their own leaders.
	leaseName := runnable.DefaultLeaseName(ns, nil)
	require.NotEqual(t, "eno-tombstone-recovery", leaseName)
	lease, err := c.Kube.CoordinationV1().Leases("eno-system").Get(ctx, leaseName, metav1.GetOptions{})
	require.NoError(t, err, "the leader's Lease")
	require.NotNil(t, lease.Spec.HolderIdentity)
	assert.NotEmpty(t, *lease.Spec.HolderIdentity)

	// Recovery needs the rest of the grant: create the tombstone slice, write the decision.
	require.NoError(t, c.Dynamic.Resource(compositionGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}))
	waitFor(t, "the composition to be gone", func(ctx context.Context) error {
		_, err := c.Dynamic.Resource(compositionGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	recreated := createComposition(t, c, ns, name)
	second := newSynthesis(time.Now().Add(-5*time.Minute), []resource{
		{Manifest: object("v1", "ConfigMap", ns, "api-config", map[string]string{"app": "api"}, nil, nil)},
		{Manifest: deployment(ns, "api", map[string]string{"app": "api"}, nil)},
	})
	publish(t, c, recreated, second)
	d = waitForDecision(t, c, ns, name, second.UUID)
	assert.Equal(t, "Recovered", d.Outcome.String())
	assert.Equal(t, 1, d.Tombstones)
	_, err = c.Dynamic.Resource(sliceGVR).Namespace(ns).Get(ctx, d.TombstoneSlice, metav1.GetOptions{})
	require.NoError(t, err, "tombstone slice %q", d.TombstoneSlice)
	waitForEvent(t, c, ns, name, "Recovered")
	// The rest of the hand-off: the status append and the forced resynthesis.
	waitFor(t, "the forced resynthesis", func(ctx context.Context) error {
		u, err := c.Dynamic.Resource(compositionGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := u.GetAnnotations()["eno.azure.io/force-resynthesis"]; got != second.UUID {
			return fmt.Errorf("force-resynthesis is %q", got)
		}
		return nil
	})
	// Eno's next synthesis is recorded.
	third := newSynthesis(time.Now().Add(-4*time.Minute), []resource{
		{Manifest: object("v1", "ConfigMap", ns, "api-config", map[string]string{"app": "api"}, nil, nil)},
		{Manifest: deployment(ns, "api", map[string]string{"app": "api"}, nil)},
		{Manifest: service(ns, "api", nil), Deleted: true},
	})
	publish(t, c, recreated, third)
	waitForSnapshot(t, c, "kube-system", lineage, string(recreated.GetUID()), third.UUID)

	// Requests beyond the grant are denied.
	_, err = c.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "not-yours"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	denied := map[string]error{
		"delete an inventory secret in kube-system": user.Kube.CoreV1().Secrets("kube-system").Delete(ctx, secrets[0].Name, metav1.DeleteOptions{}),
		"list configmaps in kube-system": func() error {
			_, err := user.Kube.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{})
			return err
		}(),
		"get a secret in another namespace": func() error {
			_, err := user.Kube.CoreV1().Secrets(ns).Get(ctx, "not-yours", metav1.GetOptions{})
			return err
		}(),
		"list secrets in all namespaces": func() error {
			_, err := user.Kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			return err
		}(),
		"delete a composition": user.Dynamic.Resource(compositionGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}),
	}
	for what, err := range denied {
		assert.True(t, apierrors.IsForbidden(err), "%s: got %v, want Forbidden", what, err)
	}

	ctl.Stop(t)
	// Nothing the binary did needed more than deploy/ grants.
	assert.NotContains(t, strings.ToLower(ctl.Stderr()), "forbidden")
	// ReleaseOnCancel hands the Lease back on SIGTERM.
	lease, err = c.Kube.CoordinationV1().Leases("eno-system").Get(ctx, leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	if lease.Spec.HolderIdentity != nil {
		assert.Empty(t, *lease.Spec.HolderIdentity, "the Lease is released on SIGTERM")
	}
}

// downstreamObjectsGrant is the ClusterRole (and its binding) of deploy/downstream/release-downstream.yaml
// that lets the controller read tombstoned objects downstream (design §6.3).
const downstreamObjectsGrant = "eno-tombstone-recovery-downstream-objects"

// TestNarrowedDownstreamGrantKeepsObjects runs the binary as an identity bound to deploy/'s RBAC
// without the downstream get on tombstoned kinds, as an operator who narrows it would: an orphan
// it cannot read is kept, never deleted. Recovery reports it unreadable, decides
// NothingToRecover/Unverified, and publishes nothing (design §6.3).
func TestNarrowedDownstreamGrantKeepsObjects(t *testing.T) {
	c := env.AdminClients(t)
	ensureNamespace(t, c, "eno-system") // the Role's namespace, whatever ran before
	ctx := testContext(t)
	for _, file := range []string{releaseFile, releaseDownstreamFile} {
		var narrowed []*unstructured.Unstructured
		for _, obj := range deployRBAC(t, file) {
			if obj.GetName() == downstreamObjectsGrant {
				continue
			}
			narrowed = append(narrowed, boundTo(obj, narrowedUser))
		}
		applyRBACObjects(t, c.Kube, file, narrowed)
	}
	ns := c.NewNamespace(t, "narrowed")
	user := kubetest.NewClients(t, env.UserConfig(narrowedUser))
	waitFor(t, "the narrowed RBAC to take effect", func(ctx context.Context) error {
		if _, err := user.Dynamic.Resource(compositionGVR).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
			return err
		}
		_, err := user.Kube.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	_, err := user.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "anything", metav1.GetOptions{})
	require.True(t, apierrors.IsForbidden(err), "the narrowed identity cannot read ConfigMaps: %v", err)

	ctl := startController(t, narrowedUser, "--composition-namespace="+ns)
	const name = "api"
	cms := func(names ...string) []resource {
		out := make([]resource, len(names))
		for i, n := range names {
			out[i] = resource{Manifest: object("v1", "ConfigMap", ns, n, map[string]string{"app": name}, nil, nil)}
		}
		return out
	}
	comp := createComposition(t, c, ns, name)
	first := newSynthesis(time.Now().Add(-10*time.Minute), cms("a", "b", "c", "orphan"))
	publish(t, c, comp, first)
	d := waitForDecision(t, c, ns, name, first.UUID)
	require.Equal(t, "NoInventory", d.Outcome.String(), d.Message)
	waitForSnapshot(t, c, "kube-system", lineageOf(ns, name), string(comp.GetUID()), first.UUID)

	require.NoError(t, c.Dynamic.Resource(compositionGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}))
	waitFor(t, "the composition to be gone", func(ctx context.Context) error {
		_, err := c.Dynamic.Resource(compositionGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	recreated := createComposition(t, c, ns, name)
	second := newSynthesis(time.Now().Add(-5*time.Minute), cms("a", "b", "c"))
	publish(t, c, recreated, second)
	d = waitForDecision(t, c, ns, name, second.UUID)
	assert.Equal(t, "NothingToRecover", d.Outcome.String(), d.Message)
	assert.Equal(t, "Unverified", d.Reason)
	assert.Contains(t, d.Message, "1 Unreadable (first ConfigMap/"+ns+"/orphan: forbidden)")
	assert.Zero(t, d.Tombstones)
	assert.Empty(t, d.TombstoneSlice)
	assert.Empty(t, d.RecoveredFrom, "an Unverified decision never blocks a later recovery")
	event := waitForEvent(t, c, ns, name, "NothingToRecover")
	assert.Contains(t, event.Message, "Unreadable")

	list, err := c.Dynamic.Resource(sliceGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, s := range list.Items {
		assert.NotContains(t, s.GetName(), "-recovery-", "nothing is handed to Eno")
	}
	_, err = c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "orphan", metav1.GetOptions{})
	assert.NoError(t, err, "the orphan is kept")

	// Nothing forgotten: the next recordings overwrite the history, and still list the orphan
	// for a person, with inspect (design §3).
	lineage := lineageOf(ns, name)
	snap, _ := waitForSnapshot(t, c, "kube-system", lineage, string(recreated.GetUID()), second.UUID)
	third := newSynthesis(time.Now().Add(-time.Minute), cms("a", "b"))
	publish(t, c, recreated, third)
	snap, _ = waitForSnapshot(t, c, "kube-system", lineage, string(recreated.GetUID()), third.UUID)
	require.Len(t, snap.Unresolved(), 1, "the orphan outlives the history that named it")
	u := snap.Unresolved()[0]
	assert.Equal(t, "ConfigMap/"+ns+"/orphan", u.Entry().ID().String())
	assert.Equal(t, "Unreadable", u.Reason)
	assert.Equal(t, second.UUID, u.SourceSynthesisUUID)
	admin, err := env.Kubeconfig("")
	require.NoError(t, err)
	code, out, stderr := runToExit(t, "inspect", "--lineage", lineage, "--remote-kubeconfig", admin)
	require.Zero(t, code, stderr)
	assert.Regexp(t, `(?m)^UNRESOLVED .*\(1\)$`, out)
	assert.Regexp(t, `(?m)^ConfigMap/`+ns+`/orphan\s+\S+\s+Unreadable\s+`, out)

	// An operator dismisses it with an annotation (as kubectl annotate writes it): the
	// history's write time does not move, and inspect no longer lists it.
	_, secrets := waitForSnapshot(t, c, "kube-system", lineage, string(recreated.GetUID()), third.UUID)
	before := writtenAt(t, secrets)
	dismissal := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, domain.AnnotationUnresolvedDismissed,
		`{"snapshot":"`+third.UUID+`","ids":["ConfigMap/`+ns+`/orphan"]}`)
	_, err = c.Kube.CoreV1().Secrets("kube-system").Patch(ctx, secrets[0].Name, types.MergePatchType, []byte(dismissal),
		metav1.PatchOptions{FieldManager: "kubectl-annotate"})
	require.NoError(t, err)
	snap, secrets = waitForSnapshot(t, c, "kube-system", lineage, string(recreated.GetUID()), third.UUID)
	assert.Empty(t, snap.Unresolved())
	assert.Equal(t, before, writtenAt(t, secrets))
	code, out, stderr = runToExit(t, "inspect", "--lineage", lineage, "--remote-kubeconfig", admin)
	require.Zero(t, code, stderr)
	assert.NotContains(t, out, "UNRESOLVED")
	ctl.Stop(t)
}

// boundTo renames an RBAC object of deploy/ for user and binds it to that user alone.
func boundTo(obj *unstructured.Unstructured, user string) *unstructured.Unstructured {
	out := obj.DeepCopy()
	out.SetName(obj.GetName() + "-" + user)
	if kind := out.GetKind(); kind == "RoleBinding" || kind == "ClusterRoleBinding" {
		role, _, _ := unstructured.NestedString(out.Object, "roleRef", "name")
		_ = unstructured.SetNestedField(out.Object, role+"-"+user, "roleRef", "name")
		out.Object["subjects"] = []any{map[string]any{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}}
	}
	return out
}
