package sim

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// inventorySecrets lists the inventory Secrets as a tool other than recovery sees them.
func inventorySecrets(w *World, manager string) ([]unstructured.Unstructured, bool) {
	list, err := w.ds.Client(manager).Resource(secretsGVR).Namespace(domain.DefaultInventoryNamespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: domain.LabelManagedBy + "=" + domain.ManagedByValue})
	if err != nil || len(list.Items) == 0 {
		return nil, false
	}
	return list.Items, true
}

// recreateInventory is a backup tool restoring the inventory Secrets: it deletes each and creates
// it again from its backup, unchanged, under its own field manager. managedFields are not part
// of the backup: the creator's entry owns everything, at the time of the restore.
func recreateInventory(w *World) (string, bool) {
	ctx := context.Background()
	items, ok := inventorySecrets(w, "velero")
	if !ok {
		return "", false
	}
	client := w.ds.Client("velero").Resource(secretsGVR).Namespace(domain.DefaultInventoryNamespace)
	for i := range items {
		backup := items[i].DeepCopy()
		if err := client.Delete(ctx, backup.GetName(), metav1.DeleteOptions{}); err != nil {
			return "", false
		}
		backup.SetUID("")
		backup.SetResourceVersion("")
		backup.SetCreationTimestamp(metav1.Time{})
		backup.SetManagedFields(nil)
		if _, err := client.Create(ctx, backup, metav1.CreateOptions{}); err != nil {
			return "", false
		}
	}
	return fmt.Sprintf("velero re-created %d inventory secrets from its backup", len(items)), true
}

// rewriteInventory is another tool writing the inventory Secrets' data back in place, the same
// inventory encoded differently (a trailing newline): it takes the data over.
func rewriteInventory(w *World) (string, bool) {
	ctx := context.Background()
	items, ok := inventorySecrets(w, "kubectl-edit")
	if !ok {
		return "", false
	}
	client := w.ds.Client("kubectl-edit").Resource(secretsGVR).Namespace(domain.DefaultInventoryNamespace)
	for i := range items {
		s := &items[i]
		data, _, _ := unstructured.NestedStringMap(s.Object, "data")
		raw, err := base64.StdEncoding.DecodeString(data[domain.SecretDataKey])
		if err != nil {
			return "", false
		}
		data[domain.SecretDataKey] = base64.StdEncoding.EncodeToString(append(raw, '\n'))
		if err := unstructured.SetNestedStringMap(s.Object, data, "data"); err != nil {
			return "", false
		}
		if _, err := client.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return "", false
		}
	}
	return fmt.Sprintf("kubectl-edit rewrote the data of %d inventory secrets, re-encoded", len(items)), true
}

// stripInventoryManagedFields clears the inventory Secrets' managedFields, as some tools do.
func stripInventoryManagedFields(w *World) (string, bool) {
	items, ok := inventorySecrets(w, "kubectl")
	if !ok {
		return "", false
	}
	for _, s := range items {
		if _, err := w.dsAdmin.Resource(secretsGVR).Namespace(s.GetNamespace()).Patch(context.Background(), s.GetName(), types.MergePatchType,
			[]byte(`{"metadata":{"managedFields":[{}]}}`), metav1.PatchOptions{}); err != nil {
			return "", false
		}
	}
	return fmt.Sprintf("stripped the managedFields of %d inventory secrets", len(items)), true
}

// copyLineageElsewhere creates, in another namespace served by another shard, a Composition
// carrying the story Composition's lineage as an override (copied from a template) whose
// synthesizer produces an orphan with the very manifest the old incarnation applied. Eno has
// not synthesized it yet.
func copyLineageElsewhere(w *World) (string, bool) {
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
	const ns = "team-z"
	if _, err := w.cpAdmin.Resource(namespacesGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}, metav1.CreateOptions{}); err != nil {
		return "", false
	}
	copied := compositionObject(ns, "app-copy", false)
	copied.SetAnnotations(map[string]string{domain.AnnotationOptIn: domain.OptInValue,
		domain.AnnotationLineageOverride: domain.DefaultLineage(w.ref.Namespace, w.ref.Name).String()})
	created, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(ns).Create(ctx, copied, metav1.CreateOptions{})
	if err != nil {
		return "", false
	}
	w.synthesize(created.GetUID(), []*unstructured.Unstructured{manifest})
	return fmt.Sprintf("composition %s/app-copy, in another shard, carries the lineage and will produce %s", ns, ref), true
}

// disableLater is the old incarnation's last synthesis: it disables an orphan-to-be
// (disable-reconciliation "true") and never becomes Ready, so it is never recorded. A replica
// reconciles the old incarnation meanwhile. Eno, left alone, would keep that object (K7).
func disableLater(w *World) error { return disableLaterEditing(w, false) }

