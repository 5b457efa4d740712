package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/apiserver"
	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// controllerManager is the field manager of every replica: one binary, one name.
const controllerManager = "tombstone-recovery"

// shardNamespace is the replicas' shard (--composition-namespace) and the story's namespace.
const shardNamespace = "team"

// Clock is the simulation's time; the API servers, Eno and the replicas all read it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now is the current simulated time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// Advance moves time forward.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// Options configure one world.
type Options struct {
	// Seed chooses every random choice of the schedule.
	Seed uint64
	// Stale is how many writes old a cache may be (K).
	Stale int
	// Replicas is the number of tombstone-recovery processes (A, B, ...).
	Replicas int
	// RecheckInterval is the replicas' --pending-recheck-interval.
	RecheckInterval time.Duration
	// Crashes lets a replica stop at any request.
	Crashes bool
	// Adversaries act on the world between any two steps.
	Adversaries []Adversary
	// Story is the scenario: what the old incarnation deployed and the new one keeps.
	Story Story
	// NoRecovery runs the schedule without the recovery controller once the old incarnation
	// is recorded: the plain run a differential run compares with.
	NoRecovery bool
}

// World is two clusters (control plane and downstream) on deterministic in-memory API servers,
// Eno acting on them, tombstone-recovery replicas, adversaries and the oracle.
type World struct {
	opts   Options
	events eventLog
	// rng draws the steps of Eno and the replicas; advRng when an adversary moves, so that a
	// run without recovery sees the same adversaries at the same steps.
	rng, advRng *rand.Rand
	clock       *Clock
	cp, ds      cluster
	// admin clients, for the story's setup and the adversaries.
	cpAdmin, dsAdmin dynamic.Interface
	eno              *enomodel.Eno
	enoCompRev       int64
	procs            []*enomodel.Reconciler
	replicas         []*replica
	oracle           *Oracle
	trace            []string
	ref              domain.CompositionRef
	// points records the semantic points a script reached.
	points []string
	// unavailable are request paths that answer every replica with 503.
	unavailable []string
	// disarmedByHand: an operator removed the Composition's arming annotation (the brake).
	disarmedByHand bool
	// states are the fingerprints of the states the schedule went through.
	states map[uint64]bool
	// truth is the ground truth: who wrote what downstream, and the Compositions' lives.
	truth *truth
	// producedEver are, by incarnation, the identities its synthesizer produced at any time.
	producedEver map[types.UID][]enomodel.Ref
	// What the product reported: the reason it gave for keeping each object, the outcome of
	// its last written decision; and whether an operator paused the Composition.
	reported       map[enomodel.Ref]string
	outcome        domain.Outcome
	decisionReason string
	paused         bool
	// findings are every finding of a differential run, once it is over.
	findings []Violation
}

// New builds the world and plays the story up to the recreated Composition: the old
// incarnation was synthesized, reconciled, recorded, and deleted orphaning its resources; the
// new one exists and Eno has not synthesized it yet.
func New(opts Options) (*World, error) {
	if opts.Replicas == 0 {
		opts.Replicas = 2
	}
	if opts.RecheckInterval == 0 {
		opts.RecheckInterval = time.Minute
	}
	if opts.Story.Name == "" {
		opts.Story = DefaultStory()
	}
	w := &World{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5eed)),
		advRng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0xad5e)),
		clock:  &Clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, states: map[uint64]bool{},
		producedEver: map[types.UID][]enomodel.Ref{}, reported: map[enomodel.Ref]string{}}
	w.truth = newTruth(w)
	// The release's admission policies judge the replicas' requests, which alone go over HTTP on
	// the control plane: the other actors' writes stay direct.
	w.cp = cluster{Server: apiserver.New(apiserver.Options{Clock: w.clock.Now, Resources: controlPlaneResources, Seed: 1,
		Observe: w.truth.observeControlPlane, Intercept: admissionPolicy}), resources: controlPlaneResources}
	w.ds = newCluster(apiserver.Options{Clock: w.clock.Now, Resources: downstreamResources, Seed: 2,
		Observe: w.truth.observeDownstream, Intercept: w.truth.intercept})
	w.cpAdmin, w.dsAdmin = w.cp.DirectReads("kubectl", nil), w.ds.DirectReads("kubectl", nil)
	w.oracle = newOracle(w)
	watched := func(next http.RoundTripper) http.RoundTripper { return &deleteWatch{next: next, w: w} }
	w.eno = enomodel.NewEno(w.cp.DirectReads("eno", nil), w.ds.DirectReads("eno", watched), w.enoCache, downstreamMapper, w.clock.Now)
	w.eno.InSync = w.truth.inSync
	w.procs = []*enomodel.Reconciler{w.eno.NewReconciler("eno-reconciler")}
	for i := range opts.Replicas {
		w.replicas = append(w.replicas, w.newReplica(string(rune('A'+i))))
	}
	if err := w.playPrologue(); err != nil {
		return nil, err
	}
	if opts.NoRecovery {
		w.replicas = nil // they only recorded the old incarnation's history
	}
	return w, nil
}

