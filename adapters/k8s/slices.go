package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
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

// listPage is how many slices one list request asks for; a variable so that the contract suite
// runs with pages of two.
var listPage int64 = 500

// ListSlices lists every ResourceSlice in every namespace, page by page; one that does not
// decode is left out.
func (s *Slices) ListSlices(ctx context.Context) ([]domain.ResourceSlice, error) {
	var out []domain.ResourceSlice
	opts := metav1.ListOptions{Limit: listPage}
	for {
		list, err := s.client.Resource(ResourceSliceGVR).List(ctx, opts)
		if err != nil {
			return nil, apiError("listing resource slices", err)
		}
		for i := range list.Items {
			// A slice that does not decode is skipped: Eno cannot apply it either, and one
			// foreign slice must not stall every recovery.
			if sl, err := sliceFromUnstructured(&list.Items[i]); err == nil {
				out = append(out, sl)
			}
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return out, nil
		}
	}
}

// TombstoneSink hands recovered tombstones to stock Eno: a controller-owned recovery slice with
// Eno's finalizer, appended to the current synthesis by a guarded JSON patch of the
// Composition's status, then a forced resynthesis (design §6.2).
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

// PublishTombstones creates the recovery slices of comp's current synthesis, one per part of h
// in part order, or rewrites each to h while the synthesis does not name it yet. When a name of
// the series holds another synthesis's slice, the whole series falls back to the whole-UUID
// names; a slice owned by anything else is refused with ports.ErrAlreadyExists. It returns the
// slices' names, the first one first.
func (t *TombstoneSink) PublishTombstones(ctx context.Context, comp domain.Composition, h domain.Handoff) ([]string, error) {
	uuid := comp.SynthesisUUID()
	if comp.Namespace == "" || comp.Name == "" || comp.UID == "" || uuid == "" || h.SynthesisUUID() != uuid {
		return nil, fmt.Errorf("publishing tombstones for composition %s: namespace, name, UID and a current synthesis matching the hand-off's %q are required", comp.Ref(), h.SynthesisUUID())
	}
	parts, err := h.Parts()
	if err != nil {
		return nil, fmt.Errorf("publishing tombstones for composition %s: %w", comp.Ref(), err)
	}
	series := domain.RecoverySliceSeriesOf(comp.Name, uuid)
	for _, s := range series {
		names := s.Names(len(parts))
		taken, err := t.publishSeries(ctx, comp, h, names, parts)
		if err != nil {
			return nil, err
		}
		if !taken {
			return names, nil
		}
	}
	return nil, fmt.Errorf("publishing tombstones for composition %s: every recovery slice series %v holds another synthesis's slice: %w", comp.Ref(), domain.RecoverySliceNames(comp.Name, uuid), ports.ErrAlreadyExists)
}

// publishSeries writes each part under its name, in order. taken reports that a name holds
// another synthesis's slice: the series cannot be used, and the caller tries the next one.
func (t *TombstoneSink) publishSeries(ctx context.Context, comp domain.Composition, h domain.Handoff, names []string, parts [][]domain.SliceResource) (taken bool, err error) {
	for i, name := range names {
		if taken, err := t.publishPart(ctx, comp, h, name, parts[i]); taken || err != nil {
			return taken, err
		}
	}
	return false, nil
}

