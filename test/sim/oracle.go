package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Violation is a deletion that breaks the promise (recovery made Eno delete what Eno, left
// alone, would keep), or a true orphan left with no true reason.
type Violation struct {
	Rule   string
	Object string
	Detail string
	Step   int
}

func (v Violation) String() string {
	return fmt.Sprintf("step %d: %s: %s (%s)", v.Step, v.Rule, v.Object, v.Detail)
}

// The oracle's rules, one per way a deletion can be wrong, and the liveness rule.
const (
	RuleNotEnos          = "not an object Eno created or adopted for the old incarnation"
	RuleWrittenByOther   = "written by another actor since Eno took it"
	RuleProducedByLiving = "produced by a living composition"
	RuleDisabled         = "disabled by the old incarnation"
	RuleOwnerPaused      = "its composition is paused"
	RuleOwnerDeleting    = "its composition is being deleted"
	RuleCascade          = "a cascade took what Eno would keep"
	RuleOnlyWithRecovery = "gone only with recovery, and no true orphan"
	RuleSilentLeftover   = "a true orphan left with no true reason"
)

type recorded struct {
	uid      types.UID
	disabled bool
}

// deletionSeen is a deletion the oracle judges again at the end: what a living Composition
// produces is known only once the drain is over.
type deletionSeen struct {
	ref    enomodel.Ref
	step   int
	prefix string
}

// Oracle judges every DELETE Eno sends downstream, and every cascade the API performs, from
// the simulation's ground truth (truth): which incarnation Eno created or adopted the object
// for, who wrote it since, which Compositions produce it. It reads no managedFields, no
// resourceVersion and no annotation the product writes.
type Oracle struct {
	w           *World
	historyAt   time.Time
	recorded    map[enomodel.Ref]recorded
	old         types.UID
	incarnation types.UID
	violations  []Violation
	deletions   []deletionSeen
	// disarmed: a replica removed the arming annotation it had set (HandoffDisarmed).
	disarmed atomic.Bool
}

func newOracle(w *World) *Oracle { return &Oracle{w: w, recorded: map[enomodel.Ref]recorded{}} }

// Violations found so far.
func (o *Oracle) Violations() []Violation { return o.violations }

// recordHistory notes, once the old incarnation is recorded, when the history was written and
// which object each of its manifests is.
func (o *Oracle) recordHistory(ctx context.Context, old types.UID) error {
	secrets, err := o.w.dsAdmin.Resource(secretsGVR).Namespace(domain.DefaultInventoryNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: domain.LabelManagedBy + "=" + domain.ManagedByValue})
	if err != nil || len(secrets.Items) == 0 {
		return fmt.Errorf("prologue: the old incarnation was not recorded (%v)", err)
	}
	o.historyAt, o.old = o.w.clock.Now(), old
	for _, m := range o.w.opts.Story.Old {
		ref := enomodel.RefOf(m)
		uid := o.w.truth.uidOf(ref)
		if uid == "" {
			return fmt.Errorf("prologue: %s was not deployed", ref)
		}
		o.recorded[ref] = recorded{uid: uid, disabled: o.recorded[ref].disabled || m.GetAnnotations()[domain.AnnotationDisableReconciliation] == "true"}
	}
	return nil
}

// refNamed is the recorded object whose String is name.
func (o *Oracle) refNamed(name string) (enomodel.Ref, bool) {
	for ref := range o.recorded {
		if ref.String() == name {
			return ref, true
		}
	}
	return enomodel.Ref{}, false
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
	return refOfResource(group, p[0], ns, p[1])
}

// checkEnoDelete judges a DELETE Eno is about to send.
func (o *Oracle) checkEnoDelete(path string) {
	ref, ok := refFromPath(path)
	if !ok {
		return
	}
	uid := o.w.truth.uidOf(ref)
	if uid == "" {
		return
	}
	o.w.logf("eno deletes %s (uid %s)", ref, uid)
	if slices.Contains(o.w.producedEver[o.incarnation], ref) && o.compositionDeleting() {
		return // the recreated Composition's own resource, deleted with it: Eno's business, not recovery's
	}
	o.judge(ref, uid, "")
	comp, err := o.w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(o.w.ref.Namespace).Get(context.Background(), o.w.ref.Name, metav1.GetOptions{})
	if err == nil && comp.GetUID() == o.incarnation {
		// Eno judges from its cache: a deletion or pause it does not show yet is a known residual.
		lag := ""
		if cached, err := o.w.enoCache(o.w.ref.Namespace, o.w.ref.Name); err == nil && cached.GetUID() == comp.GetUID() &&
			cached.GetDeletionTimestamp() == nil && cached.GetAnnotations()[domain.AnnotationDisableReconciliation] != "true" {
			lag = "; " + enoCacheBehind
		}
		if comp.GetDeletionTimestamp() != nil {
			o.flag(RuleOwnerDeleting, ref, "composition "+o.w.ref.String()+lag)
		}
		if comp.GetAnnotations()[domain.AnnotationDisableReconciliation] == "true" {
			o.flag(RuleOwnerPaused, ref, "composition "+o.w.ref.String()+lag)
		}
	}
}