// Close stops every replica mid-request, so no goroutine outlives the world.
func (w *World) Close() {
	for _, r := range w.replicas {
		for r.running {
			r.step(CrashBefore)
		}
	}
}

func (w *World) logf(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("%4d %s ", len(w.trace), w.clock.Now().Format("15:04:05"))+fmt.Sprintf(format, args...))
}

// Trace is every step taken, in order.
func (w *World) Trace() string { return strings.Join(w.trace, "\n") }

// enoCache is Eno's informer read of a Composition, at the revision its cache shows: the
// stored version, which Eno's model only reads, as an informer's cache is shared.
func (w *World) enoCache(ns, name string) (*unstructured.Unstructured, error) {
	return w.cp.Server.ViewAt(w.enoCompRev).Peek(apiserver.Compositions, ns, name)
}

// catchUp moves every cache forward: to the present with some chance, and never more than
// Stale writes behind. Caches only move forward.
func (w *World) catchUp() {
	move := func(rev *int64, now int64) {
		switch {
		case w.opts.Stale == 0 || w.rng.IntN(3) == 0:
			*rev = now
		case now-*rev > int64(w.opts.Stale):
			*rev = now - int64(w.rng.IntN(w.opts.Stale+1))
		}
	}
	cp, ds := w.cp.Revision(), w.ds.Revision()
	move(&w.enoCompRev, cp)
	for _, r := range w.replicas {
		move(&r.compRev, cp)
		move(&r.chunkRev, ds)
	}
}

// freshCaches brings every cache to the present (used by the prologue and by scripts).
func (w *World) freshCaches() {
	w.enoCompRev = w.cp.Revision()
	for _, r := range w.replicas {
		r.compRev, r.chunkRev = w.cp.Revision(), w.ds.Revision()
	}
}

// deleteWatch shows the oracle each DELETE Eno sends downstream, before it is applied.
type deleteWatch struct {
	next http.RoundTripper
	w    *World
}

func (d *deleteWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodDelete {
		d.w.oracle.checkEnoDelete(req.URL.Path)
	}
	return d.next.RoundTrip(req)
}

// Story is a scenario: the manifests the old incarnation produced and the ones the new keeps.
type Story struct {
	Name string
	// Old are the old incarnation's manifests; New the recreated one's.
	Old, New []*unstructured.Unstructured
	// Namespaces exist downstream before anything is applied.
	Namespaces []string
	// NewDeletes: the recreated Composition deletes what it deployed when it is deleted (the
	// old one orphaned its resources).
	NewDeletes bool
	// BeforeDeletion, when set, acts on the old incarnation once its history is recorded and
	// before it is deleted; BeforeRecreation once it is gone and before it is created again.
	BeforeDeletion, BeforeRecreation func(w *World) error
}

// DefaultStory: the old incarnation deployed four ConfigMaps, one of them with reconciliation
// disabled; the new one keeps one. Recovery should delete orphan-a and orphan-b, and keep
// keep and disabled.
func DefaultStory() Story {
	keep := configMap("app", "keep", nil)
	return Story{Name: "default", Namespaces: []string{"app"},
		Old: []*unstructured.Unstructured{keep, configMap("app", "orphan-a", nil), configMap("app", "orphan-b", nil),
			configMap("app", "disabled", map[string]string{domain.AnnotationDisableReconciliation: "true"})},
		New: []*unstructured.Unstructured{keep.DeepCopy()}}
}

func configMap(ns, name string, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data":     map[string]any{"key": name},
	}}
	if annotations != nil {
		u.SetAnnotations(annotations)
	}
	return u
}

var (
	configMapsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	namespacesGVR  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	crdGVR         = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	widgetsGVR     = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	downstreamGVRs = map[schema.GroupVersionKind]struct {
		gvr        schema.GroupVersionResource
		namespaced bool
	}{
		{Version: "v1", Kind: "ConfigMap"}:                                               {configMapsGVR, true},
		{Version: "v1", Kind: "Namespace"}:                                               {namespacesGVR, false},
		{Version: "v1", Kind: "Secret"}:                                                  {secretsGVR, true},
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}: {crdGVR, false},
		{Group: "example.com", Version: "v1", Kind: "Widget"}:                            {widgetsGVR, true},
	}
)

