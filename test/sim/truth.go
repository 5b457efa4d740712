package sim

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/domain"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/apiserver"
	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
)

// The simulation's ground truth: who wrote what downstream. The simulated API server reports
// every write request and every applied write with the actor that sent it; the world knows
// which Composition Eno is acting for. The product never sees this log, and the oracle judges
// from it alone: never from managedFields, resourceVersions or the product's annotations.

// The actors besides Eno: anyone with another field manager is a tool or a person.
const (
	actorGarbageCollector = "garbage-collector"
	actorNamespaces       = "namespace-controller"
	actorCRDFinalizer     = "apiextensions-finalizer"
	// actorClusterController is a controller of the cluster writing downstream objects (for
	// example one that stamps a label on every ConfigMap).
	actorClusterController = "cluster-controller"
)

// enoFor is the actor of Eno's writes for one Composition incarnation.
func enoFor(uid types.UID) string { return "eno for " + string(uid) }

// write is one write to one downstream object, as the simulation saw it happen.
type write struct {
	step  int
	at    time.Time
	actor string
	verb  string // create, update, patch, delete, or "request <verb>": a write request, applied or not
	ref   enomodel.Ref
	uid   types.UID
}

func (w write) String() string {
	return fmt.Sprintf("step %d %s: %s %s (uid %s)", w.step, w.actor, w.verb, w.ref, w.uid)
}

// truth is the write log of the downstream cluster and the lives of the Compositions.
type truth struct {
	mu sync.Mutex
	w  *World
	// byUID are the writes to each object, oldest first.
	byUID map[types.UID][]write
	// live is the UID each identity has now, from the log; last the UID it had last, gone or not.
	live, last map[enomodel.Ref]types.UID
	// enoActor is the actor of Eno's downstream writes now: the Composition it reconciles.
	enoActor string
	// compositions are every Composition incarnation: when it was created and when it was
	// deleted or began terminating (0: alive), in steps.
	compositions map[types.UID]*compositionLife
	// hashes is each object's content hash, for the state fingerprint; state is their XOR.
	hashes map[string]uint64
	state  uint64
	// firstSlice is the step of each Composition's first resource slice; recoverySlices the
	// steps at which recovery slices were created.
	firstSlice     map[types.UID]int
	recoverySlices []int
}

type compositionLife struct {
	namespace, name string
	born, died      int
}

func newTruth(w *World) *truth {
	return &truth{w: w, byUID: map[types.UID][]write{}, live: map[enomodel.Ref]types.UID{}, last: map[enomodel.Ref]types.UID{},
		compositions: map[types.UID]*compositionLife{}, hashes: map[string]uint64{}, firstSlice: map[types.UID]int{}}
}

func (t *truth) step() int { return len(t.w.trace) }

// actorOf names who sent a request as manager.
func (t *truth) actorOf(manager string) string {
	switch manager {
	case "eno":
		return t.enoActor
	case apiserver.GarbageCollector:
		return actorGarbageCollector
	case apiserver.NamespaceController:
		return actorNamespaces
	case apiserver.CRDFinalizer:
		return actorCRDFinalizer
	}
	return manager
}

