package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The worked example of design §3.1.
const (
	exampleLineage   = "a6d6889313c2"
	exampleCanonical = `[{"version":"v1","kind":"ConfigMap","namespace":"team-a","name":"web-settings","labels":{"app":"web","tier":"frontend"},"annotations":{"eno.azure.io/deletion-group":"2","eno.azure.io/readiness-group":"1"}},{"group":"apps","version":"v1","kind":"Deployment","namespace":"team-a","name":"web","labels":{"app":"web"},"annotations":{"eno.azure.io/deletion-group":"-1"}},{"group":"rbac.authorization.k8s.io","version":"v1","kind":"ClusterRole","name":"web-reader"}]`
	exampleDigest    = "sha256:ad60f577b0e7993930226e46802f03234a8602561918249f1b47b759e672373b"
)

// Manifests of team-a/web. They carry spec, data and other annotations that the inventory
// must leave out.
var (
	webSettings = object("v1", "ConfigMap", "team-a", "web-settings",
		map[string]string{"app": "web", "tier": "frontend"},
		map[string]string{readinessGroup: "1", deletionGroup: "2", "example.com/owner": "team-a"},
		map[string]any{"data": map[string]any{"LOG_LEVEL": "info"}})
	webDeployment = deployment("team-a", "web", map[string]string{"app": "web"}, map[string]string{deletionGroup: "-1"})
	webReader     = object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "web-reader", nil, nil,
		map[string]any{"rules": []any{}})
	webService = service("team-a", "web", map[string]string{"app": "web"})
)

// exampleSynthesis produces the three resources of design §3.1 over two slices, next to a Patch and
// a tombstone that the inventory must not hold.
func exampleSynthesis(at time.Time) synthesis {
	return newSynthesis(at,
		[]resource{{Manifest: webSettings}, {Manifest: patchOf("v1", "Namespace", "", "team-a")}},
		[]resource{{Manifest: webDeployment}, {Manifest: webReader},
			{Manifest: object("v1", "Secret", "team-a", "web-legacy", nil, nil, nil), Deleted: true}},
	)
}