func downstreamMapper(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, bool) {
	m, ok := downstreamGVRs[gvk]
	return m.gvr, m.namespaced, ok
}

// compositionObject is a Composition as its owner creates it: opted in, orphaning on deletion,
// with Eno's finalizer.
func compositionObject(ns, name string, orphan bool) *unstructured.Unstructured {
	annotations := map[string]any{domain.AnnotationOptIn: "enabled"}
	if orphan {
		annotations[domain.AnnotationDeletionStrategy] = "orphan"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eno.azure.io/v1", "kind": "Composition",
		"metadata": map[string]any{"namespace": ns, "name": name, "annotations": annotations,
			"finalizers": []any{"eno.azure.io/cleanup"}},
		"spec": map[string]any{"synthesizer": map[string]any{"name": "synth"}},
	}}
}

// playPrologue plays the story's past: everything before the recreated Composition's first
// synthesis, with every cache fresh and no interleaving.
func (w *World) playPrologue() error {
	ctx := context.Background()
	for _, ns := range w.opts.Story.Namespaces {
		if _, err := w.dsAdmin.Resource(namespacesGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("prologue: namespace %s: %w", ns, err)
		}
	}
	if _, err := w.cpAdmin.Resource(namespacesGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team"}}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("prologue: namespace team: %w", err)
	}
	// What the old incarnation disabled was made by someone else: Eno never applied it.
	for _, m := range w.opts.Story.Old {
		if m.GetAnnotations()[domain.AnnotationDisableReconciliation] == "true" {
			obj := m.DeepCopy()
			obj.SetAnnotations(nil)
			gvr, _, _ := downstreamMapper(obj.GroupVersionKind())
			if _, err := w.dsAdmin.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("prologue: %s: %w", obj.GetName(), err)
			}
		}
	}
	w.ref = domain.CompositionRef{Namespace: "team", Name: "app"}
	old, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace("team").Create(ctx, compositionObject("team", "app", true), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("prologue: composition: %w", err)
	}
	w.synthesize(old.GetUID(), w.opts.Story.Old)
	w.settle("prologue: the old incarnation is synthesized and reconciled")
	if !w.ready() {
		return fmt.Errorf("prologue: the old incarnation never became ready\n%s", w.Trace())
	}
	w.clock.Advance(10 * time.Second)
	if o := w.replicas[0].reconcile(w.ref); o.err != nil {
		return fmt.Errorf("prologue: recording: %w", o.err)
	}
	if err := w.oracle.recordHistory(ctx, old.GetUID()); err != nil {
		return err
	}
	if w.opts.Story.BeforeDeletion != nil {
		if err := w.opts.Story.BeforeDeletion(w); err != nil {
			return fmt.Errorf("prologue: before deletion: %w\n%s", err, w.Trace())
		}
		if err := w.oracle.recordHistory(ctx, old.GetUID()); err != nil {
			return err
		}
	}
	w.clock.Advance(10 * time.Second)
	if err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace("team").Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("prologue: deleting the old incarnation: %w", err)
	}
	w.settle("prologue: the old incarnation is deleted, orphaning its resources")
	if _, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace("team").Get(ctx, "app", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("prologue: the old incarnation is still there (%v)\n%s", err, w.Trace())
	}
	if w.opts.Story.BeforeRecreation != nil {
		if err := w.opts.Story.BeforeRecreation(w); err != nil {
			return fmt.Errorf("prologue: before recreation: %w\n%s", err, w.Trace())
		}
	}
	w.clock.Advance(10 * time.Second)
	fresh, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace("team").Create(ctx, compositionObject("team", "app", !w.opts.Story.NewDeletes), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("prologue: recreating: %w", err)
	}
	w.synthesize(fresh.GetUID(), w.opts.Story.New)
	w.oracle.incarnation = fresh.GetUID()
	w.freshCaches()
	w.logf("prologue done: composition %s recreated (uid %s)", w.ref, fresh.GetUID())
	return nil
}

// synthesize sets what the synthesizer of the incarnation uid produces from now on.
func (w *World) synthesize(uid types.UID, outputs []*unstructured.Unstructured) {
	w.eno.Outputs[uid] = outputs
	for _, m := range outputs {
		if ref := enomodel.RefOf(m); !slices.Contains(w.producedEver[uid], ref) {
			w.producedEver[uid] = append(w.producedEver[uid], ref)
		}
	}
}

