package sim

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// The adversaries of issue 36: tools that co-manage an orphan, a cluster controller, a later
// synthesis deploying into an orphaned Namespace, an operator approving what is held, the
// Composition deleted and created again, a slice's finalizer removed.

// gitOpsManager is the field manager of a GitOps tool taking objects over (as Flux does).
const gitOpsManager = "kustomize-controller"

// comanage is a GitOps tool writing an orphan: the very content it holds (the server writes
// nothing), or the same content with its own ownership labels.
func comanage(identical bool) func(w *World) (string, bool) {
	return func(w *World) (string, bool) {
		ref, u, ok := firstOrphan(w)
		if !ok {
			return "", false
		}
		return comanageObject(w, ref, u, identical)
	}
}

func comanageObject(w *World, ref enomodel.Ref, u *unstructured.Unstructured, identical bool) (string, bool) {
	gvr, _, _ := downstreamMapper(u.GroupVersionKind())
	client := w.ds.Client(gitOpsManager).Resource(gvr).Namespace(ref.Namespace)
	if identical {
		if _, err := client.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
			return "", false
		}
		return gitOpsManager + " applied " + ref.String() + " unchanged", true
	}
	patch := `{"metadata":{"labels":{"kustomize.toolkit.fluxcd.io/name":"app"}}}`
	if _, err := client.Patch(context.Background(), ref.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return "", false
	}
	return gitOpsManager + " applied " + ref.String() + " with its own labels", true
}

// clusterController is a controller of the cluster stamping a label on an orphan.
func clusterController(w *World) (string, bool) {
	ref, u, ok := firstOrphan(w)
	if !ok {
		return "", false
	}
	gvr, _, _ := downstreamMapper(u.GroupVersionKind())
	_, err := w.ds.Client(actorClusterController).Resource(gvr).Namespace(ref.Namespace).Patch(context.Background(), ref.Name,
		types.MergePatchType, []byte(`{"metadata":{"labels":{"scanned-by":"cluster-controller"}}}`), metav1.PatchOptions{})
	return actorClusterController + " labelled " + ref.String(), err == nil
}

// deployIntoNamespace: the recreated Composition's synthesizer now deploys a ConfigMap into an
// orphaned Namespace, there or not, and its spec changes, so Eno synthesizes it again (R1's
// step 2).
func deployIntoNamespace(w *World) (string, bool) {
	deployed := map[string]bool{}
	for _, m := range w.eno.Outputs[w.oracle.incarnation] {
		deployed[m.GetNamespace()] = true
	}
	for _, ref := range w.oracle.Orphans() {
		if ref.Kind != "Namespace" || deployed[ref.Name] {
			continue
		}
		outputs := append(append([]*unstructured.Unstructured(nil), w.eno.Outputs[w.oracle.incarnation]...), configMap(ref.Name, "late", nil))
		w.synthesize(w.oracle.incarnation, outputs)
		_, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Patch(context.Background(), w.ref.Name,
			types.MergePatchType, []byte(`{"spec":{"synthesizer":{"name":"synth-v2"}}}`), metav1.PatchOptions{})
		return "the recreated composition's synthesizer now deploys ConfigMap " + ref.Name + "/late", err == nil
	}
	return "", false
}

// approveReview is an operator approving a recovery the product held for review.
func approveReview(w *World) (string, bool) {
	if w.outcome != domain.OutcomeHeldForReview {
		return "", false
	}
	comp, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Get(context.Background(), w.ref.Name, metav1.GetOptions{})
	if err != nil {
		return "", false
	}
	uuid, _, _ := unstructured.NestedString(comp.Object, "status", "currentSynthesis", "uuid")
	return "an operator approved the held recovery of " + uuid, uuid != "" && annotate(w, domain.AnnotationReview, "approve:"+uuid)
}

// recreateComposition deletes the story's Composition and, once it is gone, creates it again:
// a third incarnation, recovering from the same history.
func recreateComposition() Adversary {
	deleted, done := false, false
	return Adversary{Name: "recreate-composition", Act: func(w *World) (string, bool) {
		comps := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace)
		switch {
		case done:
			return "", false
		case !deleted:
			deleted = comps.Delete(context.Background(), w.ref.Name, metav1.DeleteOptions{}) == nil
			return "deleted composition " + w.ref.String() + ", to create it again", deleted
		}
		created, err := comps.Create(context.Background(), compositionObject(w.ref.Namespace, w.ref.Name, !w.opts.Story.NewDeletes), metav1.CreateOptions{})
		if err != nil {
			return "", false // still there, terminating
		}
		done = true
		w.synthesize(created.GetUID(), w.opts.Story.New)
		w.oracle.incarnation = created.GetUID()
		return fmt.Sprintf("created composition %s again (uid %s)", w.ref, created.GetUID()), true
	}}
}

