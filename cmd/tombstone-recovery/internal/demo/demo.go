// Package demo tells the controller's story on an in-memory API server, for the binary's demo
// command: record, recreate, recover and hand the tombstones to Eno, which deletes the
// orphans; and the refusals.
package demo

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/adapters/memory"
	"github.com/Azure/eno-tombstone-recovery/adapters/memory/apiserver"
	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// demoChunkBytes is small so the demo's snapshots span several Secrets.
const demoChunkBytes = 300

// demo tells the whole story on the controller's own adapters (adapters/k8s) over an in-memory
// API server: record, recreate, recover and hand the tombstones to Eno, which deletes the
// orphans; and the refusals. Eno is the model of stock Eno v0.2.17 the simulation checks
// recovery against (adapters/memory/enomodel).
type demo struct {
	out    io.Writer
	env    *enomodel.Env
	comps  *k8s.Compositions
	slices *k8s.Slices
	store  ports.SnapshotStore
	events memory.EventLog
	svc    *app.Service
	clock  time.Time
	// deployed is every resource each Composition's syntheses produced, so the downstream
	// objects shown for one Composition are its own.
	deployed map[domain.CompositionRef][]domain.ResourceID
}

// stop carries the error of a step that did not go as told: check panics with it, Run returns it,
// and nothing after that step runs or prints.
type stop struct{ err error }

func check(err error) {
	if err != nil {
		panic(stop{err})
	}
}

// must is v, or stops the demo with err.
func must[T any](v T, err error) T {
	check(err)
	return v
}

// Run tells the whole story to out. Its output is the same on every run.
func Run(ctx context.Context, out io.Writer) (err error) {
	defer func() {
		r := recover()
		if s, ok := r.(stop); ok {
			err = s.err
		} else if r != nil {
			panic(r)
		}
	}()
	d := &demo{out: out, clock: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), deployed: map[domain.CompositionRef][]domain.ResourceID{}}
	d.env = enomodel.NewEnv(func() time.Time { return d.clock })
	rest := d.env.Server.RESTConfig("tombstone-recovery")
	dyn := must(dynamic.NewForConfig(rest))
	d.comps, d.slices = must(k8s.NewCompositions(dyn, nil)), must(k8s.NewSlices(dyn))
	d.store = must(k8s.NewSecretStore(must(kubernetes.NewForConfig(rest)).CoreV1(), nil, domain.DefaultInventoryNamespace))
	downstream := must(k8s.NewDownstreamObjects(must(metadata.NewForConfig(rest)), dyn, must(discovery.NewDiscoveryClientForConfig(rest))))
	cfg := app.DefaultConfig()
	cfg.Enabled, cfg.ControlPlane = true, "demo" // history naming no control plane is held for review (design §3)
	cfg.MaxChunkBytes = demoChunkBytes
	cfg.Now = func() time.Time { return d.clock }
	d.svc = must(app.New(cfg, app.Deps{
		Compositions: d.comps, Live: d.comps, Slices: d.slices, Store: d.store, Sink: must(k8s.NewTombstoneSink(dyn)),
		Decisions: d.comps, Downstream: downstream, Events: &d.events, Fleet: d.env.Fleet(),
	}))
	for _, chapter := range []func(context.Context){d.recordAndRecover, d.halfWritten, d.siblings, d.heldForReview} {
		chapter(ctx)
	}
	d.say("\nThe end: three recoveries Eno carried out, each deleting exactly the orphans; refusals that deleted nothing; and no recovery twice.")
	return nil
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

// synthesize creates the Composition if it does not exist (opted in, with annotations), then, a
// minute after the previous synthesis, lets Eno synthesize it producing names and reconcile that
// synthesis downstream.
func (d *demo) synthesize(ref domain.CompositionRef, annotations map[string]string, names ...string) domain.Composition {
	ctx := context.Background()
	d.clock = d.clock.Add(time.Minute)
	if _, err := d.comps.LiveComposition(ctx, ref); err != nil {
		all := map[string]string{domain.AnnotationOptIn: domain.OptInValue}
		maps.Copy(all, annotations)
		check(d.env.CreateComposition(ctx, ref, all))
	}
	outputs := make([]*unstructured.Unstructured, len(names))
	for i, n := range names {
		var id domain.ResourceID
		outputs[i], id = demoResource(ref.Namespace, n)
		if !slices.Contains(d.deployed[ref], id) {
			d.deployed[ref] = append(d.deployed[ref], id)
		}
	}
	check(d.env.Synthesize(ctx, ref, outputs...))
	check(d.env.Reconcile(ctx, ref))
	return must(d.comps.LiveComposition(ctx, ref))
}

