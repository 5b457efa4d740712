package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// lineageOverride is the Composition annotation that names its lineage (design §3).
const lineageOverride = "eno.azure.io/inventory-lineage"

// design §4, LineageCollision, on the real binary and API server: two Compositions of one name in
// two namespaces share a lineage override (copied from a template), so they write the same
// Secret names. The second is refused, with an event and a metric, and the first's Secret is
// left byte for byte as it was; its recovery adopts nothing of the other namespace's history
// (design §5 step 3, OtherNamespace). Once the first is gone, its Secret is still another
// namespace's and refused while adoption across namespaces is off; with
// --allow-cross-namespace-lineage it is a predecessor's history and the second records over it.
func TestLineageCollisionRefusesTheSecondComposition(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	const name = "web"
	suffix := rand.String(6)
	lineage, selector := "shared-"+suffix, "e2e-collision="+suffix
	east, west := c.NewNamespace(t, "east"), c.NewNamespace(t, "west")
	ctl := startController(t, "", "--composition-label-selector="+selector)

	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Secrets("kube-system").DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: lineageLabel + "=" + lineage})
	})
	create := func(ns string) (uid, synthesisUUID string) {
		created, err := kubetest.CreateComposition(ctx, c.Dynamic, domain.Composition{
			Namespace: ns, Name: name,
			Labels:      map[string]string{"e2e-collision": suffix},
			Annotations: map[string]string{optInAnnotation: "enabled", lineageOverride: lineage},
		})
		require.NoError(t, err)
		syn := newSynthesis(time.Now().Add(-time.Minute), []resource{
			{Manifest: object("v1", "ConfigMap", ns, "settings-"+ns, map[string]string{"app": name}, nil, nil)},
		})
		publish(t, c, created, syn)
		waitForDecision(t, c, ns, name, syn.UUID)
		return string(created.GetUID()), syn.UUID
	}

	eastUID, eastSynth := create(east)
	_, before := waitForSnapshot(t, c, "kube-system", lineage, eastUID, eastSynth)
	require.Len(t, before, 1)
	assert.Equal(t, name+"-"+lineage+"-0", before[0].Name)

	westUID, westSynth := create(west)
	wd := waitForDecision(t, c, west, name, westSynth)
	assert.Equal(t, "NothingToRecover", wd.Outcome.String(), wd.Message)
	assert.Equal(t, "OtherNamespace", wd.Reason, "east's history is another namespace's")
	refused := waitForEvent(t, c, west, name, "LineageCollision")
	assert.Equal(t, "Warning", refused.Type)
	assert.Contains(t, refused.Message, east+"/"+name)
	assert.Contains(t, refused.Message, "adoption across namespaces is off", "another namespace's history is refused whether or not its Composition lives")
	waitFor(t, "the refusal metric", func(context.Context) error {
		status, body, err := httpGet(ctl.MetricsURL)
		if err != nil || status != http.StatusOK {
			return fmt.Errorf("/metrics: %d, %v", status, err)
		}
		if v := parseSamples(body)[`eno_tombstone_recovery_refusals_total{reason="LineageCollision"}`]; v < 1 {
			return fmt.Errorf("refusals_total{reason=LineageCollision} = %g", v)
		}
		return nil
	})

	// The refusal is retried with backoff; let a few retries pass, then compare.
	time.Sleep(3 * time.Second)
	after, err := listInventory(ctx, c, "kube-system", lineage)
	require.NoError(t, err)
	require.Len(t, after, 1)
	assertSameSecret(t, before[0], after[0])

	// The first Composition goes away: its Secret is now a predecessor's history, replaced as usual.
	require.NoError(t, c.Dynamic.Resource(compositionGVR).Namespace(east).Delete(ctx, name, metav1.DeleteOptions{}))
	waitFor(t, "the east composition to be gone", func(ctx context.Context) error {
		if _, err := c.Dynamic.Resource(compositionGVR).Namespace(east).Get(ctx, name, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	// Nudge the west Composition past its backoff.
	touch := func(value string) {
		waitFor(t, "the west composition to be touched", func(ctx context.Context) error {
			cur, err := c.Dynamic.Resource(compositionGVR).Namespace(west).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			a := maps.Clone(cur.GetAnnotations())
			a["e2e.example.com/touched"] = value
			cur.SetAnnotations(a)
			_, err = c.Dynamic.Resource(compositionGVR).Namespace(west).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	}
	// Adoption across namespaces is off: east's Secret is refused even though east is gone.
	touch("1")
	time.Sleep(3 * time.Second)
	after, err = listInventory(ctx, c, "kube-system", lineage)
	require.NoError(t, err)
	require.Len(t, after, 1)
	assertSameSecret(t, before[0], after[0])
	ctl.Stop(t)

	// Allowed: east's Secret is a predecessor's history, replaced as usual.
	ctl = startController(t, "", "--composition-label-selector="+selector, "--allow-cross-namespace-lineage")
	touch("2")
	_, replaced := waitForSnapshot(t, c, "kube-system", lineage, westUID, westSynth)
	require.Len(t, replaced, 1)
	assert.Equal(t, before[0].Name, replaced[0].Name)
	assert.Equal(t, west, replaced[0].Annotations["eno.azure.io/composition-namespace"])

	ctl.Stop(t)
}

// assertSameSecret checks that nothing wrote the Secret: same resourceVersion, type, labels,
// annotations and data, byte for byte.
func assertSameSecret(t *testing.T, want, got corev1.Secret) {
	t.Helper()
	assert.Equal(t, want.ResourceVersion, got.ResourceVersion, "secret %s was written", want.Name)
	assert.Equal(t, want.Type, got.Type)
	assert.Equal(t, want.Labels, got.Labels)
	assert.Equal(t, want.Annotations, got.Annotations)
	require.Equal(t, len(want.Data), len(got.Data))
	for k, v := range want.Data {
		assert.Equal(t, string(v), string(got.Data[k]), "data %s of secret %s", k, want.Name)
	}
}

// design §5 step 3, OtherNamespace, on the real binary and API server: a Composition in one
// namespace copies another namespace's lineage override, and that namespace's Composition is
// gone, so its history is nobody's. With --allow-cross-namespace-lineage off (the default) the
// copy adopts none of it: NothingToRecover/OtherNamespace, a Warning event naming the
// namespace, a refusal counted, nothing handed to Eno, the other namespace's objects and
// Secrets untouched; the decision is finished, so the copy records its own history.
func TestAnotherNamespacesHistoryIsNotAdopted(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	suffix := rand.String(6)
	lineage, selector := "adopt-"+suffix, "e2e-adopt="+suffix
	home, away := c.NewNamespace(t, "home"), c.NewNamespace(t, "away")
	ctl := startController(t, "", "--composition-label-selector="+selector)
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Secrets("kube-system").DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: lineageLabel + "=" + lineage})
	})
	create := func(ns, name string, objects ...string) (*unstructured.Unstructured, domain.Decision) {
		created, err := kubetest.CreateComposition(ctx, c.Dynamic, domain.Composition{
			Namespace: ns, Name: name,
			Labels:      map[string]string{"e2e-adopt": suffix},
			Annotations: map[string]string{optInAnnotation: "enabled", lineageOverride: lineage},
		})
		require.NoError(t, err)
		var rs []resource
		for _, o := range objects {
			rs = append(rs, resource{Manifest: object("v1", "ConfigMap", ns, o, map[string]string{"app": name}, nil, nil)})
		}
		syn := newSynthesis(time.Now().Add(-time.Minute), rs)
		publish(t, c, created, syn)
		return created, waitForDecision(t, c, ns, name, syn.UUID)
	}

	web, d := create(home, "web", "web-a", "web-b")
	require.Equal(t, "NoInventory", d.Outcome.String(), d.Message)
	_, homeSecrets := waitForSnapshot(t, c, "kube-system", lineage, string(web.GetUID()), d.SynthesisUUID)
	require.NoError(t, c.Dynamic.Resource(compositionGVR).Namespace(home).Delete(ctx, "web", metav1.DeleteOptions{}))
	waitFor(t, "the home composition to be gone", func(ctx context.Context) error {
		if _, err := c.Dynamic.Resource(compositionGVR).Namespace(home).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})

	// away/api produces nothing of home's: adopted, home's history would tombstone web-a and web-b.
	api, d := create(away, "api", "api-a")
	assert.Equal(t, "NothingToRecover", d.Outcome.String(), d.Message)
	assert.Equal(t, "OtherNamespace", d.Reason)
	assert.Contains(t, d.Message, "("+home+")")
	assert.Zero(t, d.Tombstones)
	assert.Empty(t, d.TombstoneSlice)
	assert.Empty(t, d.SourceSynthesisUUID, "no snapshot is selected")
	assert.Empty(t, d.RecoveredFrom, "OtherNamespace sets no recoveredFrom")
	warned := waitForEvent(t, c, away, "api", "NothingToRecover")
	assert.Equal(t, "Warning", warned.Type)
	assert.Contains(t, warned.Message, "OtherNamespace")
	assert.Contains(t, warned.Message, home)
	waitFor(t, "the refusal metric", func(context.Context) error {
		status, body, err := httpGet(ctl.MetricsURL)
		if err != nil || status != http.StatusOK {
			return fmt.Errorf("/metrics: %d, %v", status, err)
		}
		if v := parseSamples(body)[`eno_tombstone_recovery_refusals_total{reason="OtherNamespace"}`]; v < 1 {
			return fmt.Errorf("refusals_total{reason=OtherNamespace} = %g", v)
		}
		return nil
	})
	list, err := c.Dynamic.Resource(sliceGVR).Namespace(away).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, s := range list.Items {
		assert.NotContains(t, s.GetName(), "-recovery-", "recovery slice %s was published", s.GetName())
	}
	for _, o := range []string{"web-a", "web-b"} {
		_, err := c.Kube.CoreV1().ConfigMaps(home).Get(ctx, o, metav1.GetOptions{})
		assert.NoError(t, err, "home's %s is untouched", o)
	}

	// Finished: away/api records its own history at names of its own; home's is left as it was.
	waitForOwnSnapshot := func() {
		waitFor(t, "away/api's snapshot", func(ctx context.Context) error {
			secrets, err := listInventory(ctx, c, "kube-system", lineage)
			if err != nil {
				return err
			}
			for _, s := range secrets {
				if s.Annotations["eno.azure.io/composition-uid"] == string(api.GetUID()) {
					return nil
				}
			}
			return errors.New("not recorded yet")
		})
	}
	waitForOwnSnapshot()
	after, err := listInventory(ctx, c, "kube-system", lineage)
	require.NoError(t, err)
	for _, want := range homeSecrets {
		found := false
		for _, got := range after {
			if got.Name == want.Name {
				assertSameSecret(t, want, got)
				found = true
			}
		}
		assert.True(t, found, "secret %s is still there", want.Name)
	}
	ctl.Stop(t)
}
