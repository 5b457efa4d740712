package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/test/sim/enomodel"
)

// Violation is a deletion that breaks the promise: recovery made Eno delete what Eno, left
// alone, would keep.
type Violation struct {
	Rule   string
	Object string
	Detail string
	Step   int
}

func (v Violation) String() string {
	return fmt.Sprintf("step %d: %s: %s (%s)", v.Step, v.Rule, v.Object, v.Detail)
}

// The oracle's rules, one per way a deletion can be wrong.
const (
	RuleNotRecorded      = "not the recorded object"
	RuleRecreated        = "re-created since the history"
	RuleWrittenAfter     = "written after the history"
	RuleProducedByLiving = "produced by a living composition"
	RuleDisabled         = "disabled by the old incarnation"
	RuleOwnerPaused      = "its composition is paused"
	RuleOwnerDeleting    = "its composition is being deleted"
	RuleCascade          = "a cascade took what Eno would keep"
)

type recorded struct {
	uid             types.UID
	resourceVersion string
	disabled        bool
}

// Oracle checks every DELETE Eno sends downstream, and every cascade the API performs,
// against what the story's history says Eno may delete.
type Oracle struct {
	w           *World
	historyAt   time.Time
	recorded    map[enomodel.Ref]recorded
	incarnation types.UID
	violations  []Violation
	// disarmed: a replica removed the arming annotation it had set (HandoffDisarmed).
	disarmed atomic.Bool
	// deletedByEno are the objects Eno deleted with a DELETE.
	deletedByEno []enomodel.Ref
}

func newOracle(w *World) *Oracle { return &Oracle{w: w, recorded: map[enomodel.Ref]recorded{}} }

// Violations found so far.
func (o *Oracle) Violations() []Violation { return o.violations }

// recordHistory notes what the inventory holds once the old incarnation is recorded: each
// object's UID, and when the history was written.
func (o *Oracle) recordHistory(ctx context.Context) error {
	secrets, err := o.w.dsAdmin.Resource(secretsGVR).Namespace(domain.DefaultInventoryNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: domain.LabelManagedBy + "=" + domain.ManagedByValue})
	if err != nil || len(secrets.Items) == 0 {
		return fmt.Errorf("prologue: the old incarnation was not recorded (%v)", err)
	}
	o.historyAt = o.w.clock.Now()
	for _, m := range o.w.opts.Story.Old {
		ref := enomodel.RefOf(m)
		live, err := o.get(ctx, ref)
		if err != nil {
			return fmt.Errorf("prologue: %s was not deployed: %w", ref, err)
		}
		o.recorded[ref] = recorded{uid: live.GetUID(), resourceVersion: live.GetResourceVersion(), disabled: m.GetAnnotations()[domain.AnnotationDisableReconciliation] == "true"}
	}
	return nil
}

