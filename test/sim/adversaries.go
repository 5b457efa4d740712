package sim

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Adversary is someone other than Eno and recovery acting on the clusters. Act does one move,
// when it has one left, and says what it did.
type Adversary struct {
	Name string
	Act  func(w *World) (string, bool)
}

// once makes an adversary that moves at most once.
func once(name string, act func(w *World) (string, bool)) Adversary {
	done := false
	return Adversary{Name: name, Act: func(w *World) (string, bool) {
		if done {
			return "", false
		}
		what, ok := act(w)
		done = ok
		return what, ok
	}}
}

// Adversaries are every kind the simulation knows, by name; each call makes fresh ones.
func Adversaries() map[string]func() Adversary {
	return map[string]func() Adversary{
		"recreate-by-hand":    func() Adversary { return once("recreate-by-hand", recreateOrphan) },
		"edit-by-hand":        func() Adversary { return once("edit-by-hand", editOrphan) },
		"takeover":            func() Adversary { return once("takeover", takeover) },
		"delete-slice":        func() Adversary { return once("delete-slice", deleteRecoverySlice) },
		"delete-composition":  func() Adversary { return once("delete-composition", deleteComposition) },
		"pause-composition":   func() Adversary { return once("pause-composition", pauseComposition) },
		"restore-inventory":   func() Adversary { return once("restore-inventory", restoreInventory) },
		"recreate-inventory":  func() Adversary { return once("recreate-inventory", recreateInventory) },
		"rewrite-inventory":   func() Adversary { return once("rewrite-inventory", rewriteInventory) },
		"strip-inventory-mf":  func() Adversary { return once("strip-inventory-mf", stripInventoryManagedFields) },
		"strip-managedfields": func() Adversary { return once("strip-managedfields", stripManagedFields) },
		"persistent-5xx":      func() Adversary { return once("persistent-5xx", persistentError) },
		"comanage-identical":  func() Adversary { return once("comanage-identical", comanage(true)) },
		"comanage-labels":     func() Adversary { return once("comanage-labels", comanage(false)) },
		"cluster-controller":  func() Adversary { return once("cluster-controller", clusterController) },
		"deploy-into-namespace": func() Adversary {
			return once("deploy-into-namespace", deployIntoNamespace)
		},
		"approve-review":         func() Adversary { return once("approve-review", approveReview) },
		"recreate-composition":   recreateComposition,
		"remove-slice-finalizer": func() Adversary { return once("remove-slice-finalizer", removeSliceFinalizer) },
	}
}

func firstOrphan(w *World) (enomodel.Ref, *unstructured.Unstructured, bool) {
	for _, ref := range w.oracle.Orphans() {
		if u, err := w.oracle.get(context.Background(), ref); err == nil {
			return ref, u, true
		}
	}
	return enomodel.Ref{}, nil, false
}

// recreateOrphan deletes an orphan and creates it again by hand: a new UID, a new
// creationTimestamp, the same content.
func recreateOrphan(w *World) (string, bool) {
	ctx := context.Background()
	ref, u, ok := firstOrphan(w)
	if !ok {
		return "", false
	}
	client := w.dsAdmin.Resource(configMapsGVR).Namespace(ref.Namespace)
	if err := client.Delete(ctx, ref.Name, metav1.DeleteOptions{}); err != nil {
		return "", false
	}
	fresh := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
		"metadata": map[string]any{"name": u.GetName(), "namespace": u.GetNamespace(), "labels": toAny(u.GetLabels())},
		"data":     u.Object["data"]}}
	if _, err := client.Create(ctx, fresh, metav1.CreateOptions{}); err != nil {
		return "", false
	}
	return "re-created " + ref.String(), true
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// editOrphan changes an orphan by hand: a write after the history.
func editOrphan(w *World) (string, bool) {
	ref, u, ok := firstOrphan(w)
	if !ok {
		return "", false
	}
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels["edited-by"] = "hand"
	u.SetLabels(labels)
	if _, err := w.dsAdmin.Resource(configMapsGVR).Namespace(ref.Namespace).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		return "", false
	}
	return "edited " + ref.String(), true
}

