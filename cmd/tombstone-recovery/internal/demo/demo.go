// Package demo tells the controller's story on the in-memory adapters, for the binary's demo
// command: record, recreate, recover and hand the tombstones to Eno, which deletes the
// orphans; and the refusals.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// demoChunkBytes is small so the demo's snapshots span several Secrets.
const demoChunkBytes = 300

// demo tells the whole story on the in-memory adapters: record, recreate, recover and hand the
// tombstones to Eno, which deletes the orphans; and the refusals. Eno is the memory adapter's
// model of stock Eno v0.2.17 (synthesis, forced resynthesis, reconciliation).
type demo struct {
	out     io.Writer
	cluster *memory.Cluster
	eno     *memory.Eno
	svc     *app.Service
	clock   time.Time
	// deployed is every resource each Composition's syntheses produced, so the downstream
	// objects shown for one Composition are its own.
	deployed map[domain.CompositionRef][]domain.ResourceID
}

// Run tells the whole story to out. Its output is the same on every run.
func Run(ctx context.Context, out io.Writer) error {
	d := &demo{out: out, cluster: memory.NewCluster(domain.DefaultInventoryNamespace),
		clock: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), deployed: map[domain.CompositionRef][]domain.ResourceID{}}
	d.eno = memory.NewEno(d.cluster, func() time.Time { return d.clock })
	d.cluster.SetClock(func() time.Time { return d.clock })
	cfg := app.DefaultConfig()
	cfg.Enabled, cfg.ControlPlane = true, "demo" // history naming no control plane is held for review (design §3)
	cfg.MaxChunkBytes = demoChunkBytes
	cfg.Now = func() time.Time { return d.clock }
	svc, err := app.New(cfg, app.Deps{
		Compositions: d.cluster, Live: d.cluster, Slices: d.cluster, Store: d.cluster,
		Sink: d.cluster, Decisions: d.cluster, Downstream: d.cluster, Events: d.cluster, Fleet: d.cluster,
	})
	if err != nil {
		return err
	}
	d.svc = svc
	for _, chapter := range []func(context.Context) error{d.recordAndRecover, d.halfWritten, d.siblings, d.heldForReview} {
		if err := chapter(ctx); err != nil {
			return err
		}
	}
	d.say("\nThe end: three recoveries Eno carried out, each deleting exactly the orphans; refusals that deleted nothing; and no recovery twice.")
	return nil
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

func (d *demo) chapter(title string) {
	d.say("\n== %s ==", title)
}

// deploy creates the Composition if it does not exist (opted in, with annotations), then lets
// Eno synthesize it producing names and reconcile that synthesis downstream.
func (d *demo) deploy(ref domain.CompositionRef, annotations map[string]string, names ...string) (domain.Composition, error) {
	if _, err := d.cluster.LiveComposition(context.Background(), ref); err != nil {
		comp := domain.Composition{Namespace: ref.Namespace, Name: ref.Name, Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue}}
		maps.Copy(comp.Annotations, annotations)
		d.cluster.PutComposition(comp)
	}
	manifests := make([]string, len(names))
	for i, n := range names {
		manifests[i] = demoManifest(ref.Namespace, n)
		id := demoID(ref.Namespace, n)
		if !slices.Contains(d.deployed[ref], id) {
			d.deployed[ref] = append(d.deployed[ref], id)
		}
	}
	if _, err := d.eno.Synthesize(ref, manifests...); err != nil {
		return domain.Composition{}, err
	}
	return d.eno.Reconcile(ref)
}

// synthesize is deploy a minute after the previous synthesis.
func (d *demo) synthesize(ref domain.CompositionRef, annotations map[string]string, names ...string) (domain.Composition, error) {
	d.clock = d.clock.Add(time.Minute)
	return d.deploy(ref, annotations, names...)
}