// intercept logs every write request to a downstream object before it is served, applied or
// not: an identical apply or a no-op update is a write of its sender.
func (t *truth) intercept(r apiserver.Request) apiserver.Verdict {
	switch r.Verb {
	case "create", "update", "patch", "delete":
	default:
		return apiserver.Proceed
	}
	ref, ok := refOfResource(r.Group, r.Resource, r.Namespace, r.Name)
	if !ok || r.Name == "" || r.Subresource != "" {
		return apiserver.Proceed
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if uid, ok := t.live[ref]; ok {
		t.byUID[uid] = append(t.byUID[uid], write{step: t.step(), at: t.w.clock.Now(), actor: t.actorOf(r.Actor), verb: "request " + r.Verb, ref: ref, uid: uid})
	}
	return apiserver.Proceed
}

// observeDownstream logs every applied write downstream.
func (t *truth) observeDownstream(e apiserver.Event) {
	t.fingerprintEvent("ds", e)
	obj := e.After
	if obj == nil {
		obj = e.Before
	}
	ref, ok := refOfResource(e.Resource.Group, e.Resource.Resource, obj.GetNamespace(), obj.GetName())
	if !ok || e.Subresource != "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	uid := obj.GetUID()
	t.byUID[uid] = append(t.byUID[uid], write{step: t.step(), at: t.w.clock.Now(), actor: t.actorOf(e.Actor), verb: e.Verb, ref: ref, uid: uid})
	t.last[ref] = uid
	if e.After == nil {
		delete(t.live, ref)
	} else {
		t.live[ref] = uid
	}
}

// inSync logs Eno taking an object it found in sync for the Composition it reconciles.
func (t *truth) inSync(ref enomodel.Ref, uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ws := t.byUID[uid]
	if len(ws) > 0 && ws[len(ws)-1].actor == t.enoActor && ws[len(ws)-1].verb == "adopt" {
		return
	}
	t.byUID[uid] = append(ws, write{step: t.step(), at: t.w.clock.Now(), actor: t.enoActor, verb: "adopt", ref: ref, uid: uid})
}

// observeControlPlane follows the Compositions' lives and when their slices appear.
func (t *truth) observeControlPlane(e apiserver.Event) {
	t.fingerprintEvent("cp", e)
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.Resource == apiserver.ResourceSlices && e.Before == nil && e.After != nil {
		if strings.Contains(e.After.GetName(), "-recovery-") {
			t.recoverySlices = append(t.recoverySlices, t.step())
		} else if o := metav1.GetControllerOfNoCopy(e.After); o != nil {
			if _, ok := t.firstSlice[o.UID]; !ok {
				t.firstSlice[o.UID] = t.step()
			}
		}
	}
	if e.Resource != apiserver.Compositions {
		return
	}
	obj := e.After
	if obj == nil {
		obj = e.Before
	}
	life := t.compositions[obj.GetUID()]
	if life == nil {
		life = &compositionLife{namespace: obj.GetNamespace(), name: obj.GetName(), born: t.step()}
		t.compositions[obj.GetUID()] = life
	}
	if life.died == 0 && (e.After == nil || e.After.GetDeletionTimestamp() != nil) {
		life.died = t.step()
	}
}

// writes are the writes to the object uid, oldest first.
func (t *truth) writes(uid types.UID) []write {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]write(nil), t.byUID[uid]...)
}

// uidOf is the UID ref has now ("" when it does not exist).
func (t *truth) uidOf(ref enomodel.Ref) types.UID {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live[ref]
}

// aliveFrom lists the incarnations alive at step or created after it.
func (t *truth) aliveFrom(step int) []types.UID {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []types.UID
	for uid, l := range t.compositions {
		if l.died == 0 || l.died > step {
			out = append(out, uid)
		}
	}
	return out
}