// takeover creates another Composition whose synthesizer produces an orphan with the very
// manifest the old incarnation applied: Eno, applying it, finds nothing to write.
func takeover(w *World) (string, bool) {
	ctx := context.Background()
	ref, _, ok := firstOrphan(w)
	if !ok {
		return "", false
	}
	var manifest *unstructured.Unstructured
	for _, m := range w.opts.Story.Old {
		if enomodel.RefOf(m) == ref {
			manifest = m.DeepCopy()
		}
	}
	other := compositionObject(w.ref.Namespace, "other", true)
	delete(other.Object["metadata"].(map[string]any), "annotations")
	created, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Create(ctx, other, metav1.CreateOptions{})
	if err != nil {
		return "", false
	}
	w.synthesize(created.GetUID(), []*unstructured.Unstructured{manifest})
	return "composition other takes over " + ref.String(), true
}

func recoverySlices(w *World) []unstructured.Unstructured {
	list, err := w.cpAdmin.Resource(enomodel.ResourceSliceGVR).Namespace(w.ref.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []unstructured.Unstructured
	for _, s := range list.Items {
		if strings.Contains(s.GetName(), "-recovery-") && s.GetDeletionTimestamp() == nil {
			out = append(out, s)
		}
	}
	return out
}

// deleteRecoverySlice is an operator deleting a recovery slice and releasing its finalizer.
func deleteRecoverySlice(w *World) (string, bool) {
	ctx := context.Background()
	s := recoverySlices(w)
	if len(s) == 0 {
		return "", false
	}
	client := w.cpAdmin.Resource(enomodel.ResourceSliceGVR).Namespace(w.ref.Namespace)
	if err := client.Delete(ctx, s[0].GetName(), metav1.DeleteOptions{}); err != nil {
		return "", false
	}
	_, _ = client.Patch(ctx, s[0].GetName(), types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
	return "deleted recovery slice " + s[0].GetName() + " and its finalizer", true
}

// deleteComposition deletes the story's Composition (Eno's finalizer holds it).
func deleteComposition(w *World) (string, bool) {
	err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Delete(context.Background(), w.ref.Name, metav1.DeleteOptions{})
	return "deleted composition " + w.ref.String(), err == nil
}

// pauseComposition sets disable-reconciliation on the Composition: Eno must act on none of it.
func pauseComposition(w *World) (string, bool) {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, domain.AnnotationDisableReconciliation)
	_, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Patch(context.Background(), w.ref.Name,
		types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	w.paused = w.paused || err == nil
	return "paused composition " + w.ref.String(), err == nil
}

// restoreInventory is a backup tool writing the inventory Secrets back, unchanged, under its
// own field manager: their write times move.
func restoreInventory(w *World) (string, bool) {
	ctx := context.Background()
	restorer := w.ds.Client("velero")
	list, err := restorer.Resource(secretsGVR).Namespace(domain.DefaultInventoryNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: domain.LabelManagedBy + "=" + domain.ManagedByValue})
	if err != nil || len(list.Items) == 0 {
		return "", false
	}
	for i := range list.Items {
		s := &list.Items[i]
		a := s.GetAnnotations()
		a["restored-by"] = "velero"
		s.SetAnnotations(a)
		if _, err := restorer.Resource(secretsGVR).Namespace(s.GetNamespace()).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return "", false
		}
	}
	return fmt.Sprintf("restored %d inventory secrets", len(list.Items)), true
}

// stripManagedFields clears an orphan's managedFields, as some tools do.
func stripManagedFields(w *World) (string, bool) {
	ref, _, ok := firstOrphan(w)
	if !ok {
		return "", false
	}
	_, err := w.dsAdmin.Resource(configMapsGVR).Namespace(ref.Namespace).Patch(context.Background(), ref.Name, types.MergePatchType,
		[]byte(`{"metadata":{"managedFields":[{}]}}`), metav1.PatchOptions{})
	return "stripped the managedFields of " + ref.String(), err == nil
}

// persistentError makes one orphan answer every replica read with a server error.
func persistentError(w *World) (string, bool) {
	ref, _, ok := firstOrphan(w)
	if !ok {
		return "", false
	}
	w.unavailable = append(w.unavailable, "/api/v1/namespaces/"+ref.Namespace+"/configmaps/"+ref.Name)
	return "every read of " + ref.String() + " fails with 503", true
}
