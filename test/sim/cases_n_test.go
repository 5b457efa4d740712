package sim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// The cases of issue 26's evidence items N1, N3 and N5, and of the sequences the design no
// longer has room for (K3, N4), appended to the case list.
func init() {
	cases = append(cases, cascadeCases...)
}

var cascadeCases = []namedCase{
	{
		// N1: the old incarnation deployed two Namespaces. The recreated one still deploys into
		// app (keep); the other, old-ns, holds only orphans. A Namespace is never handed to Eno
		// (CascadingKind, design §6.3): both are listed, their orphans handed over.
		name:   "N1",
		story:  cascadeStory,
		points: []string{"A handed off the orphans and listed the Namespaces, handing over neither", "Eno deleted the orphans and kept both Namespaces"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			o := a.reconcile(w.ref)
			d := decisionOf(t, w)
			reach(t, w, "A handed off the orphans and listed the Namespaces, handing over neither",
				o.err == nil && d.Outcome == domain.OutcomeRecovered && strings.Contains(d.Message, domain.DropCascading.String()) &&
					!handedOff(w, nsRef("app")) && !handedOff(w, nsRef("old-ns")) && handedOff(w, cmRef("old-ns", "orphan-c")))
			w.settle("eno carries the hand-off")
			reach(t, w, "Eno deleted the orphans and kept both Namespaces",
				exists(w, nsRef("old-ns")) && !exists(w, cmRef("old-ns", "orphan-c")) && !exists(w, cmRef("app", "orphan-a")) &&
					exists(w, nsRef("app")) && exists(w, cmRef("app", "keep")))
		},
	},
	{
		// N3: every replica read of orphan-a fails with 503. Before, the whole plan failed and was
		// retried for ever, so orphan-b was never deleted either. Now orphan-a is kept as
		// Unreadable, said in the decision, and the rest is handed over.
		name:   "N3",
		points: []string{"every read of orphan-a fails with 503", "A retried the failed read twice, deciding nothing", "A decided Recovered, keeping orphan-a as Unreadable", "Eno deleted orphan-b and kept orphan-a"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			what, failing := persistentError(w)
			reach(t, w, "every read of orphan-a fails with 503", failing && what == "every read of ConfigMap app/orphan-a fails with 503")
			first, second := a.reconcile(w.ref), a.reconcile(w.ref)
			reach(t, w, "A retried the failed read twice, deciding nothing", first.err != nil && second.err != nil &&
				strings.Contains(second.err.Error(), "before it is kept as unreadable"))
			o := a.reconcile(w.ref)
			d := decisionOf(t, w)
			reach(t, w, "A decided Recovered, keeping orphan-a as Unreadable",
				o.err == nil && d.Outcome == domain.OutcomeRecovered && d.Tombstones == 1 &&
					strings.Contains(d.Message, "1 Unreadable (first ConfigMap/app/orphan-a: reading it failed") && !handedOff(w, cmRef("app", "orphan-a")))
			w.settle("eno carries the hand-off")
			reach(t, w, "Eno deleted orphan-b and kept orphan-a", !exists(w, cmRef("app", "orphan-b")) && exists(w, cmRef("app", "orphan-a")))
		},
	},
	{
		// N5: orphan-f was recorded with disable-reconciliation "false". After the hand-off an
		// operator pauses the Composition: the precondition's pause check keeps it. Then the
		// operator removes the arming annotation by hand and lifts the pause: the precondition
		// fails to evaluate and applies nothing, so the tombstone's own value is what Eno reads,
		// before the Composition's. It must be "true", never the recorded "false".
		name:   "N5",
		story:  recordedFalseStory,
		points: []string{"A handed off orphan-f", "an operator paused the composition", "Eno kept orphan-f while paused and armed", "an operator disarmed by hand and lifted the pause", "Eno kept orphan-f: the tombstone's own value is true, not the recorded false"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			o := a.reconcile(w.ref)
			reach(t, w, "A handed off orphan-f", o.err == nil && decisionOf(t, w).Outcome == domain.OutcomeRecovered && handedOff(w, cmRef("app", "orphan-f")))
			_, paused := pauseComposition(w)
			reach(t, w, "an operator paused the composition", paused)
			w.settle("eno carries the hand-off of a paused composition")
			reach(t, w, "Eno kept orphan-f while paused and armed", exists(w, cmRef("app", "orphan-f")))
			w.disarmedByHand = annotate(w, domain.AnnotationArmed, "")
			reach(t, w, "an operator disarmed by hand and lifted the pause", w.disarmedByHand && annotate(w, domain.AnnotationDisableReconciliation, ""))
			w.settle("eno acts on the disarmed composition")
			reach(t, w, "Eno kept orphan-f: the tombstone's own value is true, not the recorded false", exists(w, cmRef("app", "orphan-f")))
		},
	},
	{
		// K3: a writer of the two name series (a replica of the old code, mid-upgrade) left a
		// recovery slice under the whole-UUID name, holding a plain tombstone of orphan-a with no
		// precondition and a Recovered decision, and named it in the synthesis. The name family
		// is one prefix now, so the slice is in it; it is not a hand-off of ours, so it is refused
		// as RecoverySliceInvalid: never adopted, no decision, no resynthesis that would carry it,
		// and orphan-a, written since, is not deleted.
		name:   "K3",
		points: []string{"a stale writer's slice under the whole-UUID name is named", "an orphan was written after the history", "A refused it as RecoverySliceInvalid", "nothing was deleted"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			reach(t, w, "a stale writer's slice under the whole-UUID name is named", nameStaleSlice(t, w, w.cpAdmin, "orphan-a"))
			_, edited := editOrphan(w)
			reach(t, w, "an orphan was written after the history", edited)
			w.freshCaches()
			o := a.reconcile(w.ref)
			var invalid *domain.RecoverySliceInvalidError
			reach(t, w, "A refused it as RecoverySliceInvalid", errors.As(o.err, &invalid) && decisionOf(t, w).Outcome.IsZero() &&
				liveComposition(t, w).GetAnnotations()[domain.AnnotationForceResynthesis] == "")
			w.settle("eno acts on the named slice")
			reach(t, w, "nothing was deleted", exists(w, cmRef("app", "orphan-a")) && exists(w, cmRef("app", "orphan-b")))
		},
	},
	{
		// N4: the slice list fails for three watches in a row while another Composition takes
		// an orphan over with an identical manifest. Each failed watch asks to look again after
		// the interval, with no error (an error puts the Composition on the controller's backoff,
		// which grows to minutes), and the first watch after the outage disarms.
		name:   "N4",
		points: []string{"A handed off", "another composition took an orphan over, identical", "every failed watch asked to look again after the interval, with no error", "the first watch after the outage disarmed the hand-off"},
		script: func(t *testing.T, w *World) {
			a := w.replicas[0]
			w.settle("eno synthesizes the recreated composition")
			o := a.reconcile(w.ref)
			reach(t, w, "A handed off", o.err == nil && decisionOf(t, w).Outcome == domain.OutcomeRecovered && o.res.RequeueAfter == w.opts.RecheckInterval)
			_, took := takeover(w)
			w.clock.Advance(6e9)
			w.freshCaches()
			dispatched, _ := w.eno.Dispatch(t.Context(), w.ref.Namespace, "other")
			executed, _ := w.eno.Execute(t.Context(), w.ref.Namespace, "other")
			reach(t, w, "another composition took an orphan over, identical", took && dispatched && executed)
			// The watch reads the hand-off's own slice live; the fleet index answers from memory.
			list := "/apis/eno.azure.io/v1/namespaces/" + w.ref.Namespace + "/resourceslices/" + recoverySlices(w)[0].GetName()
			w.unavailable = append(w.unavailable, list)
			everyInterval := true
			for range 3 {
				w.clock.Advance(w.opts.RecheckInterval)
				w.freshCaches()
				o := a.reconcile(w.ref)
				everyInterval = everyInterval && o.err == nil && o.res.RequeueAfter == w.opts.RecheckInterval && liveComposition(t, w).GetAnnotations()[domain.AnnotationArmed] != domain.ArmedOff
			}
			reach(t, w, "every failed watch asked to look again after the interval, with no error", everyInterval)
			w.unavailable = slices.DeleteFunc(w.unavailable, func(p string) bool { return p == list })
			w.clock.Advance(w.opts.RecheckInterval)
			w.freshCaches()
			o = a.reconcile(w.ref)
			reach(t, w, "the first watch after the outage disarmed the hand-off", o.err == nil && liveComposition(t, w).GetAnnotations()[domain.AnnotationArmed] == domain.ArmedOff)
			w.settle("eno synthesizes the other composition and carries the hand-off")
		},
	},
}

