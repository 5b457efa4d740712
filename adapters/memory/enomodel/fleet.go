package enomodel

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/apiserver"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// Fleet is ports.FleetIndex over a view of the API server: what informers of every slice and
// Composition hold at that revision. A view is a prefix of the writes, as a watch delivers them
// in order. WaitForSlice calls CatchUp first, as a watch follows while the hand-off waits.
type Fleet struct {
	View    func() apiserver.View
	CatchUp func()
}

var _ ports.FleetIndex = Fleet{}

func (f Fleet) list(res apiserver.Resource) ([]unstructured.Unstructured, error) {
	l, err := f.View().List(res, "", metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (f Fleet) ProducedElsewhere(_ context.Context, ids []domain.ResourceID, excluded ...string) (map[domain.ResourceID]string, error) {
	items, err := f.list(apiserver.ResourceSlices)
	if err != nil {
		return nil, err
	}
	all := make([]domain.Production, 0, len(items))
	for _, u := range items {
		s := domain.ResourceSlice{Namespace: u.GetNamespace(), Name: u.GetName()}
		if o := metav1.GetControllerOfNoCopy(&u); o != nil {
			s.ControllerUID = string(o.UID)
		}
		resources, _, _ := unstructured.NestedSlice(u.Object, "spec", "resources")
		for _, r := range resources {
			m, _ := r.(map[string]any)
			manifest, _ := m["manifest"].(string)
			deleted, _ := m["deleted"].(bool)
			s.Resources = append(s.Resources, domain.SliceResource{Manifest: manifest, Deleted: deleted})
		}
		all = append(all, domain.ProductionOf(s))
	}
	return domain.ProducedElsewhere(all, ids, excluded...), nil
}

func (f Fleet) LineageMembers(_ context.Context, ref domain.CompositionRef, l domain.Lineage) ([]domain.CompositionRef, error) {
	items, err := f.list(apiserver.Compositions)
	if err != nil {
		return nil, err
	}
	all := make([]domain.Composition, 0, len(items))
	for _, u := range items {
		all = append(all, domain.Composition{Namespace: u.GetNamespace(), Name: u.GetName(), Annotations: u.GetAnnotations()})
	}
	return domain.LineageMembers(domain.Composition{Namespace: ref.Namespace, Name: ref.Name}, l, all), nil
}

func (f Fleet) WaitForSlice(_ context.Context, namespace, name string) error {
	if f.CatchUp != nil {
		f.CatchUp()
	}
	if _, err := f.View().Get(apiserver.ResourceSlices, namespace, name); err != nil {
		return fmt.Errorf("resource slice %s/%s at the index's view: %w (%w)", namespace, name, ports.ErrIndexBehind, err)
	}
	return nil
}

// Unsynthesized reads, as Eno's scheduler does, a Composition with no synthesized current
// synthesis and no deletionTimestamp as one Eno has yet to synthesize.
func (f Fleet) Unsynthesized(context.Context) (map[domain.CompositionRef]time.Time, error) {
	items, err := f.list(apiserver.Compositions)
	if err != nil {
		return nil, err
	}
	out := map[domain.CompositionRef]time.Time{}
	for _, u := range items {
		if at, _, _ := unstructured.NestedString(u.Object, "status", "currentSynthesis", "synthesized"); at == "" && u.GetDeletionTimestamp() == nil {
			out[domain.CompositionRef{Namespace: u.GetNamespace(), Name: u.GetName()}] = u.GetCreationTimestamp().Time
		}
	}
	return out, nil
}
