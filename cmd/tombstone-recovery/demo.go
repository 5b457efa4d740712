package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// demoChunkBytes is small so the demo's snapshots span several Secrets.
const demoChunkBytes = 300

// demo tells the whole story on the in-memory adapters: record, recreate, recover, refuse.
type demo struct {
	out     io.Writer
	cluster *memory.Cluster
	svc     *app.Service
	clock   time.Time
	synths  int
}

func runDemo(ctx context.Context, out io.Writer) error {
	d := &demo{out: out, cluster: memory.NewCluster(domain.DefaultInventoryNamespace), clock: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	cfg := app.DefaultConfig()
	cfg.Enabled = true
	cfg.MaxChunkBytes = demoChunkBytes
	cfg.Now = func() time.Time { return d.clock }
	svc, err := app.New(cfg, app.Deps{
		Compositions: d.cluster, Guard: d.cluster, Slices: d.cluster, Store: d.cluster,
		Sink: d.cluster, Decisions: d.cluster, Events: d.cluster,
	})
	if err != nil {
		return err
	}
	d.svc = svc
	for _, chapter := range []func(context.Context) error{d.recordAndRecover, d.halfWritten, d.ambiguous, d.heldForReview} {
		if err := chapter(ctx); err != nil {
			return err
		}
	}
	d.say("\nThe end: one recovery, two refusals that deleted nothing, and one held deletion an operator approved.")
	return nil
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

func (d *demo) chapter(title string) {
	d.say("\n== %s ==", title)
}

// synthesize stores a new synthesis of the named Composition producing kinds, one slice.
func (d *demo) synthesize(ref domain.CompositionRef, annotations map[string]string, names ...string) domain.Composition {
	d.synths++
	d.clock = d.clock.Add(time.Minute)
	uuid := fmt.Sprintf("%08x-0000-4000-8000-%012d", d.synths*0x1111111, d.synths)
	slice := domain.ResourceSlice{Namespace: ref.Namespace, Name: fmt.Sprintf("%s-%s", ref.Name, uuid[:8]), SynthesisUUID: uuid}
	for _, n := range names {
		slice.Resources = append(slice.Resources, domain.SliceResource{Manifest: demoManifest(ref.Namespace, n)})
	}
	d.cluster.PutSlice(slice)
	comp := domain.Composition{Namespace: ref.Namespace, Name: ref.Name, Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue}}
	if cur, err := d.cluster.LiveComposition(context.Background(), ref); err == nil {
		comp = cur
	}
	for k, v := range annotations {
		comp.Annotations[k] = v
	}
	comp.Synthesis = &domain.Synthesis{UUID: uuid, Synthesized: d.clock.Truncate(time.Second), Ready: true, Slices: []string{slice.Name}}
	return d.cluster.PutComposition(comp)
}

// demoManifest makes a manifest from "Kind/name" (cluster-scoped kinds have no namespace).
func demoManifest(namespace, kindName string) string {
	kind, name, _ := strings.Cut(kindName, "/")
	apiVersion := map[string]string{"Deployment": "apps/v1", "ClusterRole": "rbac.authorization.k8s.io/v1", "CronJob": "batch/v1"}[kind]
	if apiVersion == "" {
		apiVersion = "v1"
	}
	meta := map[string]any{"name": name, "labels": map[string]string{"app": "web"}}
	if kind != "ClusterRole" {
		meta["namespace"] = namespace
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta})
	return string(b)
}

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
		d.say("   recovery decision for %s: %s%s", ref, dec.Outcome, reason)
		d.say("     %s", dec.Message)
		for _, t := range r.Plan.Tombstones {
			d.say("     tombstone: %s", t.Entry.ID())
		}
		for _, t := range r.Plan.Held {
			d.say("     held for review: %s", t.Entry.ID())
		}
		if dec.TombstoneSlice != "" {
			d.say("     tombstones published in ResourceSlice %s/%s", ref.Namespace, dec.TombstoneSlice)
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
	return res, err
}

func (d *demo) showSecrets(lineage domain.Lineage) {
	secrets, _ := d.cluster.ListChunks(context.Background(), lineage)
	for _, s := range secrets {
		d.say("     secret %s/%s  synthesis %s  chunk %s/%s  %d bytes", s.Namespace, s.Name,
			s.Annotations[domain.AnnotationSourceSynthesisUUID][:8], s.Annotations[domain.AnnotationChunkIndex],
			s.Annotations[domain.AnnotationChunkCount], len(s.Data[domain.SecretDataKey]))
	}
}