// nameStaleSlice creates, as the old code's replica would have, a recovery slice under the
// whole-UUID name of the current synthesis holding a plain tombstone of the ConfigMap app/name
// (no precondition) and a Recovered decision, controlled by the Composition, and appends it to
// the synthesis's slice list.
func nameStaleSlice(t *testing.T, w *World, as dynamic.Interface, name string) bool {
	t.Helper()
	comp := liveComposition(t, w)
	uuid, _, _ := unstructured.NestedString(comp.Object, "status", "currentSynthesis", "uuid")
	sliceName := w.ref.Name + "-recovery-" + uuid + "-0"
	d := domain.Decision{SynthesisUUID: uuid, Outcome: domain.OutcomeRecovered, Tombstones: 1, TombstoneSlice: sliceName, DecidedAt: w.clock.Now().UTC().Truncate(time.Second)}
	tomb := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"app"}}`
	s := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eno.azure.io/v1", "kind": "ResourceSlice",
		"metadata": map[string]any{"name": sliceName, "namespace": w.ref.Namespace, "finalizers": []any{"eno.azure.io/cleanup"},
			"annotations": map[string]any{domain.AnnotationDecision: d.Encode()},
			"ownerReferences": []any{map[string]any{"apiVersion": "eno.azure.io/v1", "kind": "Composition", "name": w.ref.Name,
				"uid": string(comp.GetUID()), "controller": true, "blockOwnerDeletion": true}}},
		"spec": map[string]any{"synthesisUUID": uuid, "resources": []any{map[string]any{"manifest": tomb, "deleted": true}}},
	}}
	slices := as.Resource(enomodel.ResourceSliceGVR).Namespace(w.ref.Namespace)
	if _, err := slices.Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
		t.Logf("creating the stale slice: %v", err)
		return false
	}
	patch := `[{"op":"add","path":"/status/currentSynthesis/resourceSlices/-","value":{"name":"` + sliceName + `"}}]`
	_, err := as.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Patch(t.Context(), w.ref.Name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Logf("naming the stale slice: %v", err)
	}
	return err == nil
}

// recordedFalseStory: the old incarnation deployed keep and orphan-f, the latter with
// disable-reconciliation "false"; the recreated one keeps keep.
func recordedFalseStory() Story {
	keep := configMap("app", "keep", nil)
	return Story{Name: "recorded-false", Namespaces: []string{"app"},
		Old: []*unstructured.Unstructured{keep, configMap("app", "orphan-f", map[string]string{domain.AnnotationDisableReconciliation: "false"})},
		New: []*unstructured.Unstructured{keep.DeepCopy()}}
}

// exists reports whether the object is there downstream and not terminating.
func exists(w *World, ref enomodel.Ref) bool {
	u, err := w.oracle.get(context.Background(), ref)
	return err == nil && u.GetDeletionTimestamp() == nil
}

// liveComposition is the story's Composition as the API server holds it now.
func liveComposition(t *testing.T, w *World) *unstructured.Unstructured {
	t.Helper()
	comp, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Get(t.Context(), w.ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading composition %s: %v", w.ref, err)
	}
	return comp
}

// decisionOf is the decision on the story's Composition; the zero Decision when it has none.
func decisionOf(t *testing.T, w *World) domain.Decision {
	t.Helper()
	d, _ := domain.ParseDecision(liveComposition(t, w).GetAnnotations()[domain.AnnotationDecision])
	return d
}

// approve is an operator approving the held recovery of the current synthesis.
func approve(t *testing.T, w *World) bool {
	t.Helper()
	uuid, _, _ := unstructured.NestedString(liveComposition(t, w).Object, "status", "currentSynthesis", "uuid")
	return annotate(w, domain.AnnotationReview, "approve:"+uuid)
}

// handedOff reports whether a recovery slice holds a tombstone of ref.
func handedOff(w *World, ref enomodel.Ref) bool {
	for _, s := range recoverySlices(w) {
		items, _, _ := unstructured.NestedSlice(s.Object, "spec", "resources")
		for _, it := range items {
			u := &unstructured.Unstructured{}
			if raw, _ := it.(map[string]any)["manifest"].(string); u.UnmarshalJSON([]byte(raw)) == nil && enomodel.RefOf(u) == ref {
				return true
			}
		}
	}
	return false
}