// Orphans are the recorded objects recovery should delete: not produced by the new
// incarnation, not disabled.
func (o *Oracle) Orphans() []enomodel.Ref {
	kept := map[enomodel.Ref]bool{}
	for _, m := range o.w.opts.Story.New {
		kept[enomodel.RefOf(m)] = true
	}
	var out []enomodel.Ref
	for ref, r := range o.recorded {
		if !kept[ref] && !r.disabled {
			out = append(out, ref)
		}
	}
	slices.SortFunc(out, func(a, b enomodel.Ref) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func (o *Oracle) get(ctx context.Context, ref enomodel.Ref) (*unstructured.Unstructured, error) {
	for gvk, m := range downstreamGVRs {
		if gvk.Group == ref.Group && gvk.Kind == ref.Kind {
			if m.namespaced {
				return o.w.dsAdmin.Resource(m.gvr).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			}
			return o.w.dsAdmin.Resource(m.gvr).Get(ctx, ref.Name, metav1.GetOptions{})
		}
	}
	return nil, fmt.Errorf("unknown kind %s", ref.Kind)
}

func (o *Oracle) flag(rule string, ref enomodel.Ref, detail string) {
	for _, v := range o.violations {
		if v.Rule == rule && v.Object == ref.String() {
			return // once is enough: the first says when
		}
	}
	v := Violation{Rule: rule, Object: ref.String(), Detail: detail, Step: len(o.w.trace)}
	o.violations = append(o.violations, v)
	o.w.logf("ORACLE: %s", v)
}

// refFromPath reads the object a downstream request path names.
func refFromPath(path string) (enomodel.Ref, bool) {
	p := strings.Split(strings.Trim(path, "/"), "/")
	var group string
	switch {
	case len(p) >= 2 && p[0] == "api":
		p = p[2:]
	case len(p) >= 3 && p[0] == "apis":
		group, p = p[1], p[3:]
	default:
		return enomodel.Ref{}, false
	}
	ns := ""
	if len(p) >= 3 && p[0] == "namespaces" {
		ns, p = p[1], p[2:]
	}
	if len(p) != 2 {
		if len(p) == 1 && ns != "" && group == "" { // a Namespace itself
			return enomodel.Ref{Kind: "Namespace", Name: ns}, true
		}
		return enomodel.Ref{}, false
	}
	for gvk, m := range downstreamGVRs {
		if m.gvr.Group == group && m.gvr.Resource == p[0] {
			return enomodel.Ref{Group: group, Kind: gvk.Kind, Namespace: ns, Name: p[1]}, true
		}
	}
	return enomodel.Ref{}, false
}

// checkEnoDelete judges a DELETE Eno is about to send, against the live state.
func (o *Oracle) checkEnoDelete(path string) {
	ctx := context.Background()
	ref, ok := refFromPath(path)
	if !ok {
		return
	}
	live, err := o.get(ctx, ref)
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		o.flag(RuleNotRecorded, ref, "unreadable at the delete: "+err.Error())
		return
	}
	o.w.logf("eno deletes %s (uid %s)", ref, live.GetUID())
	for _, m := range o.w.eno.Outputs[o.incarnation] {
		if enomodel.RefOf(m) == ref {
			return // the recreated Composition's own resource: Eno's business, not recovery's
		}
	}
	o.deletedByEno = append(o.deletedByEno, ref)
	o.judge(ctx, ref, live, "")
	comp, err := o.w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(o.w.ref.Namespace).Get(ctx, o.w.ref.Name, metav1.GetOptions{})
	if err == nil {
		if comp.GetDeletionTimestamp() != nil {
			o.flag(RuleOwnerDeleting, ref, "composition "+o.w.ref.String())
		}
		if comp.GetAnnotations()[domain.AnnotationDisableReconciliation] == "true" {
			o.flag(RuleOwnerPaused, ref, "composition "+o.w.ref.String())
		}
	}
}

// judge flags every reason the object must not be deleted; prefix names a cascade.
func (o *Oracle) judge(ctx context.Context, ref enomodel.Ref, live *unstructured.Unstructured, prefix string) {
	rule := func(r string) string {
		if prefix != "" {
			return RuleCascade
		}
		return r
	}
	rec, ok := o.recorded[ref]
	switch {
	case !ok:
		o.flag(rule(RuleNotRecorded), ref, prefix+"never recorded")
	case rec.uid != live.GetUID():
		o.flag(rule(RuleRecreated), ref, fmt.Sprintf("%suid %s, recorded %s", prefix, live.GetUID(), rec.uid))
	}
	if ok && rec.disabled {
		o.flag(rule(RuleDisabled), ref, prefix+"recorded with reconciliation disabled")
	}
	switch t := lastWrite(live); {
	case t.After(o.historyAt):
		o.flag(rule(RuleWrittenAfter), ref, fmt.Sprintf("%swritten at %s, history at %s", prefix, t.Format(time.TimeOnly), o.historyAt.Format(time.TimeOnly)))
	case ok && rec.uid == live.GetUID() && live.GetDeletionTimestamp() == nil && live.GetResourceVersion() != rec.resourceVersion:
		// a write that left no managedFields time: one that only removed fields, or stripped them
		// (a terminating object's own deletion moves it too; that DELETE was judged when sent)
		o.flag(rule(RuleWrittenAfter), ref, fmt.Sprintf("%sresourceVersion %s, recorded %s, with no managedFields time after the history", prefix, live.GetResourceVersion(), rec.resourceVersion))
	}
	if by := o.producedBy(ctx, ref); by != "" {
		o.flag(rule(RuleProducedByLiving), ref, prefix+"produced by "+by)
	}
}

// lastWrite is the object's creation or newest write, subresources aside.
func lastWrite(u *unstructured.Unstructured) time.Time {
	t := u.GetCreationTimestamp().Time
	for _, m := range u.GetManagedFields() {
		if m.Subresource == "" && m.Time != nil && m.Time.After(t) {
			t = m.Time.Time
		}
	}
	return t
}

// producedBy names a living Composition whose current synthesis produces ref (not as a
// tombstone), or "".
func (o *Oracle) producedBy(ctx context.Context, ref enomodel.Ref) string {
	comps, err := o.w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	for _, c := range comps.Items {
		if c.GetDeletionTimestamp() != nil {
			continue
		}
		refs, _, _ := unstructured.NestedSlice(c.Object, "status", "currentSynthesis", "resourceSlices")
		for _, r := range refs {
			name, _, _ := unstructured.NestedString(r.(map[string]any), "name")
			s, err := o.w.cpAdmin.Resource(enomodel.ResourceSliceGVR).Namespace(c.GetNamespace()).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			items, _, _ := unstructured.NestedSlice(s.Object, "spec", "resources")
			for _, it := range items {
				m := it.(map[string]any)
				if del, _ := m["deleted"].(bool); del {
					continue
				}
				u := &unstructured.Unstructured{}
				if raw, _ := m["manifest"].(string); u.UnmarshalJSON([]byte(raw)) == nil && enomodel.RefOf(u) == ref {
					return c.GetNamespace() + "/" + c.GetName()
				}
			}
		}
		// A Composition Eno has not synthesized yet still produces what its synthesizer does.
		for _, m := range o.w.eno.Outputs[c.GetUID()] {
			if enomodel.RefOf(m) == ref && c.GetUID() != o.incarnation {
				return c.GetNamespace() + "/" + c.GetName() + " (its synthesizer)"
			}
		}
	}
	return ""
}

// checkCascade judges an object a garbage collector or namespace controller deleted.
func (o *Oracle) checkCascade(d deletedObject) {
	gvk := schema.GroupVersionKind{}
	for k, m := range downstreamGVRs {
		if m.gvr == d.GVR {
			gvk = k
		}
	}
	if gvk.Kind == "" || d.Object == nil {
		return
	}
	ref := enomodel.Ref{Group: gvk.Group, Kind: gvk.Kind, Namespace: d.Namespace, Name: d.Name}
	o.judge(context.Background(), ref, d.Object, "cascade: ")
}

// Unfinished lists the orphans still present when no refusal explains them: the liveness
// check, for schedules without adversaries.
func (o *Oracle) Unfinished(ctx context.Context) []string {
	comp, err := o.w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(o.w.ref.Namespace).Get(ctx, o.w.ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || (err == nil && comp.GetDeletionTimestamp() != nil):
		return nil // nothing to finish: the lineage's history stays for the next incarnation
	case err == nil:
		if raw := comp.GetAnnotations()[domain.AnnotationDecision]; strings.Contains(raw, `"InventoryInvalid"`) || strings.Contains(raw, `"HeldForReview"`) ||
			strings.Contains(raw, `"reason":"Unverified"`) {
			return nil // a named refusal (Unverified: a Warning names the objects kept)
		}
		if o.disarmed.Load() && comp.GetAnnotations()[domain.AnnotationArmed] == domain.ArmedOff {
			return nil // a named refusal: HandoffDisarmed
		}
		if comp.GetAnnotations()[domain.AnnotationDisableReconciliation] == "true" {
			return nil // paused: Eno, left alone, acts on nothing of the Composition
		}
		if o.w.disarmedByHand {
			return nil // the operator's brake: the hand-off was disarmed by hand
		}
		if o.w.events.warned(string(comp.GetUID()), "RecoverySliceInvalid") {
			return nil // a named refusal: a slice under the family's name is no hand-off of ours
		}
		if o.w.events.warned(string(comp.GetUID()), "RecoverySliceLost") {
			return nil // a named skipped cleanup: a recovery slice, and its tombstones, are gone
		}
	}
	var out []string
	for _, ref := range o.Orphans() {
		if o.w.unreadable(ref) {
			continue // a persistent fault on the object: recovery cannot read it, and keeps it
		}
		// Only an orphan untouched since the history was recorded must go: recovery is right to
		// keep one that was re-created or written since.
		// One a living Composition produces is that Composition's now; a Namespace one deploys
		// into is not an orphan: deleting it would take the living objects with it.
		if live, err := o.get(ctx, ref); err == nil && live.GetUID() == o.recorded[ref].uid && live.GetResourceVersion() == o.recorded[ref].resourceVersion &&
			o.producedBy(ctx, ref) == "" && o.deployedInto(ctx, ref) == "" {
			out = append(out, ref.String())
		}
	}
	return out
}

// deployedInto names a living Composition whose synthesizer deploys into the Namespace ref, or "".
func (o *Oracle) deployedInto(ctx context.Context, ref enomodel.Ref) string {
	if ref.Group != "" || ref.Kind != "Namespace" {
		return ""
	}
	comps, err := o.w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	for _, c := range comps.Items {
		if c.GetDeletionTimestamp() != nil {
			continue
		}
		for _, m := range o.w.eno.Outputs[c.GetUID()] {
			if m.GetNamespace() == ref.Name {
				return c.GetNamespace() + "/" + c.GetName()
			}
		}
	}
	return ""
}
