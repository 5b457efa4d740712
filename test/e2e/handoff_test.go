package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// handoffWorld is a Composition web of namespace ns recorded with the ConfigMaps kept and orphan,
// deleted (orphaning) and recreated without orphan, its new synthesis published: what every test
// of this file starts from.
type handoffWorld struct {
	ns        string
	ctl       *controller
	recreated *unstructured.Unstructured
	second    synthesis
	kept      string
	orphan    string
}

func newHandoffWorld(t *testing.T, c kubetest.Clients, prefix string, publishSecond bool, extra ...string) *handoffWorld {
	t.Helper()
	ctx := testContext(t)
	w := &handoffWorld{ns: c.NewNamespace(t, prefix)}
	w.kept = object("v1", "ConfigMap", w.ns, "kept", map[string]string{"app": "web"}, nil, map[string]any{"data": map[string]any{"k": "v"}})
	w.orphan = object("v1", "ConfigMap", w.ns, "orphan", map[string]string{"app": "web"}, nil, map[string]any{"data": map[string]any{"k": "v"}})
	w.ctl = startController(t, "", append([]string{"--composition-namespace=" + w.ns, "--pending-recheck-interval=1s"}, extra...)...)

	comp := createComposition(t, c, w.ns, "web")
	first := newSynthesis(time.Now().Add(-10*time.Minute), []resource{{Manifest: w.kept}, {Manifest: w.orphan}})
	publish(t, c, comp, first)
	waitForDecision(t, c, w.ns, "web", first.UUID)
	waitForSnapshot(t, c, "kube-system", lineageOf(w.ns, "web"), string(comp.GetUID()), first.UUID)

	client := c.Dynamic.Resource(compositionGVR).Namespace(w.ns)
	require.NoError(t, client.Delete(ctx, "web", metav1.DeleteOptions{}))
	waitFor(t, "the first composition to be gone", func(ctx context.Context) error {
		if _, err := client.Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	w.recreated = createComposition(t, c, w.ns, "web")
	w.second = newSynthesis(time.Now().Add(-5*time.Minute), []resource{{Manifest: w.kept}})
	if publishSecond {
		publish(t, c, w.recreated, w.second)
	}
	return w
}

// objectExists reports whether the ConfigMap is still downstream (no Eno runs here: only what
// the test deletes goes away).
func configMapExists(t *testing.T, c kubetest.Clients, ns, name string) bool {
	t.Helper()
	_, err := c.Kube.CoreV1().ConfigMaps(ns).Get(testContext(t), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

// Recovery slices are immutable: one gone after the decision (here as Eno's cleanup removes a
// slice, finalizer released, then deleted) is never written again. The pending watch goes on
// over what is left, and Eno handles the missing slice its own way (design §6.2).
func TestAGoneRecoverySliceIsNeverWrittenAgain(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	w := newHandoffWorld(t, c, "gone", true)
	d := waitForDecision(t, c, w.ns, "web", w.second.UUID)
	require.Equal(t, "Recovered", d.Outcome.String(), d.Message)
	comps := c.Dynamic.Resource(compositionGVR).Namespace(w.ns)
	waitFor(t, "the forced resynthesis", func(ctx context.Context) error {
		u, err := comps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if u.GetAnnotations()["eno.azure.io/force-resynthesis"] != w.second.UUID {
			return errors.New("not forced yet")
		}
		return nil
	})
	slices := c.Dynamic.Resource(sliceGVR).Namespace(w.ns)
	before, err := slices.Get(ctx, d.TombstoneSlice, metav1.GetOptions{})
	require.NoError(t, err)
	before.SetFinalizers(nil)
	_, err = slices.Update(ctx, before, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, slices.Delete(ctx, d.TombstoneSlice, metav1.DeleteOptions{}))

	time.Sleep(3 * time.Second) // three pending rechecks at --pending-recheck-interval=1s
	_, err = slices.Get(ctx, d.TombstoneSlice, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a gone recovery slice was written again: %v", err)
	u, err := comps.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, u.GetAnnotations()[decisionAnnotation], w.second.UUID, "the decision stands")
	w.ctl.Stop(t)
}

// A slice that the synthesis names under a recovery slice's name but that is not this
// controller's hand-off (here: no owner) is never adopted: no decision is written from it, a
// RecoverySliceInvalid warning names it, and nothing is deleted.
func TestForeignSliceUnderARecoveryNameIsNotAdopted(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	w := newHandoffWorld(t, c, "invalid", false)
	foreign := domain.RecoverySliceName("web", w.second.UUID, "0123456789abcdef", 0)
	_, err := kubetest.CreateSlice(ctx, c.Dynamic, domain.ResourceSlice{Namespace: w.ns, Name: foreign, SynthesisUUID: w.second.UUID,
		Resources: []domain.SliceResource{{Manifest: w.orphan, Deleted: true}}})
	require.NoError(t, err)
	w.second.ExtraSlices = []string{foreign}
	publish(t, c, w.recreated, w.second)

	e := waitForEvent(t, c, w.ns, "web", "RecoverySliceInvalid")
	assert.Equal(t, "Warning", e.Type)
	assert.Contains(t, e.Message, foreign)
	time.Sleep(2 * time.Second) // a few retries with backoff
	u, err := c.Dynamic.Resource(compositionGVR).Namespace(w.ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	if raw, ok := u.GetAnnotations()[decisionAnnotation]; ok {
		assert.NotContains(t, raw, w.second.UUID, "no decision for the synthesis that names the foreign slice")
	}
	assert.Empty(t, u.GetAnnotations()["eno.azure.io/force-resynthesis"])
	assert.True(t, configMapExists(t, c, w.ns, "orphan"))
	w.ctl.Stop(t)
}

// Did Eno do it? Before the synthesis that carried a hand-off is recorded, the objects it was
// handed are read once: here nothing deleted the orphan, so OrphansRemain names it, and the
// synthesis is recorded all the same.
func TestOrphansThatRemainAreReported(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	w := newHandoffWorld(t, c, "remain", true)
	d := waitForDecision(t, c, w.ns, "web", w.second.UUID)
	require.Equal(t, "Recovered", d.Outcome.String(), d.Message)
	slice, err := c.Dynamic.Resource(sliceGVR).Namespace(w.ns).Get(ctx, d.TombstoneSlice, metav1.GetOptions{})
	require.NoError(t, err)
	resources, _, _ := unstructured.NestedSlice(slice.Object, "spec", "resources")
	require.Len(t, resources, 1)
	carried := resource{Manifest: resources[0].(map[string]any)["manifest"].(string), Deleted: true}

	// Eno's carrying synthesis, Ready; its previous synthesis names the recovery slice.
	third := newSynthesis(time.Now().Add(-4*time.Minute), []resource{{Manifest: w.kept}, carried})
	third.Previous = &domain.Synthesis{UUID: w.second.UUID, Slices: []string{w.second.SliceName("web", 0), d.TombstoneSlice}}
	publish(t, c, w.recreated, third)
	got := waitForDecision(t, c, w.ns, "web", third.UUID)
	assert.Equal(t, "AlreadyDecided", got.Reason)
	e := waitForEvent(t, c, w.ns, "web", "OrphansRemain")
	assert.Equal(t, "Warning", e.Type)
	assert.True(t, strings.Contains(e.Message, "ConfigMap/"+w.ns+"/orphan"), e.Message)
	waitForSnapshot(t, c, "kube-system", lineageOf(w.ns, "web"), string(w.recreated.GetUID()), third.UUID)
	w.ctl.Stop(t)
}