// demoResource makes the manifest and identity of "Kind/name" (cluster-scoped kinds have no
// namespace).
func demoResource(namespace, kindName string) (*unstructured.Unstructured, domain.ResourceID) {
	kind, name, _ := strings.Cut(kindName, "/")
	apiVersion := map[string]string{"Deployment": "apps/v1", "ClusterRole": "rbac.authorization.k8s.io/v1", "CronJob": "batch/v1"}[kind]
	group, _, _ := strings.Cut(apiVersion, "/")
	apiVersion = cmp.Or(apiVersion, "v1")
	meta := map[string]any{"name": name, "labels": map[string]any{"app": "web"}}
	if kind == "ClusterRole" {
		namespace = ""
	} else {
		meta["namespace"] = namespace
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}},
		domain.ResourceID{Group: group, Kind: kind, Namespace: namespace, Name: name}
}

func short(uuid string) string { return uuid[:min(8, len(uuid))] }

// pass reconciles ref; its error stops the demo.
func (d *demo) pass(ctx context.Context, ref domain.CompositionRef) { check(d.reconcile(ctx, ref)) }

func (d *demo) reconcile(ctx context.Context, ref domain.CompositionRef) error {
	res, err := d.svc.Reconcile(ctx, ref)
	if r := res.Recovery; r != nil {
		dec := r.Plan.Decision
		reason := ""
		if dec.Reason != "" {
			reason = " (" + dec.Reason + ")"
		}
		d.say("   recovery decision for %s synthesis %s: %s%s", ref, short(dec.SynthesisUUID), dec.Outcome, reason)
		d.say("     %s", dec.Message)
		for _, t := range r.Plan.Tombstones {
			d.say("     tombstone: %s", t.Entry.ID())
		}
		for _, t := range r.Plan.Held {
			d.say("     held for review: %s", t.Entry.ID())
		}
		if dec.TombstoneSlice != "" { // what the hand-off left on the Composition, once Eno's slice status saw it
			_, statusErr := d.env.Eno.SliceStatus(ctx, ref.Namespace, ref.Name)
			check(statusErr)
			live := must(d.comps.LiveComposition(ctx, ref))
			d.say("     handed to Eno: ResourceSlice %s/%s, named by status.currentSynthesis.resourceSlices: %t (Ready now %t)",
				ref.Namespace, dec.TombstoneSlice, live.NamesSlice(dec.TombstoneSlice), live.Synthesis.Ready)
			if v, ok := live.Annotations[domain.AnnotationForceResynthesis]; ok {
				d.say("     %s=%s requested", domain.AnnotationForceResynthesis, short(v))
			}
		}
	}
	if r := res.Recording; r != nil {
		if r.Unchanged {
			d.say("   inventory of lineage %s unchanged (%d chunk(s)); nothing written", r.Lineage, r.Chunks)
		} else {
			d.say("   recorded lineage %s: %d chunk(s), %d created, %d updated, %d unchanged, digest %s",
				r.Lineage, r.Chunks, r.Created, r.Updated, r.Reused, r.Digest[:19]+"…")
		}
	}
	if s := res.Skipped; s != nil && res.Recovery != nil {
		d.say("   recording waits: %s", s.Reason)
	}
	if err != nil {
		d.say("   reconcile %s stopped: %v", ref, err)
	}
	return err
}

