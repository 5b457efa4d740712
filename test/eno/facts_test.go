//go:build eno

package eno

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// TestEnoFacts checks, on stock Eno alone, the behaviour design §6.2 builds the hand-off on.
// If one of these fails, the hand-off's assumptions no longer hold for the Eno under test.
// (design §6.2's fact that a slice without a controller owner makes eno-controller's slice cleanup
// panic is not run here: it would panic the shared eno-controller. It follows from Eno's
// internal/controllers/resourceslice/slicecleanup.go, which dereferences
// metav1.GetControllerOf(slice) unchecked.)
func TestEnoFacts(t *testing.T) {
	s := newScenario(t, modes[0], settings{})
	created := s.createComposition(comp, "synth-one", nil)
	s.waitConfigMaps("cm-a")
	syn := s.waitReady(comp, "")

	t.Run("an unreferenced slice is never applied and eno-controller deletes it 5-10 s after creation", func(t *testing.T) {
		s := s.sub(t)
		begin := time.Now()
		s.createSlice("web-unreferenced", created.GetUID(), syn.UUID, false, configMap(s.ns, "cm-x", false))
		var gone time.Time
		s.waitFor("unreferenced slice deleted", time.Minute, func(ctx context.Context) error {
			if uid, err := s.configMapUID(ctx, "cm-x"); err != nil || uid != "" {
				return fmt.Errorf("cm-x: %q %v", uid, err)
			}
			_, err := admin.Dynamic.Resource(kubetest.ResourceSliceResource).Namespace(s.ns).Get(ctx, "web-unreferenced", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				gone = time.Now()
				return nil
			}
			return fmt.Errorf("slice still there (%v)", err)
		})
		if uid, _ := s.configMapUID(s.ctx(), "cm-x"); uid != "" {
			t.Fatalf("the unreferenced slice's ConfigMap was applied")
		}
		age := gone.Sub(begin)
		t.Logf("deleted %.1f s after creation", age.Seconds())
		if age < 4*time.Second {
			t.Errorf("deleted %s after creation; design §6.2 says 5-10 s", age)
		}
	})

	t.Run("appending a status-less slice clears ready at once; the running reconciler applies it only once it reloads the synthesis", func(t *testing.T) {
		s := s.sub(t)
		s.createSlice("web-appended", created.GetUID(), syn.UUID, true, configMap(s.ns, "cm-y", false))
		begin := time.Now()
		s.appendSlice(syn.UUID, "web-appended")
		s.waitFor("ready cleared by eno-controller", time.Minute, func(ctx context.Context) error {
			u, err := s.getComposition(ctx, comp)
			if err != nil {
				return err
			}
			if cur := currentSynthesis(u); cur.Ready || cur.UUID != syn.UUID {
				return fmt.Errorf("synthesis %+v", cur)
			}
			return nil
		})
		t.Logf("ready cleared %.2f s after the append", time.Since(begin).Seconds())

		s.holdsFor("the running eno-reconciler does not apply a slice appended under the same synthesis", 10*time.Second, func(ctx context.Context) error {
			if uid, err := s.configMapUID(ctx, "cm-y"); err != nil || uid != "" {
				return fmt.Errorf("cm-y applied (uid %q, %v)", uid, err)
			}
			return nil
		})
		s.restartReconciler()
		s.waitConfigMaps("cm-y")
		s.waitReady(comp, "")
	})

	t.Run("force-resynthesis starts one synthesis only when it names the current one, and stays", func(t *testing.T) {
		s := s.sub(t)
		u, err := s.getComposition(s.ctx(), comp)
		if err != nil {
			t.Fatal(err)
		}
		current := currentSynthesis(u).UUID
		since := time.Now()
		s.annotate(comp, forceResynthesis, "00000000-0000-0000-0000-000000000000")
		s.requireStable(current, since)

		s.annotate(comp, forceResynthesis, current)
		next := s.waitReady(comp, current)
		s.requireStable(next.UUID, since)
		u, err = s.getComposition(s.ctx(), comp)
		if err != nil {
			t.Fatal(err)
		}
		if got := u.GetAnnotations()[forceResynthesis]; got != current {
			t.Errorf("%s = %q after the synthesis, want it left at %q", forceResynthesis, got, current)
		}
	})

	t.Run("an empty synthesis has no resourceSlices and rejects an append with 422", func(t *testing.T) {
		s := s.sub(t)
		// A Composition of its own: a synthesis that drops resources is not empty (it carries
		// their tombstones).
		const empty = "empty"
		s.createComposition(empty, "synth-none", nil)
		syn := s.waitReady(empty, "")
		u, err := s.getComposition(s.ctx(), empty)
		if err != nil {
			t.Fatal(err)
		}
		if refs, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "currentSynthesis", "resourceSlices"); found {
			t.Fatalf("empty synthesis %s has resourceSlices %v", syn.UUID, refs)
		}
		patch, _ := json.Marshal([]map[string]any{
			{"op": "test", "path": "/status/currentSynthesis/uuid", "value": syn.UUID},
			{"op": "add", "path": "/status/currentSynthesis/resourceSlices/-", "value": map[string]string{"name": "empty-appended"}},
		})
		_, err = admin.Dynamic.Resource(kubetest.CompositionResource).Namespace(s.ns).Patch(s.ctx(), empty, types.JSONPatchType, patch, metav1.PatchOptions{}, "status")
		if !apierrors.IsInvalid(err) {
			t.Fatalf("appending with /- to a missing array: %v, want 422 Invalid", err)
		}
	})
}