// disableLaterAfterAnEdit is disableLater after another orphan was edited by hand: the mark, a
// later write of the Secrets, must not make the history look newer than the edit.
func disableLaterAfterAnEdit(w *World) error { return disableLaterEditing(w, true) }

func disableLaterEditing(w *World, edit bool) error {
	ctx := context.Background()
	comps := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace)
	old, err := comps.Get(ctx, w.ref.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	target := w.oracle.Orphans()[0]
	var newer []*unstructured.Unstructured
	for _, m := range w.opts.Story.Old {
		m = m.DeepCopy()
		if enomodel.RefOf(m) == target {
			a := m.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			a[domain.AnnotationDisableReconciliation] = "true"
			m.SetAnnotations(a)
		}
		newer = append(newer, m)
	}
	w.synthesize(old.GetUID(), newer)
	if _, err := comps.Patch(ctx, w.ref.Name, types.MergePatchType, []byte(`{"spec":{"synthesizer":{"name":"synth-v2"}}}`), metav1.PatchOptions{}); err != nil {
		return err
	}
	w.clock.Advance(time.Second)
	dispatched, err := w.eno.Dispatch(ctx, w.ref.Namespace, w.ref.Name)
	if err != nil || !dispatched {
		return fmt.Errorf("the second synthesis was not dispatched (%v)", err)
	}
	executed, err := w.eno.Execute(ctx, w.ref.Namespace, w.ref.Name)
	if err != nil || !executed {
		return fmt.Errorf("the second synthesis was not executed (%v)", err)
	}
	w.logf("the old incarnation's second synthesis disables %s and is not Ready", target)
	w.clock.Advance(time.Second)
	if edit {
		u, err := w.oracle.get(ctx, w.oracle.Orphans()[1])
		if err != nil {
			return err
		}
		u.SetLabels(map[string]string{"edited-by": "hand"})
		if _, err := w.dsAdmin.Resource(configMapsGVR).Namespace(u.GetNamespace()).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			return err
		}
		w.logf("edited %s by hand", w.oracle.Orphans()[1])
		w.clock.Advance(time.Second)
	}
	w.freshCaches()
	if o := w.replicas[0].reconcile(w.ref); o.err != nil {
		return fmt.Errorf("reconciling the old incarnation: %w", o.err)
	}
	r := w.oracle.recorded[target]
	r.disabled = true
	w.oracle.recorded[target] = r
	return nil
}

// disableThenDrop is K7 through a tombstone: a second synthesis of the old incarnation disables
// an orphan-to-be and no replica sees it; a third drops it, so Eno's executor carries it as a
// tombstone of its old, disabled manifest, which Eno skips. A replica then sees the third, not
// Ready: the tombstone Eno keeps must mark the snapshot.
func disableThenDrop(w *World) error {
	ctx := context.Background()
	comps := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace)
	old, err := comps.Get(ctx, w.ref.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	target := w.oracle.Orphans()[0]
	var disabled, dropped []*unstructured.Unstructured
	for _, m := range w.opts.Story.Old {
		m = m.DeepCopy()
		if enomodel.RefOf(m) == target {
			a := m.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			a[domain.AnnotationDisableReconciliation] = "true"
			m.SetAnnotations(a)
			disabled = append(disabled, m)
			continue
		}
		disabled, dropped = append(disabled, m), append(dropped, m.DeepCopy())
	}
	for i, outputs := range [][]*unstructured.Unstructured{disabled, dropped} {
		w.synthesize(old.GetUID(), outputs)
		patch := fmt.Sprintf(`{"spec":{"synthesizer":{"name":"synth-v%d"}}}`, i+2)
		if _, err := comps.Patch(ctx, w.ref.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return err
		}
		w.clock.Advance(time.Second)
		dispatched, err := w.eno.Dispatch(ctx, w.ref.Namespace, w.ref.Name)
		if err != nil || !dispatched {
			return fmt.Errorf("synthesis %d was not dispatched (%v)", i+2, err)
		}
		executed, err := w.eno.Execute(ctx, w.ref.Namespace, w.ref.Name)
		if err != nil || !executed {
			return fmt.Errorf("synthesis %d was not executed (%v)", i+2, err)
		}
		w.clock.Advance(time.Second)
	}
	w.logf("the old incarnation's third synthesis carries %s as a disabled tombstone and is not Ready", target)
	w.freshCaches()
	if o := w.replicas[0].reconcile(w.ref); o.err != nil {
		return fmt.Errorf("reconciling the old incarnation: %w", o.err)
	}
	r := w.oracle.recorded[target]
	r.disabled = true
	w.oracle.recorded[target] = r
	return nil
}
