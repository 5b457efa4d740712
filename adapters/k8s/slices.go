package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
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

// TombstoneSink hands recovered tombstones to stock Eno: a controller-owned recovery slice with
// Eno's finalizer, appended to the current synthesis by a guarded JSON patch of the
// Composition's status, then a forced resynthesis.
type TombstoneSink struct {
	client dynamic.Interface
}

// NewTombstoneSink writes ResourceSlices and Composition status through client.
func NewTombstoneSink(client dynamic.Interface) (*TombstoneSink, error) {
	if client == nil {
		return nil, errors.New("tombstone sink: a dynamic client is required")
	}
	return &TombstoneSink{client: client}, nil
}

// CreateRecoverySlice creates recovery slice part of h for comp's current synthesis and returns
// its name. A slice is never updated: on AlreadyExists the one there is read, and reused only
// when it holds exactly this part for comp (domain.CheckReusable); anything else under the name
// is refused with ports.ErrAlreadyExists.
func (t *TombstoneSink) CreateRecoverySlice(ctx context.Context, comp domain.Composition, h domain.Handoff, part int) (string, error) {
	if comp.Namespace == "" || comp.Name == "" || comp.UID == "" || comp.SynthesisUUID() == "" || h.SynthesisUUID() != comp.SynthesisUUID() {
		return "", fmt.Errorf("creating a recovery slice for composition %s: namespace, name, UID and a current synthesis matching the hand-off's %q are required", comp.Ref(), h.SynthesisUUID())
	}
	want, err := h.RecoverySlice(comp, part)
	if err != nil {
		return "", fmt.Errorf("creating a recovery slice for composition %s: %w", comp.Ref(), err)
	}
	what := fmt.Sprintf("creating recovery slice %s/%s", want.Namespace, want.Name)
	client := t.client.Resource(ResourceSliceGVR).Namespace(comp.Namespace)
	log := logr.FromContextOrDiscard(ctx).WithValues("slice", want.Name)
	_, err = client.Create(ctx, recoverySlice(want, comp), metav1.CreateOptions{})
	if err == nil {
		log.V(1).Info("created recovery slice", "tombstones", len(want.Resources))
		return want.Name, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return "", apiError(what, err)
	}
	existing, err := client.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return "", apiError(what+": reading the existing slice", err)
	}
	have, err := sliceFromUnstructured(existing)
	if err == nil {
		err = domain.CheckReusable(comp, have, want)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w: %w", what, ports.ErrAlreadyExists, err)
	}
	log.V(1).Info("reused recovery slice", "tombstones", len(want.Resources))
	return want.Name, nil
}

// AppendRecoverySlice appends {"name": slice} to status.currentSynthesis.resourceSlices with one
// JSON patch on the status subresource, whose test operations are domain.CommitPreconditionOf
// (comp): the UID, the resourceVersion (any write since comp was read aborts it), the synthesis
// UUID, no in-flight synthesis and the slice list (null when absent: "/-" cannot append to a
// missing array). It returns the Composition as written. A 422 or 409 is told apart by a
// re-read: the Composition moved on (ports.ErrSynthesisMoved) or the patch was bad (an error).
func (t *TombstoneSink) AppendRecoverySlice(ctx context.Context, comp domain.Composition, slice string) (domain.Composition, error) {
	ref := comp.Ref()
	what := fmt.Sprintf("naming recovery slice %s in the current synthesis of composition %s", slice, ref)
	if comp.NamesSlice(slice) {
		return comp, nil
	}
	pre := domain.CommitPreconditionOf(comp)
	patch, err := commitPatch(pre, slice)
	if err != nil {
		return domain.Composition{}, fmt.Errorf("%s: %w", what, err)
	}
	client := t.client.Resource(CompositionGVR).Namespace(comp.Namespace)
	u, err := client.Patch(ctx, comp.Name, types.JSONPatchType, patch, metav1.PatchOptions{}, "status")
	if err == nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("named a recovery slice in the synthesis", "slice", slice)
		named, err := compositionFromUnstructured(u)
		if err != nil {
			return domain.Composition{}, fmt.Errorf("%s: %w", what, err)
		}
		return named, nil
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return domain.Composition{}, apiError(what, err)
	}
	// A failed test and a bad patch both answer 422: the live object tells which.
	again, rerr := client.Get(ctx, comp.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(rerr) {
		return domain.Composition{}, fmt.Errorf("%s: it was deleted: %w", what, ports.ErrSynthesisMoved)
	}
	if rerr != nil {
		return domain.Composition{}, apiError(what+": re-reading after a rejected patch", rerr)
	}
	now, rerr := compositionFromUnstructured(again)
	if rerr != nil {
		return domain.Composition{}, fmt.Errorf("%s: %w", what, rerr)
	}
	if why := pre.MovedOn(now); why != "" {
		return domain.Composition{}, fmt.Errorf("%s: %s: %w", what, why, ports.ErrSynthesisMoved)
	}
	return domain.Composition{}, fmt.Errorf("%s: the API server rejected the patch although the composition did not change: %w", what, err)
}