// publishPart creates the recovery slice name holding part, or rewrites it to part while the
// synthesis does not name it. taken reports that name holds another synthesis's slice.
func (t *TombstoneSink) publishPart(ctx context.Context, comp domain.Composition, h domain.Handoff, name string, part []domain.SliceResource) (taken bool, err error) {
	client := t.client.Resource(ResourceSliceGVR).Namespace(comp.Namespace)
	what := fmt.Sprintf("publishing tombstones for composition %s in resource slice %s", comp.Ref(), name)
	log := logr.FromContextOrDiscard(ctx).WithValues("slice", name)
	desired := recoverySlice(name, comp, h, part)
	_, err = client.Create(ctx, desired, metav1.CreateOptions{})
	if err == nil {
		log.V(1).Info("created recovery slice", "tombstones", len(part))
		return false, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return false, apiError(what, err)
	}
	existing, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, apiError(what+": reading the existing slice", err)
	}
	other, err := optString(existing.Object, "spec", "synthesisUUID")
	if err != nil {
		return false, fmt.Errorf("%s: the existing slice is malformed: %w", what, err)
	}
	if other != comp.SynthesisUUID() {
		log.V(1).Info("recovery slice name holds another synthesis's slice; trying the next series", "otherSynthesisUUID", other)
		return true, nil
	}
	if err := controlledBy(existing, comp); err != nil {
		return false, fmt.Errorf("%s: %w: %w", what, ports.ErrAlreadyExists, err)
	}
	if comp.NamesSlice(name) {
		return false, nil // committed: never rewritten
	}
	sameSpec := equality.Semantic.DeepEqual(existing.Object["spec"], desired.Object["spec"])
	if sameSpec && carries(existing, h.SliceAnnotations()) {
		log.V(1).Info("reused recovery slice", "tombstones", len(part))
		return false, nil
	}
	// comp may be stale: a commit may have named the slice since it was read. A sealed slice is
	// one a commit may name at any moment, so it is never rewritten.
	if sealed := (domain.ResourceSlice{Name: name, Annotations: existing.GetAnnotations()}); sealed.Sealed() {
		if sameSpec {
			log.V(1).Info("reused sealed recovery slice", "tombstones", len(part))
			return false, nil
		}
		return false, fmt.Errorf("%s: %w: %w", what, domain.RefuseRewrite(sealed), ports.ErrSynthesisMoved)
	}
	// The update carries the resourceVersion just read; a concurrent writer makes it a Conflict.
	existing.Object["spec"] = desired.Object["spec"]
	annotations := existing.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	maps.Copy(annotations, h.SliceAnnotations())
	existing.SetAnnotations(annotations)
	if _, err := client.Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
		return false, apiError(what+": updating the existing slice", err)
	}
	log.V(1).Info("rewrote recovery slice", "tombstones", len(part))
	return false, nil
}