// enoCacheBehind says Eno's cached Composition did not show the deletion or pause yet.
const enoCacheBehind = "Eno's cache does not show it yet"

// compositionDeleting reports whether the recreated incarnation is gone or terminating.
func (o *Oracle) compositionDeleting() bool {
	o.w.truth.mu.Lock()
	defer o.w.truth.mu.Unlock()
	l := o.w.truth.compositions[o.incarnation]
	return l != nil && l.died != 0
}

// judge flags every reason the object uid must not be deleted now, and notes the deletion for
// the end; prefix names a cascade.
func (o *Oracle) judge(ref enomodel.Ref, uid types.UID, prefix string) {
	rule := func(r string) string {
		if prefix != "" {
			return RuleCascade
		}
		return r
	}
	if o.recorded[ref].disabled {
		o.flag(rule(RuleDisabled), ref, prefix+"recorded with reconciliation disabled")
	}
	switch why := o.w.truth.trueOrphan(uid, o.old); {
	case why == "":
	case strings.HasPrefix(why, "written"):
		o.flag(rule(RuleWrittenByOther), ref, prefix+why+o.beforeHistory(uid))
	default:
		o.flag(rule(RuleNotEnos), ref, prefix+why)
	}
	o.deletions = append(o.deletions, deletionSeen{ref: ref, step: len(o.w.trace), prefix: prefix})
}

