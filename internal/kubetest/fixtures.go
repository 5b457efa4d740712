package kubetest

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// The objects below are written as Eno writes them (design §2), spelled out here rather than
// through adapters/k8s, so that the adapter's conversions are tested against a second reading
// of the format.

const enoAPIVersion = "eno.azure.io/v1"

// readyAfter is how long after its synthesis a Ready synthesis became ready. Readers only check
// that status.currentSynthesis.ready is set.
const readyAfter = time.Minute

// CompositionStatus renders s as Eno writes a Composition's status: {"currentSynthesis": ...}.
// A zero Synthesized leaves the synthesis pending, and then it is never ready.
func CompositionStatus(s domain.Synthesis) map[string]any {
	syn := map[string]any{"uuid": s.UUID}
	if !s.Synthesized.IsZero() {
		syn["synthesized"] = s.Synthesized.UTC().Format(time.RFC3339)
		if s.Ready {
			syn["ready"] = s.Synthesized.UTC().Add(readyAfter).Format(time.RFC3339)
		}
	}
	if len(s.Slices) > 0 {
		refs := make([]any, len(s.Slices))
		for i, name := range s.Slices {
			refs[i] = map[string]any{"name": name}
		}
		syn["resourceSlices"] = refs
	}
	return map[string]any{"currentSynthesis": syn}
}

// CreateComposition creates c (namespace, name, labels and annotations), then, when c has a
// synthesis, writes it through the status subresource as Eno does. It returns the object as
// finally stored.
func CreateComposition(ctx context.Context, dyn dynamic.Interface, c domain.Composition) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": enoAPIVersion,
		"kind":       "Composition",
		"spec":       map[string]any{"synthesizer": map[string]any{"name": "kubetest"}},
	}}
	u.SetNamespace(c.Namespace)
	u.SetName(c.Name)
	u.SetLabels(c.Labels)
	u.SetAnnotations(c.Annotations)
	client := dyn.Resource(CompositionResource).Namespace(c.Namespace)
	created, err := client.Create(ctx, u, metav1.CreateOptions{})
	if err != nil || c.Synthesis == nil {
		return created, err
	}
	status := CompositionStatus(*c.Synthesis)
	if c.InFlightSynthesis != "" {
		status["inFlightSynthesis"] = map[string]any{"uuid": c.InFlightSynthesis}
	}
	created.Object["status"] = status
	return client.UpdateStatus(ctx, created, metav1.UpdateOptions{})
}

// CreateSlice creates s as Eno's synthesizer does: no owner, each resource a manifest string
// marked deleted when it is a tombstone.
func CreateSlice(ctx context.Context, dyn dynamic.Interface, s domain.ResourceSlice) (*unstructured.Unstructured, error) {
	return CreateSliceOwnedBy(ctx, dyn, s, nil)
}

// CreateSliceOwnedBy is CreateSlice with s's annotations, controlled by owner when it is set.
func CreateSliceOwnedBy(ctx context.Context, dyn dynamic.Interface, s domain.ResourceSlice, owner *domain.Composition) (*unstructured.Unstructured, error) {
	resources := make([]any, len(s.Resources))
	for i, r := range s.Resources {
		item := map[string]any{"manifest": r.Manifest}
		if r.Deleted {
			item["deleted"] = true
		}
		resources[i] = item
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": enoAPIVersion,
		"kind":       "ResourceSlice",
		"spec":       map[string]any{"synthesisUUID": s.SynthesisUUID, "resources": resources},
	}}
	u.SetNamespace(s.Namespace)
	u.SetName(s.Name)
	u.SetAnnotations(s.Annotations)
	if owner != nil {
		controller := true
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: enoAPIVersion, Kind: "Composition", Name: owner.Name, UID: types.UID(owner.UID), Controller: &controller}})
	}
	return dyn.Resource(ResourceSliceResource).Namespace(s.Namespace).Create(ctx, u, metav1.CreateOptions{})
}
