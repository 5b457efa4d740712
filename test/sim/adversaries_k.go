package sim

import (
	"context"
	"encoding/base64"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/test/sim/enomodel"
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
	w.eno.Outputs[created.GetUID()] = []*unstructured.Unstructured{manifest}
	return fmt.Sprintf("composition %s/app-copy, in another shard, carries the lineage and will produce %s", ns, ref), true
}