// fingerprintEvent folds one write into the state's hash: every object's identity, labels,
// annotations, spec, data and status, without times or resourceVersions.
func (t *truth) fingerprintEvent(cluster string, e apiserver.Event) {
	obj := e.After
	if obj == nil {
		obj = e.Before
	}
	key := cluster + "/" + e.Resource.Resource + "/" + obj.GetNamespace() + "/" + obj.GetName()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.state ^= t.hashes[key]
	delete(t.hashes, key)
	if e.After == nil {
		return
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s %v %v %v %v %v %v", key, obj.GetUID(), obj.GetLabels(), obj.GetAnnotations(), obj.Object["spec"], obj.Object["data"], stripTimes(obj.Object["status"]))
	t.hashes[key] = h.Sum64()
	t.state ^= t.hashes[key]
}

// refOfResource is the identity of an object of a downstream resource.
func refOfResource(group, resource, namespace, name string) (enomodel.Ref, bool) {
	for gvk, m := range downstreamGVRs {
		if m.gvr.Group == group && m.gvr.Resource == resource {
			if !m.namespaced {
				namespace = ""
			}
			return enomodel.Ref{Group: group, Kind: gvk.Kind, Namespace: namespace, Name: name}, true
		}
	}
	return enomodel.Ref{}, false
}

// trueOrphan says why the object uid is not a true orphan of the incarnation old as of now, or
// "" when it is: Eno for old created or adopted it, and since then no actor but Eno for old
// wrote it (identical and no-op writes count; deletions are judged on their own).
func (t *truth) trueOrphan(uid types.UID, old types.UID) string {
	if uid == "" {
		return "never existed"
	}
	mine := enoFor(old)
	ws := t.writes(uid)
	first := slices.IndexFunc(ws, func(w write) bool { return w.actor == mine && w.verb != "delete" })
	if first < 0 {
		return "Eno never created or adopted it for the old incarnation"
	}
	for i, w := range ws[first:] {
		if w.verb == "delete" || w.verb == "request delete" {
			break // what follows a deletion (a namespace controller finishing it) is the deletion's
		}
		if w.actor != mine {
			how := "written"
			if rest := ws[first+i+1:]; strings.HasPrefix(w.verb, "request ") &&
				!slices.ContainsFunc(rest, func(x write) bool {
					return x.step == w.step && x.actor == w.actor && !strings.HasPrefix(x.verb, "request ")
				}) {
				how = "written identically" // the request changed nothing
			}
			return fmt.Sprintf("%s by %s at step %d", how, w.actor, w.step)
		}
	}
	return ""
}

// producers lists the incarnations other than old, alive at step or later, whose synthesizer
// produces ref or deploys into it (a Namespace), at any time of the schedule.
func (t *truth) producers(ref enomodel.Ref, step int, old types.UID) []string {
	var out []string
	for _, uid := range t.aliveFrom(step) {
		if uid == old {
			continue
		}
		for _, m := range t.w.producedEver[uid] {
			if m == ref || (ref.Group == "" && ref.Kind == "Namespace" && m.Namespace == ref.Name) {
				l := t.compositions[uid]
				out = append(out, l.namespace+"/"+l.name)
				break
			}
		}
	}
	return out
}

// inventoryTouched reports whether anyone but recovery wrote an inventory Secret.
func (t *truth) inventoryTouched() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ws := range t.byUID {
		for _, w := range ws {
			if w.ref.Kind == "Secret" && w.ref.Namespace == domain.DefaultInventoryNamespace && w.actor != controllerManager {
				return true
			}
		}
	}
	return false
}

// inside lists the objects that live in the namespace ns now.
func (t *truth) inside(ns string) []enomodel.Ref {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []enomodel.Ref
	for ref := range t.live {
		if ref.Namespace == ns {
			out = append(out, ref)
		}
	}
	return out
}

// producersSince lists, like producers, the incarnations other than old that produce ref or
// deploy into it, with the step of each one's first resource slice (-1: none yet).
func (t *truth) producersSince(ref enomodel.Ref, old types.UID) map[types.UID]int {
	out := map[types.UID]int{}
	for _, uid := range t.aliveFrom(0) {
		if uid == old {
			continue
		}
		for _, m := range t.w.producedEver[uid] {
			if m == ref || (ref.Group == "" && ref.Kind == "Namespace" && m.Namespace == ref.Name) {
				t.mu.Lock()
				first, ok := t.firstSlice[uid]
				t.mu.Unlock()
				if !ok {
					first = -1
				}
				out[uid] = first
				break
			}
		}
	}
	return out
}

// enoDeleted is the step at which Eno first sent a DELETE for an object named ref, or -1.
func (t *truth) enoDeleted(ref enomodel.Ref) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	first := -1
	for _, ws := range t.byUID {
		for _, w := range ws {
			if w.ref == ref && w.verb == "request delete" && strings.HasPrefix(w.actor, "eno for ") && (first < 0 || w.step < first) {
				first = w.step
			}
		}
	}
	return first
}

// fencedBefore is the step of the last recovery slice created before step, or -1.
func (t *truth) fencedBefore(step int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	last := -1
	for _, s := range t.recoverySlices {
		if s <= step {
			last = s
		}
	}
	return last
}

// deletedWithItsComposition reports whether Eno deleted the object ref last was for a
// Composition incarnation that produced it and was being deleted: Eno's business, not
// recovery's.
func (t *truth) deletedWithItsComposition(ref enomodel.Ref) bool {
	t.mu.Lock()
	uid := t.last[ref]
	t.mu.Unlock()
	for _, w := range t.writes(uid) {
		if w.verb != "request delete" || !strings.HasPrefix(w.actor, "eno for ") {
			continue
		}
		inc := types.UID(strings.TrimPrefix(w.actor, "eno for "))
		t.mu.Lock()
		l := t.compositions[inc]
		t.mu.Unlock()
		if l != nil && l.died != 0 && l.died <= w.step && slices.Contains(t.w.producedEver[inc], ref) {
			return true
		}
	}
	return false
}
