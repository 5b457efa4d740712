package k8s

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

var (
	_ ports.SliceReader   = (*Slices)(nil)
	_ ports.TombstoneSink = (*TombstoneSink)(nil)
)

// Slices reads Eno ResourceSlices live from the API server.
type Slices struct {
	client dynamic.Interface
}

// NewSlices reads ResourceSlices through client.
func NewSlices(client dynamic.Interface) (*Slices, error) {
	if client == nil {
		return nil, errors.New("slices: a dynamic client is required")
	}
	return &Slices{client: client}, nil
}

// GetSlice reads one ResourceSlice. A malformed slice is a *domain.SliceError; a missing one
// wraps ports.ErrNotFound.
func (s *Slices) GetSlice(ctx context.Context, namespace, name string) (domain.ResourceSlice, error) {
	u, err := s.client.Resource(ResourceSliceGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return domain.ResourceSlice{}, apiError(fmt.Sprintf("reading resource slice %s/%s", namespace, name), err)
	}
	return sliceFromUnstructured(u)
}

// TombstoneSink publishes recovered tombstones as one ResourceSlice per synthesis, named
// domain.RecoverySliceName and owned by the Composition.
type TombstoneSink struct {
	client dynamic.Interface
}

// NewTombstoneSink writes ResourceSlices through client.
func NewTombstoneSink(client dynamic.Interface) (*TombstoneSink, error) {
	if client == nil {
		return nil, errors.New("tombstone sink: a dynamic client is required")
	}
	return &TombstoneSink{client: client}, nil
}

// PublishTombstones creates the recovery slice, or reuses the one an earlier attempt created for
// the same Composition UID and synthesis (updating its resources if they differ). A slice of that
// name that belongs to anything else is refused with ports.ErrAlreadyExists. It returns the
// slice name.
func (t *TombstoneSink) PublishTombstones(ctx context.Context, comp domain.Composition, tombstones []domain.Tombstone) (string, error) {
	uuid := comp.SynthesisUUID()
	if comp.Namespace == "" || comp.Name == "" || comp.UID == "" || uuid == "" {
		return "", fmt.Errorf("publishing tombstones for composition %s: namespace, name, UID and a current synthesis are required", comp.Ref())
	}
	name := domain.RecoverySliceName(comp.Name, uuid)
	what := fmt.Sprintf("publishing tombstones for composition %s in resource slice %s", comp.Ref(), name)
	log := logr.FromContextOrDiscard(ctx).WithValues("composition", comp.Ref().String(), "synthesisUUID", uuid, "slice", name)
	desired := recoverySlice(name, comp, tombstones)
	client := t.client.Resource(ResourceSliceGVR).Namespace(comp.Namespace)

	_, err := client.Create(ctx, desired, metav1.CreateOptions{})
	if err == nil {
		log.V(1).Info("created tombstone slice", "tombstones", len(tombstones))
		return name, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return "", apiError(what, err)
	}

	// An earlier attempt may have created it: reuse it only if it is ours for this synthesis.
	existing, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", apiError(what+": reading the existing slice", err)
	}
	if err := sliceBelongsTo(existing, comp); err != nil {
		return "", fmt.Errorf("%s: %w: %w", what, ports.ErrAlreadyExists, err)
	}
	current, err := sliceFromUnstructured(existing)
	if err != nil {
		return "", fmt.Errorf("%s: the existing slice is unreadable: %w", what, err)
	}
	want := tombstoneResources(tombstones)
	if slices.Equal(current.Resources, want) {
		log.V(1).Info("reused tombstone slice", "tombstones", len(tombstones))
		return name, nil
	}
	// The update carries the resourceVersion just read; a concurrent writer makes it a Conflict.
	if err := unstructured.SetNestedSlice(existing.Object, sliceResourcesToUnstructured(want), "spec", "resources"); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if _, err := client.Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
		return "", apiError(what+": updating the existing slice", err)
	}
	log.V(1).Info("updated tombstone slice", "tombstones", len(tombstones))
	return name, nil
}

// sliceBelongsTo says why an existing recovery slice is not comp's for its current synthesis.
func sliceBelongsTo(u *unstructured.Unstructured, comp domain.Composition) error {
	if u.GetDeletionTimestamp() != nil {
		return errors.New("the existing slice is being deleted; retry once it is gone")
	}
	owned := false
	for _, o := range u.GetOwnerReferences() {
		if string(o.UID) == comp.UID && o.Kind == compositionKind {
			owned = true
			break
		}
	}
	if !owned {
		return fmt.Errorf("the existing slice is not owned by composition UID %s; refusing to overwrite it", comp.UID)
	}
	uuid, err := optString(u.Object, "spec", "synthesisUUID")
	if err != nil {
		return fmt.Errorf("the existing slice is malformed: %w", err)
	}
	if uuid != comp.SynthesisUUID() {
		return fmt.Errorf("the existing slice belongs to synthesis %q, not %q; refusing to overwrite it", uuid, comp.SynthesisUUID())
	}
	return nil
}