func (d *demo) recreate(ctx context.Context, ref domain.CompositionRef, annotations map[string]string, names ...string) error {
	if err := d.cluster.DeleteComposition(ref); err != nil {
		return err
	}
	d.say("   %s deleted with an orphaning strategy; its resources stay in the downstream cluster", ref)
	comp := d.synthesize(ref, annotations, names...)
	d.say("   %s recreated (new UID %s) and synthesized %d resources", ref, comp.UID[len(comp.UID)-4:], len(names))
	return nil
}

var webV1 = []string{"ConfigMap/web-settings", "Deployment/web", "Service/web", "ClusterRole/web-reader", "ConfigMap/web-feature-flags", "CronJob/web-cleanup"}

func (d *demo) recordAndRecover(ctx context.Context) error {
	d.chapter("1. Record, recreate, recover")
	ref := domain.CompositionRef{Namespace: "team-a", Name: "web"}
	comp := d.synthesize(ref, nil, webV1...)
	d.say("   %s opted in and synthesized %d resources (UID %s)", ref, len(webV1), comp.UID[len(comp.UID)-4:])
	if _, err := d.reconcile(ctx, ref); err != nil {
		return err
	}
	lineage, _ := domain.LineageOf(comp)
	d.showSecrets(lineage)
	if err := d.recreate(ctx, ref, nil, webV1[:4]...); err != nil {
		return err
	}
	if _, err := d.reconcile(ctx, ref); err != nil {
		return err
	}
	d.showSecrets(lineage)
	d.say("   reconciling again changes nothing:")
	_, err := d.reconcile(ctx, ref)
	return err
}

func (d *demo) halfWritten(ctx context.Context) error {
	d.chapter("2. A half-written replacement reads as invalid, never as history")
	ref := domain.CompositionRef{Namespace: "team-b", Name: "api"}
	d.synthesize(ref, nil, "ConfigMap/api-a", "ConfigMap/api-b", "Deployment/api", "Service/api")
	if _, err := d.reconcile(ctx, ref); err != nil {
		return err
	}
	d.say("   a new synthesis of %s with more resources starts replacing the snapshot; the controller crashes after one write", ref)
	d.synthesize(ref, nil, "ConfigMap/api-a", "ConfigMap/api-b", "ConfigMap/api-c", "ConfigMap/api-d", "Deployment/api", "Service/api", "Service/api-internal")
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
	if err := d.recreate(ctx, ref, nil, "Deployment/api"); err != nil {
		return err
	}
	_, err := d.reconcile(ctx, ref)
	return err
}

func (d *demo) ambiguous(ctx context.Context) error {
	d.chapter("3. Two histories claiming the same moment are ambiguous")
	shared := map[string]string{domain.AnnotationLineageOverride: "checkout"}
	east := domain.CompositionRef{Namespace: "shop", Name: "checkout-east"}
	west := domain.CompositionRef{Namespace: "shop", Name: "checkout-west"}
	d.synthesize(east, shared, "Deployment/checkout", "Service/checkout")
	west1 := d.synthesize(west, shared, "Deployment/checkout", "Service/checkout", "ConfigMap/checkout-west")
	// Both syntheses finished in the same second.
	eastComp, _ := d.cluster.LiveComposition(ctx, east)
	eastComp.Synthesis.Synthesized = west1.Synthesis.Synthesized
	d.cluster.PutComposition(eastComp)
	d.say("   %s and %s share lineage override %q and synthesized in the same second", east, west, "checkout")
	for _, ref := range []domain.CompositionRef{east, west} {
		if _, err := d.reconcile(ctx, ref); err != nil {
			return err
		}
	}
	if err := d.recreate(ctx, west, shared, "Deployment/checkout"); err != nil {
		return err
	}
	_, err := d.reconcile(ctx, west)
	return err
}

func (d *demo) heldForReview(ctx context.Context) error {
	d.chapter("4. A broken synthesizer would delete most of an environment: held for review")
	ref := domain.CompositionRef{Namespace: "team-c", Name: "db"}
	d.synthesize(ref, nil, "ConfigMap/db-config", "Service/db", "Service/db-headless", "ConfigMap/db-init", "Secret/db-credentials-ref")
	if _, err := d.reconcile(ctx, ref); err != nil {
		return err
	}
	if err := d.recreate(ctx, ref, nil, "Service/db"); err != nil {
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
	review := "approve:" + comp.SynthesisUUID()
	d.say("   an operator reviews the list and sets %s=%s", domain.AnnotationReview, review)
	if _, err := d.cluster.SetAnnotation(ref, domain.AnnotationReview, review); err != nil {
		return err
	}
	_, err = d.reconcile(ctx, ref)
	return err
}