func TestLifecycleRecordsThenRecoversAfterRecreation(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	const ns, name = "team-a", "web"
	ensureNamespace(t, c, ns)
	// The worked example of design §3.1 fixes the names; clear what an earlier run under -count left.
	err := c.Dynamic.Resource(compositionGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
	require.True(t, err == nil || apierrors.IsNotFound(err), "%v", err)
	require.NoError(t, c.Kube.CoreV1().Secrets("kube-system").DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: lineageLabel + "=" + exampleLineage}))
	ctl := startController(t, "", "--composition-namespace="+ns)

	// The first incarnation: a decision for its synthesis, then its snapshot.
	comp := createComposition(t, c, ns, name)
	first := exampleSynthesis(time.Now().Add(-10 * time.Minute))
	publish(t, c, comp, first)

	d := waitForDecision(t, c, ns, name, first.UUID)
	assert.Equal(t, "NoInventory", d.Outcome.String())
	assert.Zero(t, d.Tombstones)
	assert.Empty(t, d.TombstoneSlice)

	_, secrets := waitForSnapshot(t, c, "kube-system", exampleLineage, string(comp.GetUID()), first.UUID)
	require.Len(t, secrets, 1)
	s := secrets[0]
	assert.Equal(t, "web-a6d6889313c2-0", s.Name)
	assert.Equal(t, secretType, string(s.Type))
	assert.Equal(t, map[string]string{managedByLabel: managedByValue, lineageLabel: exampleLineage}, s.Labels)
	kubeSystem, err := c.Kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"eno.azure.io/control-plane":              string(kubeSystem.UID), // design §3: one cluster, so its own kube-system
		"eno.azure.io/composition-namespace":      ns,
		"eno.azure.io/composition-name":           name,
		"eno.azure.io/composition-uid":            string(comp.GetUID()),
		"eno.azure.io/source-synthesis-uuid":      first.UUID,
		"eno.azure.io/source-synthesis-timestamp": first.Synthesized.Format(time.RFC3339),
		"eno.azure.io/inventory-chunk-index":      "0",
		"eno.azure.io/inventory-chunk-count":      "1",
		"eno.azure.io/inventory-digest":           exampleDigest,
		"eno.azure.io/inventory-format":           "2",
	}, s.Annotations)
	require.Len(t, s.Data, 1)
	assert.Equal(t, exampleCanonical, string(s.Data[dataKey]))
	assert.Len(t, s.Data[dataKey], 460)

	// Decision first, then the Secret: with one etcd, resourceVersions are its revisions, and
	// nothing writes the Composition after its decision.
	decided, err := c.Dynamic.Resource(compositionGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Less(t, revision(t, decided.GetResourceVersion()), revision(t, s.ResourceVersion),
		"the inventory Secret was written before the decision")

	// Delete (orphaning) and recreate: a new UID whose synthesis drops the Deployment, patches
	// the ClusterRole instead of producing it, and adds a Service.
	client := c.Dynamic.Resource(compositionGVR).Namespace(ns)
	require.NoError(t, client.Delete(ctx, name, metav1.DeleteOptions{}))
	waitFor(t, "the first composition to be gone", func(ctx context.Context) error {
		_, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	recreated := createComposition(t, c, ns, name)
	require.NotEqual(t, comp.GetUID(), recreated.GetUID())
	second := newSynthesis(time.Now().Add(-5*time.Minute),
		[]resource{{Manifest: webSettings}, {Manifest: patchOf("rbac.authorization.k8s.io/v1", "ClusterRole", "", "web-reader")}},
		[]resource{{Manifest: webService}},
	)
	publish(t, c, recreated, second)

	d = waitForDecision(t, c, ns, name, second.UUID)
	sliceName := d.TombstoneSlice
	assert.Equal(t, "Recovered", d.Outcome.String())
	assert.Empty(t, d.Reason)
	assert.Equal(t, 1, d.Tombstones)
	assert.Regexp(t, `^web-recovery-`+second.UUID[:8]+`-[0-9a-f]{16}-0$`, sliceName, "the slice is named by its content")
	assert.Equal(t, first.UUID, d.SourceSynthesisUUID)
	if assert.NotNil(t, d.SourceSynthesisTimestamp) {
		assert.True(t, first.Synthesized.Equal(*d.SourceSynthesisTimestamp), "source timestamp %s", d.SourceSynthesisTimestamp)
	}

	slice, err := c.Dynamic.Resource(sliceGVR).Namespace(ns).Get(ctx, sliceName, metav1.GetOptions{})
	require.NoError(t, err, "the decision names tombstone slice %s", sliceName)
	assertOwnedBy(t, slice, recreated)
	uuid, _, _ := unstructured.NestedString(slice.Object, "spec", "synthesisUUID")
	assert.Equal(t, second.UUID, uuid)
	resources, _, _ := unstructured.NestedSlice(slice.Object, "spec", "resources")
	require.Len(t, resources, 1)
	r := resources[0].(map[string]any)
	assert.Equal(t, true, r["deleted"])
	// The recorded identity, labels and annotations, disabled unless its precondition holds on
	// Eno's live read (design §6.2).
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(r["manifest"].(string)), &m))
	annotations, _, _ := unstructured.NestedStringMap(m, "metadata", "annotations")
	assert.Equal(t, "true", annotations["eno.azure.io/disable-reconciliation"])
	assert.Contains(t, annotations["eno.azure.io/overrides"], "eno.azure.io/tombstone-recovery-armed")
	delete(annotations, "eno.azure.io/disable-reconciliation")
	delete(annotations, "eno.azure.io/overrides")
	require.NoError(t, unstructured.SetNestedStringMap(m, annotations, "metadata", "annotations"))
	plain, err := json.Marshal(m)
	require.NoError(t, err)
	assert.JSONEq(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"team-a",
		"labels":{"app":"web"},"annotations":{"eno.azure.io/deletion-group":"-1"}}}`, string(plain))

	// The hand-off (design §6.2): the slice is named by the synthesis, and a resynthesis of the
	// decided synthesis is requested. A synthesis decided Recovered is never recorded.
	// The decision (step 3) is written before steps 4 and 5: wait for the resynthesis request.
	var handedOff *unstructured.Unstructured
	waitFor(t, "the forced resynthesis", func(ctx context.Context) error {
		var err error
		if handedOff, err = client.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if got := handedOff.GetAnnotations()["eno.azure.io/force-resynthesis"]; got != second.UUID {
			return fmt.Errorf("force-resynthesis is %q", got)
		}
		return nil
	})
	refs, _, _ := unstructured.NestedSlice(handedOff.Object, "status", "currentSynthesis", "resourceSlices")
	assert.Contains(t, refs, map[string]any{"name": sliceName})
	assertNoSnapshotOf(t, c, "kube-system", exampleLineage, second.UUID)

	// Eno's next synthesis carries the tombstone in its own slices; it decides nothing new
	// (AlreadyDecided) and is the one recorded, over the same chunk name.
	carried := resource{Manifest: r["manifest"].(string), Deleted: true}
	third := newSynthesis(time.Now().Add(-4*time.Minute),
		[]resource{{Manifest: webSettings}, {Manifest: patchOf("rbac.authorization.k8s.io/v1", "ClusterRole", "", "web-reader")}, carried},
		[]resource{{Manifest: webService}},
	)
	publish(t, c, recreated, third)
	d = waitForDecision(t, c, ns, name, third.UUID)
	assert.Equal(t, "NothingToRecover", d.Outcome.String())
	assert.Equal(t, "AlreadyDecided", d.Reason)
	assert.Equal(t, first.UUID, d.RecoveredFrom)
	assert.Zero(t, d.Tombstones)

	wantCanonical := `[{"version":"v1","kind":"ConfigMap","namespace":"team-a","name":"web-settings","labels":{"app":"web","tier":"frontend"},"annotations":{"eno.azure.io/deletion-group":"2","eno.azure.io/readiness-group":"1"}},{"version":"v1","kind":"Service","namespace":"team-a","name":"web","labels":{"app":"web"}}]`
	sum := sha256.Sum256([]byte(wantCanonical))
	snap, secrets := waitForSnapshot(t, c, "kube-system", exampleLineage, string(recreated.GetUID()), third.UUID)
	require.Len(t, secrets, 1)
	assert.Equal(t, "web-a6d6889313c2-0", secrets[0].Name)
	assert.Equal(t, wantCanonical, string(secrets[0].Data[dataKey]))
	assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), secrets[0].Annotations["eno.azure.io/inventory-digest"])
	assert.Equal(t, third.Synthesized.Format(time.RFC3339), secrets[0].Annotations["eno.azure.io/source-synthesis-timestamp"])
	assert.Equal(t, 2, snap.Inventory().Len())

	ctl.Stop(t)
}

func revision(t *testing.T, rv string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	require.NoError(t, err)
	return n
}

// assertOwnedBy checks the slice is owned by exactly this Composition incarnation.
func assertOwnedBy(t *testing.T, obj, owner *unstructured.Unstructured) {
	t.Helper()
	refs := obj.GetOwnerReferences()
	require.Len(t, refs, 1)
	assert.Equal(t, "eno.azure.io/v1", refs[0].APIVersion)
	assert.Equal(t, "Composition", refs[0].Kind)
	assert.Equal(t, owner.GetName(), refs[0].Name)
	assert.Equal(t, owner.GetUID(), refs[0].UID)
}