// ready reports whether the story's Composition's current synthesis is Ready.
func (w *World) ready() bool {
	c, err := w.cpAdmin.Resource(enomodel.CompositionGVR).Namespace(w.ref.Namespace).Get(context.Background(), w.ref.Name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	r, _, _ := unstructured.NestedString(c.Object, "status", "currentSynthesis", "ready")
	return r != ""
}

// settle runs Eno alone, every cache fresh, until nothing changes.
func (w *World) settle(why string) {
	w.logf("%s", why)
	for round := 0; round < 200; round++ {
		changed := false
		for _, a := range w.enoActions() {
			w.freshCaches()
			if a.run() {
				changed = true
				w.logf("eno: %s", a.name)
			}
			w.clock.Advance(time.Second)
		}
		if !changed {
			return
		}
	}
}

// settleOnly runs Eno alone on the Composition name (its controllers and its reconciles), every
// cache fresh, until nothing changes.
func (w *World) settleOnly(name string) {
	w.logf("eno settles %s alone", name)
	for round := 0; round < 200; round++ {
		changed := false
		for _, a := range w.enoActions() {
			if !strings.HasSuffix(a.name, " "+name) && !strings.Contains(a.name, " reconcile "+name+": ") {
				continue
			}
			w.freshCaches()
			if a.run() {
				changed = true
				w.logf("eno: %s", a.name)
			}
			w.clock.Advance(time.Second)
		}
		if !changed {
			return
		}
	}
}

// action is one thing an actor can do now; run reports whether it changed anything.
type action struct {
	name string
	run  func() bool
}

// enoActions are the steps Eno can take now, in a stable order.
func (w *World) enoActions() []action {
	ctx := context.Background()
	var out []action
	step := func(name string, f func() (bool, error)) action {
		return action{name: name, run: func() bool {
			ok, err := f()
			if err != nil {
				w.logf("eno: %s: %v", name, err)
			}
			return ok
		}}
	}
	for _, c := range w.cp.Names(apiserver.Compositions) {
		ns, name := c.Namespace, c.Name
		out = append(out,
			step("dispatch "+name, func() (bool, error) { return w.eno.Dispatch(ctx, ns, name) }),
			step("execute "+name, func() (bool, error) { return w.eno.Execute(ctx, ns, name) }),
			step("slice status "+name, func() (bool, error) { return w.eno.SliceStatus(ctx, ns, name) }),
			step("composition deletion "+name, func() (bool, error) { return w.eno.CompositionDeletion(ctx, ns, name) }))
		for _, p := range w.procs {
			out = append(out, step(p.Name+" load "+name, func() (bool, error) { return p.Load(ctx, ns, name) }))
			for _, ref := range p.Pending(ns, name) {
				out = append(out, step(fmt.Sprintf("%s reconcile %s: %s", p.Name, name, ref), func() (bool, error) {
					if c, err := w.enoCache(ns, name); err == nil {
						w.truth.enoActor = enoFor(c.GetUID())
					}
					a, err := p.ReconcileResource(ctx, ns, name, ref)
					return a != enomodel.ActionNone, err
				}))
			}
		}
	}
	for _, s := range w.cp.Names(apiserver.ResourceSlices) {
		ns, name := s.Namespace, s.Name
		out = append(out, step("cleanup check "+name, func() (bool, error) { return w.eno.CleanupCheck(ctx, ns, name) }))
		if slices.ContainsFunc(w.eno.PendingCleanup(), func(k string) bool { return strings.HasPrefix(k, ns+"/"+name+"/") }) {
			out = append(out, step("cleanup confirm "+name, func() (bool, error) { return w.eno.CleanupConfirm(ctx, ns, name) }),
				step("cleanup delete "+name, func() (bool, error) { return w.eno.CleanupDelete(ctx, ns, name) }))
		}
	}
	out = append(out, action{name: "garbage collection", run: func() bool { return w.collect() }})
	return out
}

// collect runs the control plane's and the downstream's garbage collectors and namespace
// controllers once; the oracle sees every cascade.
func (w *World) collect() bool {
	cp := w.cp.Collect()
	ds := w.ds.Collect()
	for _, d := range ds {
		w.oracle.checkCascade(d)
	}
	for _, d := range append(cp, ds...) {
		w.logf("garbage collection deleted %s", d)
	}
	return len(cp)+len(ds) > 0
}