// carries reports whether u holds each of the annotations with its value.
func carries(u *unstructured.Unstructured, want map[string]string) bool {
	have := u.GetAnnotations()
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// controlledBy says why an existing recovery slice is not comp's to rewrite.
func controlledBy(u *unstructured.Unstructured, comp domain.Composition) error {
	if u.GetDeletionTimestamp() != nil {
		return errors.New("the existing slice is being deleted; retry once it is gone")
	}
	for _, o := range u.GetOwnerReferences() {
		if string(o.UID) == comp.UID && o.Kind == compositionKind && o.Controller != nil && *o.Controller {
			return nil
		}
	}
	return fmt.Errorf("the existing slice is not controlled by composition UID %s; refusing to overwrite it", comp.UID)
}

// CommitTombstones appends {"name": ...} for each recovery slice, in order, to
// status.currentSynthesis.resourceSlices with one JSON patch on the status subresource (design
// §6.2 step 2). Just before it every slice is re-read live: it must be comp's, for this
// synthesis, and not terminating (Eno's cleanup deletes an unnamed slice seconds after its
// creation). The patch's test operations are domain.CommitPrecondition of the live read: the
// resourceVersion, so any write since aborts it, the UID, the synthesis UUID, no in-flight
// synthesis and the slice list (null when absent: an empty synthesis has no list, and "/-"
// cannot append to a missing array). Slices the synthesis names already are not appended again.
// A 422 or 409 is told apart by a re-read: the Composition moved on (ports.ErrSynthesisMoved)
// or the patch was bad (an error).
func (t *TombstoneSink) CommitTombstones(ctx context.Context, comp domain.Composition, h domain.Handoff, slices []string) error {
	ref := comp.Ref()
	what := fmt.Sprintf("appending recovery slices %v to the current synthesis of composition %s", slices, ref)
	if len(slices) == 0 {
		return fmt.Errorf("%s: no slice to append", what)
	}
	parts, err := h.PartsFor(slices)
	if err == nil && parts == nil {
		err = errors.New("the hand-off holds no decided synthesis")
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	client := t.client.Resource(CompositionGVR).Namespace(comp.Namespace)
	u, err := client.Get(ctx, comp.Name, metav1.GetOptions{})
	if err != nil {
		return apiError(what, err)
	}
	live, err := compositionFromUnstructured(u)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	missing := unnamed(live, slices)
	pre := domain.CommitPreconditionOf(comp)
	if committed := len(missing) == 0 && live.UID == comp.UID && live.SynthesisUUID() == comp.SynthesisUUID(); !committed {
		if why := pre.MovedOn(live); why != "" {
			return fmt.Errorf("%s: %s: %w", what, why, ports.ErrSynthesisMoved)
		}
	}
	// Named already or not, every slice must hold what this pass planned, and is sealed.
	for i, slice := range slices {
		if err := t.sealForCommit(ctx, live, pre.ResourceVersion, slice, parts[i]); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	// The list is tested as read, so that fields Eno may add to a reference match too.
	refs, _, _ := nested(u.Object, "status", "currentSynthesis", "resourceSlices")
	patch, err := commitPatch(pre, refs, missing)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	_, err = client.Patch(ctx, comp.Name, types.JSONPatchType, patch, metav1.PatchOptions{}, "status")
	if err == nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("appended recovery slices to the synthesis", "slices", missing)
		return nil
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsConflict(err) {
		return apiError(what, err)
	}
	// A failed test and a bad patch both answer 422: the live object tells which.
	again, rerr := client.Get(ctx, comp.Name, metav1.GetOptions{})
	if rerr != nil {
		return apiError(what+": re-reading after a rejected patch", rerr)
	}
	now, rerr := compositionFromUnstructured(again)
	if rerr != nil {
		return fmt.Errorf("%s: %w", what, rerr)
	}
	if why := pre.MovedOn(now); why != "" {
		return fmt.Errorf("%s: %s: %w", what, why, ports.ErrSynthesisMoved)
	}
	return fmt.Errorf("%s: the API server rejected the patch although the composition did not change: %w", what, err)
}

// unnamed are the slices c's current synthesis does not name yet, in order.
func unnamed(c domain.Composition, slices []string) []string {
	var out []string
	for _, s := range slices {
		if !c.NamesSlice(s) {
			out = append(out, s)
		}
	}
	return out
}

// commitPatch is the JSON patch of the commit point: pre's tests, with refs the slice list as
// read (nil when absent, tested as null), then the append of every slice, in order. Test values
// are JSON strings (a resourceVersion sent as a number fails its test).
func commitPatch(pre domain.CommitPrecondition, refs any, slices []string) ([]byte, error) {
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": pre.UID},
		{"op": "test", "path": "/metadata/resourceVersion", "value": pre.ResourceVersion},
		{"op": "test", "path": "/status/currentSynthesis/uuid", "value": pre.SynthesisUUID},
		{"op": "test", "path": "/status/inFlightSynthesis", "value": nil},
		{"op": "test", "path": "/status/currentSynthesis/resourceSlices", "value": refs},
	}
	added := make([]any, len(slices))
	for i, s := range slices {
		added[i] = map[string]any{"name": s}
	}
	if refs == nil {
		return json.Marshal(append(ops, map[string]any{"op": "add", "path": "/status/currentSynthesis/resourceSlices", "value": added}))
	}
	for _, ref := range added {
		ops = append(ops, map[string]any{"op": "add", "path": "/status/currentSynthesis/resourceSlices/-", "value": ref})
	}
	return json.Marshal(ops)
}

// checkCommittable re-reads a recovery slice live just before the commit point.
// sealForCommit re-reads the recovery slice live, checks that it can be committed and holds
// exactly part (else ErrSynthesisMoved: another writer rewrote it since the publish), and seals it
// (domain.AnnotationRecoverySealed, the Composition resourceVersion the commit patch tests) with
// an update guarded by the resourceVersion just read: a rewrite since the read makes it a
// Conflict, and once sealed no publish rewrites it.
func (t *TombstoneSink) sealForCommit(ctx context.Context, comp domain.Composition, resourceVersion, slice string, part []domain.SliceResource) error {
	client := t.client.Resource(ResourceSliceGVR).Namespace(comp.Namespace)
	u, err := client.Get(ctx, slice, metav1.GetOptions{})
	if err != nil {
		return apiError("re-reading recovery slice "+slice+" before the commit", err)
	}
	s, err := sliceFromUnstructured(u)
	if err != nil {
		return err
	}
	if err := domain.CheckCommittable(comp, s); err != nil {
		return err
	}
	if err := domain.CheckHolds(s, part); err != nil {
		return fmt.Errorf("%w: %w", err, ports.ErrSynthesisMoved)
	}
	if s.Sealed() {
		return nil
	}
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[domain.AnnotationRecoverySealed] = resourceVersion
	u.SetAnnotations(annotations)
	if _, err := client.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		return apiError("sealing recovery slice "+slice+" before the commit", err)
	}
	return nil
}

// EnsureTombstones re-reads every recovery slice live and creates again from its part of h each
// that is gone: it is still named by the synthesis, and Eno's executor reads it at the next
// synthesis. A slice being deleted does not count as present: the call fails until it is gone.
// With an empty h (the content is unknown) the gone slices are reported, once every other slice
// was checked, as a *ports.SlicesLostError.
func (t *TombstoneSink) EnsureTombstones(ctx context.Context, comp domain.Composition, slices []string, h domain.Handoff) error {
	parts, err := h.PartsFor(slices)
	if err != nil {
		return fmt.Errorf("checking the recovery slices of composition %s: %w", comp.Ref(), err)
	}
	client := t.client.Resource(ResourceSliceGVR).Namespace(comp.Namespace)
	var lost []string
	for i, slice := range slices {
		what := fmt.Sprintf("checking recovery slice %s/%s", comp.Namespace, slice)
		existing, err := client.Get(ctx, slice, metav1.GetOptions{})
		if err == nil {
			if existing.GetDeletionTimestamp() != nil {
				// Not present: it is gone once its finalizers are released, then created again.
				return fmt.Errorf("%s: it is being deleted; it is created again once it is gone", what)
			}
			continue
		}
		if !apierrors.IsNotFound(err) {
			return apiError(what, err)
		}
		if parts == nil {
			lost = append(lost, slice)
			continue
		}
		// The synthesis names it: created sealed, so that no publish ever rewrites it.
		again := recoverySlice(slice, comp, h, parts[i])
		annotations := again.GetAnnotations()
		annotations[domain.AnnotationRecoverySealed] = comp.ResourceVersion
		again.SetAnnotations(annotations)
		if _, err := client.Create(ctx, again, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return apiError(what+": creating it again", err)
		}
		logr.FromContextOrDiscard(ctx).Info("recreated a recovery slice that was gone", "slice", slice)
	}
	if len(lost) > 0 {
		return fmt.Errorf("checking the recovery slices of composition %s: %w", comp.Ref(), &ports.SlicesLostError{Slices: lost})
	}
	return nil
}

// RequestResynthesis sets eno.azure.io/force-resynthesis to comp's current synthesis UUID with
// a merge patch carrying comp.ResourceVersion, so the API server refuses it (ports.ErrConflict)
// if the Composition changed since the recheck.
func (t *TombstoneSink) RequestResynthesis(ctx context.Context, comp domain.Composition) error {
	what := fmt.Sprintf("setting %s on composition %s", domain.AnnotationForceResynthesis, comp.Ref())
	if comp.ResourceVersion == "" || comp.SynthesisUUID() == "" {
		return fmt.Errorf("%s: a resourceVersion and a current synthesis are required", what)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": comp.ResourceVersion,
		"uid":             comp.UID,
		"annotations":     map[string]any{domain.AnnotationForceResynthesis: comp.SynthesisUUID()},
	}})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, err := t.client.Resource(CompositionGVR).Namespace(comp.Namespace).Patch(ctx, comp.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return apiError(what, err)
	}
	return nil
}