// beforeHistory says when another actor's first write to uid came before the history.
func (o *Oracle) beforeHistory(uid types.UID) string {
	mine := enoFor(o.old)
	for _, w := range o.w.truth.writes(uid) {
		if w.actor != mine && w.verb != "delete" && w.verb != "request delete" {
			if !w.at.After(o.historyAt) {
				return " (before the history)"
			}
			return ""
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
	if gvk.Kind == "" || d.Object == nil || (gvk.Kind == "Secret" && d.Namespace == domain.DefaultInventoryNamespace) {
		return
	}
	ref := enomodel.Ref{Group: gvk.Group, Kind: gvk.Kind, Namespace: d.Namespace, Name: d.Name}
	if !o.cascadeOfEno(ref) {
		return // a cascade no deletion of Eno's started (or Eno's deletion itself, judged when sent)
	}
	o.judge(ref, d.Object.GetUID(), "cascade: ")
}

// cascadeOfEno reports whether ref sits in a Namespace Eno deleted, or is a custom resource
// of a CustomResourceDefinition Eno deleted.
func (o *Oracle) cascadeOfEno(ref enomodel.Ref) bool {
	for _, d := range o.deletions {
		switch {
		case d.prefix != "":
		case d.ref.Kind == "Namespace" && d.ref.Group == "" && ref.Namespace != "" && d.ref.Name == ref.Namespace:
			return true
		case d.ref.Kind == "CustomResourceDefinition" && ref.Group != "" && strings.HasSuffix(d.ref.Name, "."+ref.Group):
			return true
		}
	}
	return false
}

// Finish judges every deletion again once the schedule is over: no Composition alive at the
// deletion or created after it may produce the object, or deploy into it.
func (o *Oracle) Finish() {
	for _, d := range o.deletions {
		if by := o.w.truth.producers(d.ref, d.step, o.old); len(by) > 0 {
			rule := RuleProducedByLiving
			if d.prefix != "" {
				rule = RuleCascade
			}
			o.flag(rule, d.ref, d.prefix+"produced by "+strings.Join(by, ", "))
		}
	}
}

// OnlyWithRecovery lists what plain, the same schedule without recovery, has at the end and
// this run lost, when it is no true orphan: the differential safety check.
func (o *Oracle) OnlyWithRecovery(plain *World) []Violation {
	plain.truth.mu.Lock()
	refs := make([]enomodel.Ref, 0, len(plain.truth.live))
	for ref := range plain.truth.live {
		refs = append(refs, ref)
	}
	plain.truth.mu.Unlock()
	slices.SortFunc(refs, func(a, b enomodel.Ref) int { return strings.Compare(a.String(), b.String()) })
	var out []Violation
	for _, ref := range refs {
		if o.w.truth.uidOf(ref) != "" || (ref.Kind == "Secret" && ref.Namespace == domain.DefaultInventoryNamespace) ||
			o.w.truth.deletedWithItsComposition(ref) {
			continue
		}
		o.w.truth.mu.Lock()
		uid := o.w.truth.last[ref]
		o.w.truth.mu.Unlock()
		if uid == "" && !slices.ContainsFunc(o.w.truth.producers(ref, len(o.w.trace), o.old), func(p string) bool {
			return !o.w.paused || p != o.w.ref.String()
		}) {
			// Never made in this run, and no Composition alive and unpaused at the end produces it:
			// Eno, whose steps share the schedule with the replicas, got less far before its
			// producer went or was paused.
			continue
		}
		why := o.w.truth.trueOrphan(uid, o.old)
		if strings.HasPrefix(why, "written") {
			why += o.beforeHistory(uid)
		}
		if why == "" && o.recorded[ref].disabled {
			why = "disabled by the old incarnation"
		}
		if by := o.w.truth.producers(ref, 0, o.old); why == "" && len(by) > 0 {
			why = "produced by " + strings.Join(by, ", ")
		}
		if why != "" {
			out = append(out, Violation{Rule: RuleOnlyWithRecovery, Object: ref.String(), Detail: why, Step: len(o.w.trace)})
		}
	}
	return out
}

// Leftovers lists the true orphans still present (present says whether the run without
// recovery has them too) whose keeping the product explained with no true reason: the
// liveness check.
func (o *Oracle) Leftovers(present func(enomodel.Ref) bool) []Violation {
	if o.compositionDeleting() || o.excused() {
		return nil // nothing to finish, or a named refusal of the whole recovery
	}
	var out []Violation
	for _, ref := range o.Orphans() {
		uid := o.w.truth.uidOf(ref)
		if uid == "" || !present(ref) || o.w.truth.trueOrphan(uid, o.old) != "" ||
			len(o.w.truth.producers(ref, 0, o.old)) > 0 || o.holdsOthers(ref) {
			continue
		}
		why, ok := o.w.reported[ref]
		if !ok && !o.w.outcome.IsZero() {
			// A decision was written; a crash lost the reconcile's account of what it kept and why.
			why, ok = lostUnverified, true
		}
		if ok && o.justified(ref, why) {
			continue
		}
		out = append(out, Violation{Rule: RuleSilentLeftover, Object: ref.String(), Detail: "reported: " + why, Step: len(o.w.trace)})
	}
	return out
}

// excused reports a refusal of the whole recovery the product named, or an operator's brake.
func (o *Oracle) excused() bool {
	switch {
	case o.w.outcome == domain.OutcomeInventoryInvalid || o.w.outcome == domain.OutcomeHeldForReview:
		return true // a named refusal
	case o.disarmed.Load():
		return true // a named refusal: HandoffDisarmed
	case o.w.paused || o.w.disarmedByHand:
		return true // paused (Eno, left alone, acts on nothing) or the operator's brake
	}
	uid := string(o.incarnation)
	return o.w.events.warned(uid, "RecoverySliceInvalid") || o.w.events.warned(uid, "RecoverySliceLost")
}

// lostUnverified is the report of a kept object when a decision was written and a crash lost
// the reconcile's own account of which objects it kept and why.
const lostUnverified = "kept: the reasons lost with a crash"

// justified reports whether the reason the product gave for keeping the true orphan ref is
// true by the ground truth.
func (o *Oracle) justified(ref enomodel.Ref, why string) bool {
	switch {
	case why == lostUnverified:
		return o.w.unreadable(ref) || o.w.truth.inventoryTouched()
	case strings.HasPrefix(why, domain.DropUnreadable.String()):
		return o.w.unreadable(ref) // a fault the world injected; no managedFields is no reason
	case strings.HasPrefix(why, domain.DropUnknownWriteTime.String()):
		return o.w.truth.inventoryTouched()
	case strings.HasPrefix(why, domain.DropChanged.String()), strings.HasPrefix(why, domain.DropNewer.String()):
		for _, w := range o.w.truth.writes(o.w.truth.uidOf(ref)) {
			if w.at.After(o.historyAt) {
				return true // Eno for the old incarnation wrote it after the history
			}
		}
		return false
	}
	return true
}

// bare reports whether the old incarnation's manifest of ref has no content: no field a
// manager could own.
func (o *Oracle) bare(ref enomodel.Ref) bool {
	for _, m := range o.w.opts.Story.Old {
		if enomodel.RefOf(m) != ref {
			continue
		}
		meta, _ := m.Object["metadata"].(map[string]any)
		return len(m.Object) == 3 && len(meta) <= 2 && m.GetLabels() == nil && m.GetAnnotations() == nil
	}
	return false
}

// holdsOthers reports whether ref is a Namespace holding an object that is no true orphan.
func (o *Oracle) holdsOthers(ref enomodel.Ref) bool {
	if ref.Group != "" || ref.Kind != "Namespace" {
		return false
	}
	for _, in := range o.w.truth.inside(ref.Name) {
		if o.w.truth.trueOrphan(o.w.truth.uidOf(in), o.old) != "" {
			return true
		}
	}
	return false
}