// sub lends the scenario to a subtest: the same namespace and processes, the subtest's t
// until the subtest ends.
func (s *scenario) sub(t *testing.T) *scenario {
	parent := s.t
	s.t = t
	t.Cleanup(func() { s.t = parent })
	return s
}

// configMap is a manifest of a ConfigMap as the executor writes it into a slice.
func configMap(namespace, name string, deleted bool) map[string]any {
	manifest, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": namespace},
	})
	r := map[string]any{"manifest": string(manifest)}
	if deleted {
		r["deleted"] = true
	}
	return r
}

// createSlice creates a ResourceSlice controlled by the Composition, as Eno's executor does,
// with Eno's cleanup finalizer when finalizer is set.
func (s *scenario) createSlice(name string, owner types.UID, synthesisUUID string, finalizer bool, resources ...map[string]any) {
	s.t.Helper()
	items := make([]any, len(resources))
	for i, r := range resources {
		items[i] = r
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eno.azure.io/v1",
		"kind":       "ResourceSlice",
		"metadata": map[string]any{
			"name": name, "namespace": s.ns,
			"ownerReferences": []any{map[string]any{
				"apiVersion": "eno.azure.io/v1", "kind": "Composition", "name": comp, "uid": string(owner),
				"controller": true, "blockOwnerDeletion": true,
			}},
		},
		"spec": map[string]any{"synthesisUUID": synthesisUUID, "resources": items},
	}}
	if finalizer {
		u.SetFinalizers([]string{"eno.azure.io/cleanup"})
	}
	if _, err := admin.Dynamic.Resource(kubetest.ResourceSliceResource).Namespace(s.ns).Create(s.ctx(), u, metav1.CreateOptions{}); err != nil {
		s.t.Fatalf("creating ResourceSlice %s: %v", name, err)
	}
}

// appendSlice appends a slice to status.currentSynthesis.resourceSlices with a JSON patch that
// tests the synthesis UUID.
func (s *scenario) appendSlice(synthesisUUID, slice string) {
	s.t.Helper()
	patch, _ := json.Marshal([]map[string]any{
		{"op": "test", "path": "/status/currentSynthesis/uuid", "value": synthesisUUID},
		{"op": "add", "path": "/status/currentSynthesis/resourceSlices/-", "value": map[string]string{"name": slice}},
	})
	if _, err := admin.Dynamic.Resource(kubetest.CompositionResource).Namespace(s.ns).Patch(s.ctx(), comp, types.JSONPatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		s.t.Fatalf("appending %s to the current synthesis: %v", slice, err)
	}
}