// enoFollows is Eno acting on a hand-off: the forced synthesis carrying the tombstones, the
// controller deciding on it, eno-reconciler applying it and deleting the orphans downstream
// (shown before and after), and the controller recording that synthesis once it is Ready.
func (d *demo) enoFollows(ctx context.Context, ref domain.CompositionRef) {
	d.clock = d.clock.Add(time.Minute)
	before := must(d.comps.LiveComposition(ctx, ref))
	if !must(d.env.Follow(ctx, ref)) {
		d.say("   Eno: no resynthesis was requested")
		return
	}
	comp := must(d.comps.LiveComposition(ctx, ref))
	d.say("   Eno: %s names the current synthesis %s, so Eno synthesizes %s", domain.AnnotationForceResynthesis,
		short(before.SynthesisUUID()), short(comp.SynthesisUUID()))
	for _, name := range comp.Synthesis.Slices {
		s := must(d.slices.GetSlice(ctx, ref.Namespace, name))
		var tombstones []string
		for _, r := range s.Resources {
			if e, _, err := domain.ParseTombstone(r); err == nil {
				tombstones = append(tombstones, e.Kind+"/"+e.Name)
			}
		}
		d.say("     ResourceSlice %s (stamped %q): %d resources, tombstones carried forward: %s", s.Name, short(s.SynthesisUUID),
			len(s.Resources), orNone(tombstones))
	}
	d.pass(ctx, ref)
	downBefore := d.downstream(ref)
	check(d.env.Reconcile(ctx, ref))
	after := d.downstream(ref)
	d.say("   eno-reconciler applies the synthesis, which is then Ready")
	d.say("     downstream before: %s", strings.Join(downBefore, ", "))
	d.say("     downstream after:  %s", strings.Join(after, ", "))
	gone := slices.DeleteFunc(downBefore, func(id string) bool { return slices.Contains(after, id) })
	d.say("     deleted by Eno: %s", orNone(gone))
	d.pass(ctx, ref)
}

// downstream lists the downstream objects any synthesis of ref produced, in canonical order.
func (d *demo) downstream(ref domain.CompositionRef) []string {
	var out []string
	for _, id := range d.env.Objects() {
		if slices.Contains(d.deployed[ref], id) {
			out = append(out, id.String())
		}
	}
	return out
}