// ArmTombstones sets domain.AnnotationArmed to digest with a merge patch carrying comp's UID
// and resourceVersion, so the API server refuses it (ports.ErrConflict) if the Composition
// changed since the recheck.
func (t *TombstoneSink) ArmTombstones(ctx context.Context, comp domain.Composition, digest string) (domain.Composition, error) {
	what := fmt.Sprintf("arming the tombstones of composition %s", comp.Ref())
	if comp.Annotations[domain.AnnotationArmed] == digest {
		return comp, nil
	}
	if comp.ResourceVersion == "" || digest == "" {
		return domain.Composition{}, fmt.Errorf("%s: a resourceVersion and a digest are required", what)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": comp.ResourceVersion,
		"uid":             comp.UID,
		"annotations":     map[string]any{domain.AnnotationArmed: digest},
	}})
	if err != nil {
		return domain.Composition{}, fmt.Errorf("%s: %w", what, err)
	}
	u, err := t.client.Resource(CompositionGVR).Namespace(comp.Namespace).Patch(ctx, comp.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return domain.Composition{}, apiError(what, err)
	}
	armed, err := compositionFromUnstructured(u)
	if err != nil {
		return domain.Composition{}, fmt.Errorf("%s: %w", what, err)
	}
	return armed, nil
}

// DisarmTombstones sets domain.AnnotationArmed to domain.ArmedOff with a merge patch carrying
// comp's UID and resourceVersion (ports.ErrConflict if the Composition changed since it was read).
func (t *TombstoneSink) DisarmTombstones(ctx context.Context, comp domain.Composition) error {
	if comp.HandoffDisarmed() {
		return nil
	}
	what := fmt.Sprintf("disarming the tombstones of composition %s", comp.Ref())
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": comp.ResourceVersion,
		"uid":             comp.UID,
		"annotations":     map[string]any{domain.AnnotationArmed: domain.ArmedOff},
	}})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, err := t.client.Resource(CompositionGVR).Namespace(comp.Namespace).Patch(ctx, comp.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return apiError(what, err)
	}
	return nil
}
