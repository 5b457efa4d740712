package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// lineageOverride is the Composition annotation that names its lineage (SPEC §3).
const lineageOverride = "eno.azure.io/inventory-lineage"

// SPEC §4, LineageCollision, on the real binary and API server: two Compositions of one name in
// two namespaces share a lineage override (copied from a template), so they write the same
// Secret names. The second is refused, with an event and a metric, and the first's Secret is
// left byte for byte as it was. Once the first is gone, its Secret is a predecessor's history
// and the second records over it.
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
			{manifest: object("v1", "ConfigMap", ns, "settings-"+ns, map[string]string{"app": name}, nil, nil)},
		})
		publish(t, c, created, syn)
		waitForDecision(t, c, ns, name, syn.uuid)
		return string(created.GetUID()), syn.uuid
	}

	eastUID, eastSynth := create(east)
	_, before := waitForSnapshot(t, c, "kube-system", lineage, eastUID, eastSynth)
	require.Len(t, before, 1)
	assert.Equal(t, name+"-"+lineage+"-0", before[0].Name)

	westUID, westSynth := create(west)
	refused := waitForEvent(t, c, west, name, "LineageCollision")
	assert.Equal(t, "Warning", refused.Type)
	assert.Contains(t, refused.Message, east+"/"+name)
	waitFor(t, "the refusal metric", func(context.Context) error {
		status, body, err := httpGet(ctl.metricsURL)
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
	waitFor(t, "the west composition to be touched", func(ctx context.Context) error {
		cur, err := c.Dynamic.Resource(compositionGVR).Namespace(west).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		a := maps.Clone(cur.GetAnnotations())
		a["e2e.example.com/touched"] = "1"
		cur.SetAnnotations(a)
		_, err = c.Dynamic.Resource(compositionGVR).Namespace(west).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	_, replaced := waitForSnapshot(t, c, "kube-system", lineage, westUID, westSynth)
	require.Len(t, replaced, 1)
	assert.Equal(t, before[0].Name, replaced[0].Name)
	assert.Equal(t, west, replaced[0].Annotations["eno.azure.io/composition-namespace"])

	ctl.stop(t)
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