// removeSliceFinalizer is an operator removing a recovery slice's finalizer, leaving the slice.
func removeSliceFinalizer(w *World) (string, bool) {
	s := recoverySlices(w)
	if len(s) == 0 || len(s[0].GetFinalizers()) == 0 {
		return "", false
	}
	_, err := w.cpAdmin.Resource(enomodel.ResourceSliceGVR).Namespace(w.ref.Namespace).Patch(context.Background(), s[0].GetName(),
		types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
	return "removed the finalizer of recovery slice " + s[0].GetName(), err == nil
}

// bareConfigMap is a ConfigMap with no content: applied, it has no managedFields at all, as on
// kube-apiserver, since there is no field to own.
func bareConfigMap(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns}}}
}

// bareStory is the default story with one more orphan, bare.
func bareStory() Story {
	s := DefaultStory()
	s.Name = "bare"
	s.Old = append(s.Old, bareConfigMap("app", "bare"))
	return s
}

// comanagedBeforeHistory is R3's past: after the old incarnation is recorded, a GitOps tool
// applies orphan-a (identical, or with its own labels); the old incarnation synthesizes again
// and is recorded again, so the history postdates the tool's write.
func comanagedBeforeHistory(identical bool) func(w *World) error {
	return func(w *World) error {
		ctx := context.Background()
		ref := cmRef("app", "orphan-a")
		u, err := w.oracle.get(ctx, ref)
		if err != nil {
			return err
		}
		what, ok := comanageObject(w, ref, u, identical)
		if !ok {
			return fmt.Errorf("the tool could not write %s", ref)
		}
		w.logf("%s", what)
		w.clock.Advance(5 * time.Second)
		if _, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Patch(ctx, w.ref.Name,
			types.MergePatchType, []byte(`{"spec":{"synthesizer":{"name":"synth-v2"}}}`), metav1.PatchOptions{}); err != nil {
			return err
		}
		w.settle("the old incarnation synthesizes again")
		if !w.ready() {
			return fmt.Errorf("the old incarnation's second synthesis never became ready")
		}
		w.clock.Advance(5 * time.Second)
		w.freshCaches()
		if o := w.replicas[0].reconcile(w.ref); o.err != nil {
			return fmt.Errorf("recording again: %w", o.err)
		}
		return nil
	}
}

// cascadeStory: the old incarnation deployed Namespaces app and old-ns, keep and orphan-a in
// app and orphan-c in old-ns; the recreated one keeps keep, in app.
func cascadeStory() Story {
	keep := configMap("app", "keep", nil)
	return Story{Name: "cascade", Namespaces: []string{"app"},
		Old: []*unstructured.Unstructured{namespaceObject("app"), namespaceObject("old-ns"), keep,
			configMap("app", "orphan-a", nil), configMap("old-ns", "orphan-c", nil)},
		New: []*unstructured.Unstructured{keep.DeepCopy()}}
}

// namespaceObject is a Namespace manifest; it carries the name label the API server sets, so
// that Eno's model finds it in sync.
func namespaceObject(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"kubernetes.io/metadata.name": name}}}}
}

func nsRef(name string) enomodel.Ref { return enomodel.Ref{Kind: "Namespace", Name: name} }
func cmRef(ns, name string) enomodel.Ref {
	return enomodel.Ref{Kind: "ConfigMap", Namespace: ns, Name: name}
}

// annotate sets (or, with value "", removes) one annotation of the story's Composition.
func annotate(w *World, key, value string) bool {
	v := fmt.Sprintf("%q", value)
	if value == "" {
		v = "null"
	}
	_, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Patch(context.Background(), w.ref.Name,
		types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, key, v)), metav1.PatchOptions{})
	return err == nil
}

// movedAndLeft is a Composition that, between the old incarnation's deletion and its
// re-creation, takes orphan-a over with changed content (Eno writes it after the history, for
// that Composition) and is deleted orphaning it: no slice produces the object any more, and only
// its write time says it is no orphan of the old incarnation.
func movedAndLeft(w *World) error {
	ctx := context.Background()
	comps := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace)
	mover := compositionObject(w.ref.Namespace, "mover", true)
	mover.SetAnnotations(map[string]string{domain.AnnotationDeletionStrategy: "orphan"})
	c, err := comps.Create(ctx, mover, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	moved := configMap("app", "orphan-a", nil)
	moved.Object["data"] = map[string]any{"key": "moved"}
	w.synthesize(c.GetUID(), []*unstructured.Unstructured{moved})
	w.settle("composition mover takes orphan-a over with changed content")
	if err := comps.Delete(ctx, "mover", metav1.DeleteOptions{}); err != nil {
		return err
	}
	w.settle("composition mover is deleted, orphaning orphan-a")
	return nil
}