// demoManifest makes a manifest from "Kind/name" (cluster-scoped kinds have no namespace).
func demoManifest(namespace, kindName string) string {
	kind, name, _ := strings.Cut(kindName, "/")
	meta := map[string]any{"name": name, "labels": map[string]string{"app": "web"}}
	if kind != "ClusterRole" {
		meta["namespace"] = namespace
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": demoAPIVersion(kind), "kind": kind, "metadata": meta})
	return string(b)
}

func demoAPIVersion(kind string) string {
	if v, ok := map[string]string{"Deployment": "apps/v1", "ClusterRole": "rbac.authorization.k8s.io/v1", "CronJob": "batch/v1"}[kind]; ok {
		return v
	}
	return "v1"
}

func demoID(namespace, kindName string) domain.ResourceID {
	kind, name, _ := strings.Cut(kindName, "/")
	group := ""
	if av := demoAPIVersion(kind); strings.Contains(av, "/") {
		group, _, _ = strings.Cut(av, "/")
	}
	if kind == "ClusterRole" {
		namespace = ""
	}
	return domain.ResourceID{Group: group, Kind: kind, Namespace: namespace, Name: name}
}

func short(uuid string) string { return uuid[:min(8, len(uuid))] }

func (d *demo) reconcile(ctx context.Context, ref domain.CompositionRef) (app.Result, error) {
	res, err := d.svc.Reconcile(ctx, ref)
	defer func() {
		if err != nil {
			d.say("   reconcile %s stopped: %v", ref, err)
		}
	}()
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
		if dec.TombstoneSlice != "" {
			d.showHandoff(ctx, ref, dec)
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
	return res, err
}

// showHandoff shows what the hand-off left on the Composition.
func (d *demo) showHandoff(ctx context.Context, ref domain.CompositionRef, dec domain.Decision) {
	live, err := d.cluster.LiveComposition(ctx, ref)
	if err != nil {
		return
	}
	d.say("     handed to Eno: ResourceSlice %s/%s, named by status.currentSynthesis.resourceSlices: %t (Ready now %t)",
		ref.Namespace, dec.TombstoneSlice, live.NamesSlice(dec.TombstoneSlice), live.Synthesis.Ready)
	if v, ok := live.Annotations[domain.AnnotationForceResynthesis]; ok {
		d.say("     %s=%s requested", domain.AnnotationForceResynthesis, short(v))
	}
}

// enoFollows is Eno acting on a hand-off: the forced synthesis carrying the tombstones, the
// controller deciding on it, Eno's reconciliation deleting the orphans downstream, and the
// controller recording that synthesis once it is Ready.
func (d *demo) enoFollows(ctx context.Context, ref domain.CompositionRef) error {
	d.clock = d.clock.Add(time.Minute)
	before, err := d.cluster.LiveComposition(ctx, ref)
	if err != nil {
		return err
	}
	comp, forced, err := d.eno.ResynthesizeIfForced(ref)
	if err != nil {
		return err
	}
	if !forced {
		d.say("   Eno: no resynthesis was requested")
		return nil
	}
	d.say("   Eno: %s names the current synthesis %s, so Eno synthesizes %s", domain.AnnotationForceResynthesis,
		short(before.SynthesisUUID()), short(comp.SynthesisUUID()))
	for _, name := range comp.Synthesis.Slices {
		s, err := d.cluster.GetSlice(ctx, ref.Namespace, name)
		if err != nil {
			return err
		}
		var tombstones []string
		for _, r := range s.Resources {
			if r.Deleted {
				tombstones = append(tombstones, manifestName(r.Manifest))
			}
		}
		d.say("     ResourceSlice %s (stamped %q): %d resources, tombstones carried forward: %s", s.Name, short(s.SynthesisUUID),
			len(s.Resources), orNone(tombstones))
	}
	if _, err := d.reconcile(ctx, ref); err != nil {
		return err
	}
	return d.enoReconciles(ctx, ref)
}

// enoReconciles lets eno-reconciler apply the current synthesis, shows what it deleted
// downstream, and lets the controller pass once more.
func (d *demo) enoReconciles(ctx context.Context, ref domain.CompositionRef) error {
	before := d.downstream(ref)
	if _, err := d.eno.Reconcile(ref); err != nil {
		return err
	}
	after := d.downstream(ref)
	d.say("   eno-reconciler applies the synthesis, which is then Ready")
	d.say("     downstream before: %s", strings.Join(before, ", "))
	d.say("     downstream after:  %s", strings.Join(after, ", "))
	var gone []string
	for _, id := range before {
		if !slices.Contains(after, id) {
			gone = append(gone, id)
		}
	}
	d.say("     deleted by Eno: %s", orNone(gone))
	_, err := d.reconcile(ctx, ref)
	return err
}

// downstream lists the downstream objects any synthesis of ref produced, in canonical order.
func (d *demo) downstream(ref domain.CompositionRef) []string {
	var out []string
	for _, id := range d.cluster.DownstreamObjects() {
		if slices.Contains(d.deployed[ref], id) {
			out = append(out, id.String())
		}
	}
	return out
}

func (d *demo) showDownstream(ref domain.CompositionRef) {
	d.say("     downstream: %s", strings.Join(d.downstream(ref), ", "))
}

// stamp is the spec.synthesisUUID Eno wrote on the first slice of comp's current synthesis.
func (d *demo) stamp(comp domain.Composition) string {
	if len(comp.Synthesis.Slices) == 0 {
		return ""
	}
	s, err := d.cluster.GetSlice(context.Background(), comp.Namespace, comp.Synthesis.Slices[0])
	if err != nil {
		return "?"
	}
	return s.SynthesisUUID
}

func manifestName(raw string) string {
	var m struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal([]byte(raw), &m)
	return m.Kind + "/" + m.Metadata.Name
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func (d *demo) showSecrets(lineage domain.Lineage) {
	secrets, _ := d.cluster.ListChunks(context.Background(), lineage)
	for _, s := range secrets {
		d.say("     secret %s/%s  synthesis %s  chunk %s/%s  %d bytes", s.Namespace, s.Name,
			short(s.Annotations[domain.AnnotationSourceSynthesisUUID]), s.Annotations[domain.AnnotationChunkIndex],
			s.Annotations[domain.AnnotationChunkCount], len(s.Data[domain.SecretDataKey]))
	}
}

func (d *demo) recreate(ref domain.CompositionRef, annotations map[string]string, names ...string) error {
	if err := d.cluster.DeleteComposition(ref); err != nil {
		return err
	}
	d.say("   %s deleted with an orphaning strategy; its resources stay in the downstream cluster", ref)
	comp, err := d.synthesize(ref, annotations, names...)
	if err != nil {
		return err
	}
	d.say("   %s recreated (new UID %s); Eno synthesized %d resources (synthesis %s, its slices stamped %q as on any first synthesis) and applied them",
		ref, comp.UID[len(comp.UID)-4:], len(names), short(comp.SynthesisUUID()), d.stamp(comp))
	d.showDownstream(ref)
	return nil
}

var webV1 = []string{"ConfigMap/web-settings", "Deployment/web", "Service/web", "ClusterRole/web-reader", "ConfigMap/web-feature-flags", "CronJob/web-cleanup"}

func (d *demo) recordAndRecover(ctx context.Context) error {
	d.chapter("1. Record, recreate, recover: Eno deletes the orphans")
	ref := domain.CompositionRef{Namespace: "team-a", Name: "web"}
	comp, err := d.synthesize(ref, nil, webV1...)
	if err != nil {
		return err
	}
	d.say("   %s opted in (UID %s); Eno synthesized %d resources (synthesis %s) and applied them",
		ref, comp.UID[len(comp.UID)-4:], len(webV1), short(comp.SynthesisUUID()))
	d.showDownstream(ref)
	if _, err := d.reconcile(ctx, ref); err != nil {
		return err
	}
	lineage, _ := domain.LineageOf(comp)
	d.showSecrets(lineage)
	if err := d.recreate(ref, nil, webV1[:4]...); err != nil {
		return err
	}
	if _, err := d.reconcile(ctx, ref); err != nil {
		return err
	}
	d.say("   a synthesis decided Recovered is never recorded: the snapshot stays the old incarnation's")
	d.showSecrets(lineage)
	if err := d.enoFollows(ctx, ref); err != nil {
		return err
	}
	d.showSecrets(lineage)
	d.say("   reconciling again changes nothing:")
	if _, err := d.reconcile(ctx, ref); err != nil {
		return err
	}

	d.say("   later, an operator forces a resynthesis:")
	d.clock = d.clock.Add(time.Minute)
	live, err := d.cluster.LiveComposition(ctx, ref)
	if err != nil {
		return err
	}
	if _, err := d.cluster.SetAnnotation(ref, domain.AnnotationForceResynthesis, live.SynthesisUUID()); err != nil {
		return err
	}
	if err := d.enoFollows(ctx, ref); err != nil {
		return err
	}
	d.showSecrets(lineage)
	return nil
}

func (d *demo) halfWritten(ctx context.Context) error {
	d.chapter("2. A half-written replacement reads as invalid, never as history")
	ref := domain.CompositionRef{Namespace: "team-b", Name: "api"}
	if _, err := d.synthesize(ref, nil, "ConfigMap/api-a", "ConfigMap/api-b", "Deployment/api", "Service/api"); err != nil {
		return err
	}
	if _, err := d.reconcile(ctx, ref); err != nil {
		return err
	}
	d.say("   a new synthesis of %s with more resources starts replacing the snapshot; the controller crashes after one write", ref)
	if _, err := d.synthesize(ref, nil, "ConfigMap/api-a", "ConfigMap/api-b", "ConfigMap/api-c", "ConfigMap/api-d", "Deployment/api", "Service/api", "Service/api-internal"); err != nil {
		return err
	}
	writes := 0
	d.cluster.SetBeforeWrite(func(op, name string) error {
		if op == memory.OpCreateChunk || op == memory.OpUpdateChunk {
			writes++
			if writes > 1 {
				return errors.New("controller crashed")
			}
		}
		return nil
	})
	_, _ = d.reconcile(ctx, ref)
	d.cluster.SetBeforeWrite(nil)
	lineage := domain.DefaultLineage(ref.Namespace, ref.Name)
	d.showSecrets(lineage)
	if err := d.recreate(ref, nil, "Deployment/api"); err != nil {
		return err
	}
	if _, err := d.reconcile(ctx, ref); err != nil {
		return err
	}
	d.say("   nothing was handed to Eno: the orphans stay")
	d.showDownstream(ref)
	return nil
}

func (d *demo) siblings(ctx context.Context) error {
	d.chapter("3. Siblings sharing a lineage: a living sibling's history is never ours, nor another namespace's")
	shared := map[string]string{domain.AnnotationLineageOverride: "checkout"}
	east := domain.CompositionRef{Namespace: "shop", Name: "checkout-east"}
	west := domain.CompositionRef{Namespace: "shop", Name: "checkout-west"}
	if _, err := d.synthesize(west, shared, "Deployment/checkout-west", "ConfigMap/checkout-west"); err != nil {
		return err
	}
	if _, err := d.reconcile(ctx, west); err != nil {
		return err
	}
	if _, err := d.synthesize(east, shared, "Deployment/checkout-east", "ConfigMap/checkout-east"); err != nil {
		return err
	}
	if _, err := d.reconcile(ctx, east); err != nil {
		return err
	}
	d.say("   %s and %s share lineage override %q (copied from one template); %s recorded later", east, west, "checkout", east)
	if err := d.cluster.DeleteComposition(east); err != nil {
		return err
	}
	d.say("   %s is deleted with an orphaning strategy and not re-created", east)
	if err := d.recreate(west, shared, "Deployment/checkout-west"); err != nil {
		return err
	}
	d.say("   %s's own predecessor is the candidate, not %s's newer snapshot, and no other Composition of the lineage lives:", west, east)
	if _, err := d.reconcile(ctx, west); err != nil {
		return err
	}
	if err := d.enoFollows(ctx, west); err != nil {
		return err
	}
	d.showDownstream(east)

	north := domain.CompositionRef{Namespace: "shop", Name: "checkout-north"}
	d.say("   a new %s with the same override has no history of its own, so every snapshot of the lineage in namespace shop is a candidate;", north)
	d.say("   one was recorded for a sibling that is alive:")
	if _, err := d.synthesize(north, shared, "Deployment/checkout-north"); err != nil {
		return err
	}
	if _, err := d.reconcile(ctx, north); err != nil {
		return err
	}

	eu := domain.CompositionRef{Namespace: "shop-eu", Name: "checkout"}
	d.say("   %s in another namespace copies the override: adoption across namespaces is off, so the history of namespace shop is not its own:", eu)
	if _, err := d.synthesize(eu, shared, "Deployment/checkout"); err != nil {
		return err
	}
	if _, err := d.reconcile(ctx, eu); err != nil {
		return err
	}
	d.showDownstream(east)
	return nil
}

func (d *demo) heldForReview(ctx context.Context) error {
	d.chapter("4. A broken synthesizer would delete most of an environment: held for review")
	ref := domain.CompositionRef{Namespace: "team-c", Name: "db"}
	if _, err := d.synthesize(ref, nil, "ConfigMap/db-config", "Service/db", "Service/db-headless", "ConfigMap/db-init", "Secret/db-credentials-ref"); err != nil {
		return err
	}
	if _, err := d.reconcile(ctx, ref); err != nil {
		return err
	}
	if err := d.recreate(ref, nil, "Service/db"); err != nil {
		return err
	}
	if _, err := d.reconcile(ctx, ref); err != nil {
		return err
	}
	comp, err := d.cluster.LiveComposition(ctx, ref)
	if err != nil {
		return err
	}
	for _, e := range d.cluster.Events() {
		if e.Reason == "HeldForReview" && e.Composition == ref {
			d.say("   event %s: %s", e.Reason, e.Message)
		}
	}
	d.say("   nothing was handed to Eno yet:")
	d.showDownstream(ref)
	review := "approve:" + comp.SynthesisUUID()
	d.say("   an operator reviews the list and sets %s=%s", domain.AnnotationReview, review)
	if _, err := d.cluster.SetAnnotation(ref, domain.AnnotationReview, review); err != nil {
		return err
	}
	if _, err := d.reconcile(ctx, ref); err != nil {
		return err
	}
	return d.enoFollows(ctx, ref)
}