func (d *demo) showDownstream(ref domain.CompositionRef) {
	d.say("     downstream: %s", strings.Join(d.downstream(ref), ", "))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func (d *demo) showSecrets(lineage domain.Lineage) {
	secrets, _ := d.store.ListChunks(context.Background(), lineage)
	for _, s := range secrets {
		d.say("     secret %s/%s  synthesis %s  chunk %s/%s  %d bytes", s.Namespace, s.Name,
			short(s.Annotations[domain.AnnotationSourceSynthesisUUID]), s.Annotations[domain.AnnotationChunkIndex],
			s.Annotations[domain.AnnotationChunkCount], len(s.Data[domain.SecretDataKey]))
	}
}

func (d *demo) recreate(ref domain.CompositionRef, annotations map[string]string, names ...string) {
	check(d.env.DeleteOrphaning(context.Background(), ref))
	d.say("   %s deleted with an orphaning strategy; its resources stay in the downstream cluster", ref)
	comp := d.synthesize(ref, annotations, names...)
	first := must(d.slices.GetSlice(context.Background(), comp.Namespace, comp.Synthesis.Slices[0]))
	d.say("   %s recreated (new UID %s); Eno synthesized %d resources (synthesis %s, its slices stamped %q as on any first synthesis) and applied them",
		ref, comp.UID[len(comp.UID)-4:], len(names), short(comp.SynthesisUUID()), first.SynthesisUUID)
	d.showDownstream(ref)
}

var webV1 = []string{"ConfigMap/web-settings", "Deployment/web", "Service/web", "ClusterRole/web-reader", "ConfigMap/web-feature-flags", "CronJob/web-cleanup"}

func (d *demo) recordAndRecover(ctx context.Context) {
	d.say("\n== 1. Record, recreate, recover: Eno deletes the orphans ==")
	ref := domain.CompositionRef{Namespace: "team-a", Name: "web"}
	comp := d.synthesize(ref, nil, webV1...)
	d.say("   %s opted in (UID %s); Eno synthesized %d resources (synthesis %s) and applied them",
		ref, comp.UID[len(comp.UID)-4:], len(webV1), short(comp.SynthesisUUID()))
	d.showDownstream(ref)
	d.pass(ctx, ref)
	lineage, _ := domain.LineageOf(comp)
	d.showSecrets(lineage)
	d.recreate(ref, nil, webV1[:4]...)
	d.pass(ctx, ref)
	d.say("   a synthesis decided Recovered is never recorded: the snapshot stays the old incarnation's")
	d.showSecrets(lineage)
	d.enoFollows(ctx, ref)
	d.showSecrets(lineage)
	d.say("   reconciling again changes nothing:")
	d.pass(ctx, ref)

	d.say("   later, an operator forces a resynthesis:")
	d.clock = d.clock.Add(time.Minute)
	live := must(d.comps.LiveComposition(ctx, ref))
	check(d.env.Annotate(ctx, ref, domain.AnnotationForceResynthesis, live.SynthesisUUID()))
	d.enoFollows(ctx, ref)
	d.showSecrets(lineage)
}

func (d *demo) halfWritten(ctx context.Context) {
	d.say("\n== 2. A half-written replacement reads as invalid, never as history ==")
	ref := domain.CompositionRef{Namespace: "team-b", Name: "api"}
	d.synthesize(ref, nil, "ConfigMap/api-a", "ConfigMap/api-b", "Deployment/api", "Service/api")
	d.pass(ctx, ref)
	d.say("   a new synthesis of %s with more resources starts replacing the snapshot; the controller crashes after one write", ref)
	d.synthesize(ref, nil, "ConfigMap/api-a", "ConfigMap/api-b", "ConfigMap/api-c", "ConfigMap/api-d", "Deployment/api", "Service/api", "Service/api-internal")
	writes := 0
	d.env.Intercept = func(r apiserver.Request) apiserver.Verdict {
		if r.Resource == "secrets" && (r.Verb == "create" || r.Verb == "update") {
			if writes++; writes > 1 {
				return apiserver.LoseRequest // the controller crashed
			}
		}
		return apiserver.Proceed
	}
	_ = d.reconcile(ctx, ref) // the crash is the point
	d.env.Intercept = nil
	d.showSecrets(domain.DefaultLineage(ref.Namespace, ref.Name))
	d.recreate(ref, nil, "Deployment/api")
	d.pass(ctx, ref)
	d.say("   nothing was handed to Eno: the orphans stay")
	d.showDownstream(ref)
}

func (d *demo) siblings(ctx context.Context) {
	d.say("\n== 3. Siblings sharing a lineage: a living sibling's history is never ours, nor another namespace's ==")
	shared := map[string]string{domain.AnnotationLineageOverride: "checkout"}
	east := domain.CompositionRef{Namespace: "shop", Name: "checkout-east"}
	west := domain.CompositionRef{Namespace: "shop", Name: "checkout-west"}
	d.synthesize(west, shared, "Deployment/checkout-west", "ConfigMap/checkout-west")
	d.pass(ctx, west)
	d.synthesize(east, shared, "Deployment/checkout-east", "ConfigMap/checkout-east")
	d.pass(ctx, east)
	d.say("   %s and %s share lineage override %q (copied from one template); %s recorded later", east, west, "checkout", east)
	check(d.env.DeleteOrphaning(ctx, east))
	d.say("   %s is deleted with an orphaning strategy and not re-created", east)
	d.recreate(west, shared, "Deployment/checkout-west")
	d.say("   %s's own predecessor is the candidate, not %s's newer snapshot, and no other Composition of the lineage lives:", west, east)
	d.pass(ctx, west)
	d.enoFollows(ctx, west)
	d.showDownstream(east)

	north := domain.CompositionRef{Namespace: "shop", Name: "checkout-north"}
	d.say("   a new %s with the same override has no history of its own, so every snapshot of the lineage in namespace shop is a candidate;", north)
	d.say("   one was recorded for a sibling that is alive:")
	d.synthesize(north, shared, "Deployment/checkout-north")
	d.pass(ctx, north)

	eu := domain.CompositionRef{Namespace: "shop-eu", Name: "checkout"}
	d.say("   %s in another namespace copies the override: adoption across namespaces is off, so the history of namespace shop is not its own:", eu)
	d.synthesize(eu, shared, "Deployment/checkout")
	d.pass(ctx, eu)
	d.showDownstream(east)
}

func (d *demo) heldForReview(ctx context.Context) {
	d.say("\n== 4. A broken synthesizer would delete most of an environment: held for review ==")
	ref := domain.CompositionRef{Namespace: "team-c", Name: "db"}
	d.synthesize(ref, nil, "ConfigMap/db-config", "Service/db", "Service/db-headless", "ConfigMap/db-init", "Secret/db-credentials-ref")
	d.pass(ctx, ref)
	d.recreate(ref, nil, "Service/db")
	d.pass(ctx, ref)
	comp := must(d.comps.LiveComposition(ctx, ref))
	for _, e := range d.events.Events() {
		if e.Reason == "HeldForReview" && e.Composition == ref {
			d.say("   event %s: %s", e.Reason, e.Message)
		}
	}
	d.say("   nothing was handed to Eno yet:")
	d.showDownstream(ref)
	review := "approve:" + comp.SynthesisUUID()
	d.say("   an operator reviews the list and sets %s=%s", domain.AnnotationReview, review)
	check(d.env.Annotate(ctx, ref, domain.AnnotationReview, review))
	d.pass(ctx, ref)
	d.enoFollows(ctx, ref)
}