// commitPatch is the JSON patch that names slice: pre's tests, the slice list tested as null
// when the synthesis has none, then the append. Test values are JSON strings (a resourceVersion
// sent as a number fails its test). The list is tested by its names: a reference holds its
// name alone (Eno's ResourceSliceRef), and an empty list read as present is tested as [].
func commitPatch(pre domain.CommitPrecondition, slice string) ([]byte, error) {
	var refs any
	if pre.Slices != nil {
		list := make([]any, len(pre.Slices))
		for i, n := range pre.Slices {
			list[i] = map[string]any{"name": n}
		}
		refs = list
	}
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": pre.UID},
		{"op": "test", "path": "/metadata/resourceVersion", "value": pre.ResourceVersion},
		{"op": "test", "path": "/status/currentSynthesis/uuid", "value": pre.SynthesisUUID},
		{"op": "test", "path": "/status/inFlightSynthesis", "value": nil},
		{"op": "test", "path": "/status/currentSynthesis/resourceSlices", "value": refs},
	}
	ref := map[string]any{"name": slice}
	if refs == nil {
		return json.Marshal(append(ops, map[string]any{"op": "add", "path": "/status/currentSynthesis/resourceSlices", "value": []any{ref}}))
	}
	return json.Marshal(append(ops, map[string]any{"op": "add", "path": "/status/currentSynthesis/resourceSlices/-", "value": ref}))
}

// RequestResynthesis sets eno.azure.io/force-resynthesis to comp's current synthesis UUID
// (annotate: ports.ErrConflict if the Composition changed since the recheck).
func (t *TombstoneSink) RequestResynthesis(ctx context.Context, comp domain.Composition) error {
	what := fmt.Sprintf("setting %s on composition %s", domain.AnnotationForceResynthesis, comp.Ref())
	if comp.SynthesisUUID() == "" {
		return fmt.Errorf("%s: a current synthesis is required", what)
	}
	_, err := annotate(ctx, t.client, comp, domain.AnnotationForceResynthesis, comp.SynthesisUUID(), what)
	return err
}

// ArmTombstones sets domain.AnnotationArmed to digest (annotate: ports.ErrConflict if the
// Composition changed since the recheck).
func (t *TombstoneSink) ArmTombstones(ctx context.Context, comp domain.Composition, digest string) (domain.Composition, error) {
	what := fmt.Sprintf("arming the tombstones of composition %s", comp.Ref())
	if comp.Annotations[domain.AnnotationArmed] == digest {
		return comp, nil
	}
	if digest == "" {
		return domain.Composition{}, fmt.Errorf("%s: a digest is required", what)
	}
	u, err := annotate(ctx, t.client, comp, domain.AnnotationArmed, digest, what)
	if err != nil {
		return domain.Composition{}, err
	}
	armed, err := compositionFromUnstructured(u)
	if err != nil {
		return domain.Composition{}, fmt.Errorf("%s: %w", what, err)
	}
	return armed, nil
}

// DisarmTombstones sets domain.AnnotationArmed to domain.ArmedOff (annotate: ports.ErrConflict
// if the Composition changed since it was read).
func (t *TombstoneSink) DisarmTombstones(ctx context.Context, comp domain.Composition) error {
	if comp.HandoffDisarmed() {
		return nil
	}
	_, err := annotate(ctx, t.client, comp, domain.AnnotationArmed, domain.ArmedOff, fmt.Sprintf("disarming the tombstones of composition %s", comp.Ref()))
	return err
}
