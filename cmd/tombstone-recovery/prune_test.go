package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// Every prune test keeps its inventory in a namespace of its own: prune reads every lineage of
// the namespace, and other tests' Secrets in kube-system are not its to judge.

// pruneLater runs prune two hours from now, so that a lineage written during the test is older
// than --older-than 1h.
func pruneLater(between func()) pruner {
	return pruner{now: func() time.Time { return time.Now().Add(2 * time.Hour) }, between: between}
}

func (pr pruner) runOK(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	require.NoError(t, pr.run(testCtx(t), append([]string{"--kubeconfig", kubeconfigOf(t, ""), "--older-than", "1h"}, args...), &out, &errOut),
		"stderr: %s, stdout: %s", errOut.String(), out.String())
	return out.String()
}

func pruneReportOf(t *testing.T, raw string) app.PruneReport {
	t.Helper()
	var r app.PruneReport
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&r), raw)
	return r
}

// putSnapshot writes a snapshot of n entries recorded for ns/name into the inventory namespace
// inv, the chunks at most maxBytes each, and returns its Secret names by index.
func putSnapshot(t *testing.T, c kubetest.Clients, inv string, ref domain.CompositionRef, l domain.Lineage, synthesis string, at time.Time, n, maxBytes int, edit ...func(*corev1.Secret)) []string {
	t.Helper()
	entries := make([]domain.Entry, n)
	for i := range entries {
		entries[i] = domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: ref.Namespace, Name: "cm-" + itoa(i)}
	}
	invn, err := domain.NewInventory(entries)
	require.NoError(t, err)
	chunks, err := domain.SplitInventory(invn, maxBytes, 0)
	require.NoError(t, err)
	meta := domain.SnapshotMeta{Lineage: l, CompositionNamespace: ref.Namespace, CompositionName: ref.Name, CompositionUID: "uid-" + synthesis,
		SynthesisUUID: synthesis, SynthesisTime: at, Digest: invn.Digest(), ChunkCount: len(chunks)}
	var names []string
	for _, ch := range chunks {
		cs := domain.DesiredChunkSecret(inv, meta, ch)
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: inv, Name: cs.Name, Labels: cs.Labels, Annotations: cs.Annotations},
			Type: corev1.SecretType(cs.Type), Data: cs.Data}
		for _, e := range edit {
			e(s)
		}
		putSecret(t, c, s)
		names = append(names, s.Name)
	}
	return names
}

func secretsIn(t *testing.T, c kubetest.Clients, inv string) []string {
	t.Helper()
	list, err := c.Kube.CoreV1().Secrets(inv).List(testCtx(t), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Name)
	}
	return out
}

// pruneWorld is an inventory namespace holding:
//   - lineage of ns/web (living): a newer snapshot of 2 chunks over an older one of 3, leaving
//     chunk 2 over (a), and an older format-1 Secret of ns/web-v1 (c);
//   - lineage of ns/gone (no Composition): 2 chunks (b), and beside them a Secret with the
//     lineage label but not ours, and one labelled ours of another type;
//   - lineage of ns/held (recovery held for review): a leftover chunk, kept.
type pruneWorld struct {
	inv, ns                     string
	web, gone, held             domain.Lineage
	webNewest, leftover, format string
	goneSecrets, foreign        []string
	heldLeftover                string
}

func newPruneWorld(t *testing.T, c kubetest.Clients) pruneWorld {
	t.Helper()
	ctx := testCtx(t)
	w := pruneWorld{inv: c.NewNamespace(t, "prune-inv"), ns: c.NewNamespace(t, "prune")}
	w.web, w.gone, w.held = domain.DefaultLineage(w.ns, "web"), domain.DefaultLineage(w.ns, "gone"), domain.DefaultLineage(w.ns, "held")
	t0 := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
	webRef := domain.CompositionRef{Namespace: w.ns, Name: "web"}
	older := putSnapshot(t, c, w.inv, webRef, w.web, "00000000-0000-4000-8000-00000000000a", t0, 14, 400)
	newer := putSnapshot(t, c, w.inv, webRef, w.web, "00000000-0000-4000-8000-00000000000b", t0.Add(time.Hour), 9, 400)
	require.Len(t, older, 3)
	require.Len(t, newer, 2)
	w.webNewest, w.leftover = newer[0], older[2]
	w.format = putSnapshot(t, c, w.inv, domain.CompositionRef{Namespace: w.ns, Name: "web-v1"}, w.web, "00000000-0000-4000-8000-00000000000c", t0.Add(-time.Hour), 1, 400,
		func(s *corev1.Secret) { s.Annotations[domain.AnnotationFormat] = "1" })[0]
	_, err := kubetest.CreateComposition(ctx, c.Dynamic, domain.Composition{Namespace: w.ns, Name: "web"})
	require.NoError(t, err)

	w.goneSecrets = putSnapshot(t, c, w.inv, domain.CompositionRef{Namespace: w.ns, Name: "gone"}, w.gone, "00000000-0000-4000-8000-00000000000d", t0, 9, 400)
	notOurs := func(name string, edit func(*corev1.Secret)) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.inv, Name: name,
			Labels: map[string]string{domain.LabelLineage: w.gone.String(), domain.LabelManagedBy: domain.ManagedByValue}}, Type: domain.SecretType}
		edit(s)
		putSecret(t, c, s)
		w.foreign = append(w.foreign, name)
	}
	notOurs("gone-unlabelled", func(s *corev1.Secret) { delete(s.Labels, domain.LabelManagedBy) })
	notOurs("gone-opaque", func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque })

	heldRef := domain.CompositionRef{Namespace: w.ns, Name: "held"}
	putSnapshot(t, c, w.inv, heldRef, w.held, "00000000-0000-4000-8000-00000000000e", t0, 14, 400)
	heldNewer := "00000000-0000-4000-8000-00000000000f"
	putSnapshot(t, c, w.inv, heldRef, w.held, heldNewer, t0.Add(time.Hour), 9, 400)
	w.heldLeftover = domain.ChunkName("held", w.held, 2)
	d := domain.Decision{SynthesisUUID: heldNewer, Outcome: domain.OutcomeHeldForReview, Reason: domain.ReasonOverDeletionGuard, DecidedAt: t0}
	_, err = kubetest.CreateComposition(ctx, c.Dynamic, domain.Composition{Namespace: w.ns, Name: "held",
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationDecision: d.Encode()},
		Synthesis:   &domain.Synthesis{UUID: heldNewer, Synthesized: t0, Ready: true}})
	require.NoError(t, err)
	return w
}

func TestPruneDryRunListsAndDeletesNothing(t *testing.T) {
	c := testEnv.AdminClients(t)
	w := newPruneWorld(t, c)
	before := secretsIn(t, c, w.inv)

	out := pruneLater(nil).runOK(t, "--inventory-namespace", w.inv)
	hasLine(t, out, `DRY RUN: nothing is deleted; pass --confirm to delete$`)
	hasLine(t, out, `^SECRETS \(4\)$`)
	hasLine(t, out, `^`+w.leftover+`\s+`+w.web.String()+`\s+LeftoverChunk\s+would delete\s+chunk 2 of synthesis`)
	hasLine(t, out, `^`+w.format+`\s+`+w.web.String()+`\s+SupersededFormat1\s+would delete\s+format 1`)
	for _, s := range w.goneSecrets {
		hasLine(t, out, `^`+s+`\s+`+w.gone.String()+`\s+LineageGone\s+would delete\s+none of its Compositions \(`+w.ns+`/gone\) exists .*ends recoverability of lineage `+w.gone.String()+`$`)
	}
	hasLine(t, out, `^`+w.held.String()+`\s+the recovery of `+w.ns+`/held is held for review`)
	hasLine(t, out, `^TOTAL: 4 Secret\(s\) would be deleted$`)
	assert.NotContains(t, out, w.webNewest+" ")
	assert.NotContains(t, out, w.heldLeftover)
	for _, f := range w.foreign {
		assert.NotContains(t, out, f)
	}
	assert.ElementsMatch(t, before, secretsIn(t, c, w.inv), "a dry run deletes nothing")

	r := pruneReportOf(t, pruneLater(nil).runOK(t, "--inventory-namespace", w.inv, "-o", "json"))
	assert.False(t, r.Confirmed)
	assert.Equal(t, 4, r.Total)
	assert.Empty(t, r.GoneRefused)
}

// TestPruneConfirmSkipsWhatChanged deletes with --confirm while, between the listing and the
// deletes, ns/gone is re-created and the leftover chunk is written to.
func TestPruneConfirmSkipsWhatChanged(t *testing.T) {
	c := testEnv.AdminClients(t)
	w := newPruneWorld(t, c)
	before := secretsIn(t, c, w.inv)
	between := func() {
		ctx := testCtx(t)
		_, err := kubetest.CreateComposition(ctx, c.Dynamic, domain.Composition{Namespace: w.ns, Name: "gone"})
		require.NoError(t, err)
		s, err := c.Kube.CoreV1().Secrets(w.inv).Get(ctx, w.leftover, metav1.GetOptions{})
		require.NoError(t, err)
		s.Annotations["touched"] = "yes"
		_, err = c.Kube.CoreV1().Secrets(w.inv).Update(ctx, s, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	r := pruneReportOf(t, pruneLater(between).runOK(t, "--inventory-namespace", w.inv, "--confirm", "-o", "json"))
	assert.True(t, r.Confirmed)
	assert.Equal(t, 4, r.Total)
	assert.Equal(t, 1, r.Deleted)
	assert.Equal(t, 3, r.Skipped)
	results := map[string]app.PruneSecret{}
	for _, s := range r.Secrets {
		results[s.Name] = s
	}
	assert.Equal(t, app.PruneDeleted, results[w.format].Result)
	assert.Equal(t, app.PruneSkipped, results[w.leftover].Result)
	assert.Contains(t, results[w.leftover].SkipReason, "changed since it was listed")
	for _, s := range w.goneSecrets {
		assert.Equal(t, app.PruneSkipped, results[s].Result)
		assert.Contains(t, results[s].SkipReason, "no longer selected", "the Composition was re-created during the prune")
	}
	var want []string
	for _, s := range before {
		if s != w.format {
			want = append(want, s)
		}
	}
	assert.ElementsMatch(t, want, secretsIn(t, c, w.inv))

	// Run again: the leftover goes; the re-created Composition's lineage stays, its newest
	// snapshot included.
	out := pruneLater(nil).runOK(t, "--inventory-namespace", w.inv, "--confirm")
	hasLine(t, out, `^`+w.leftover+`\s+`+w.web.String()+`\s+LeftoverChunk\s+deleted\s+`)
	hasLine(t, out, `^TOTAL: 1 selected, 1 deleted, 0 skipped$`)
	assert.NotContains(t, secretsIn(t, c, w.inv), w.leftover)
	assert.Subset(t, secretsIn(t, c, w.inv), append(append([]string{w.webNewest, w.heldLeftover}, w.goneSecrets...), w.foreign...))
}

func TestPruneRefusesGoneLineagesWhenNoneLives(t *testing.T) {
	c := testEnv.AdminClients(t)
	inv, ns := c.NewNamespace(t, "prune-inv"), c.NewNamespace(t, "prune")
	l := domain.DefaultLineage(ns, "gone")
	gone := putSnapshot(t, c, inv, domain.CompositionRef{Namespace: ns, Name: "gone"}, l, "00000000-0000-4000-8000-0000000000aa", time.Now().Add(-time.Hour).UTC().Truncate(time.Second), 1, 400)

	out := pruneLater(nil).runOK(t, "--inventory-namespace", inv, "--confirm")
	hasLine(t, out, `^\(b\) REFUSED: no lineage of this cluster has a living Composition on the control plane given`)
	hasLine(t, out, `^`+l.String()+`\s+no Composition of it exists, but \(b\) is refused`)
	hasLine(t, out, `^TOTAL: 0 selected, 0 deleted, 0 skipped$`)
	assert.Equal(t, gone, secretsIn(t, c, inv))
}

// Two control planes share one downstream kube-system (design §7): prune, given this control
// plane (named by its kube-system UID), deletes this one's gone lineage and never the other's,
// whose Composition is as gone here; the other's living lineage does not lift the guard for it.
func TestPruneLeavesAnotherControlPlanesSecrets(t *testing.T) {
	c := testEnv.AdminClients(t)
	ctx := testCtx(t)
	inv, ns := c.NewNamespace(t, "prune-inv"), c.NewNamespace(t, "prune")
	ks, err := c.Kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	require.NoError(t, err)
	by := func(cp string) func(*corev1.Secret) {
		return func(s *corev1.Secret) { s.Annotations[domain.AnnotationControlPlane] = cp }
	}
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	put := func(name, synthesis, cp string) []string {
		return putSnapshot(t, c, inv, domain.CompositionRef{Namespace: ns, Name: name}, domain.DefaultLineage(ns, name), synthesis, t0, 1, 400, by(cp))
	}
	put("live", "00000000-0000-4000-8000-0000000000b1", string(ks.UID))
	mine := put("mine", "00000000-0000-4000-8000-0000000000b2", string(ks.UID))
	theirs := put("theirs", "00000000-0000-4000-8000-0000000000b3", "cp-other")
	_, err = kubetest.CreateComposition(ctx, c.Dynamic, domain.Composition{Namespace: ns, Name: "live"})
	require.NoError(t, err)

	out := pruneLater(nil).runOK(t, "--inventory-namespace", inv, "--confirm")
	hasLine(t, out, `^`+mine[0]+`\s+\S+\s+LineageGone\s+deleted\s+`)
	hasLine(t, out, `^`+domain.DefaultLineage(ns, "theirs").String()+`\s+1 Secret\(s\) written by another control plane`)
	hasLine(t, out, `^TOTAL: 1 selected, 1 deleted, 0 skipped$`)
	assert.Contains(t, secretsIn(t, c, inv), theirs[0])
	assert.NotContains(t, secretsIn(t, c, inv), mine[0])

	// As the other control plane: its only lineage is gone here too, and no lineage of its own
	// lives on the control plane given, so nothing whole is deleted.
	out = pruneLater(nil).runOK(t, "--inventory-namespace", inv, "--control-plane-id", "cp-other", "--confirm")
	hasLine(t, out, `^\(b\) REFUSED: no lineage of this cluster has a living Composition`)
	hasLine(t, out, `^TOTAL: 0 selected, 0 deleted, 0 skipped$`)
	assert.Contains(t, secretsIn(t, c, inv), theirs[0])
}

func TestInventoryPrunerDeletesOnlyWithItsPreconditions(t *testing.T) {
	c := testEnv.AdminClients(t)
	ctx := testCtx(t)
	inv, ns := c.NewNamespace(t, "prune-inv"), c.NewNamespace(t, "prune")
	l := domain.DefaultLineage(ns, "web")
	name := putSnapshot(t, c, inv, domain.CompositionRef{Namespace: ns, Name: "web"}, l, "00000000-0000-4000-8000-0000000000bb", time.Now().UTC().Truncate(time.Second), 1, 400)[0]
	p, err := k8s.NewInventoryPruner(c.Kube.CoreV1(), inv)
	require.NoError(t, err)
	listed, err := p.ListChunks(ctx, l)
	require.NoError(t, err)
	require.Len(t, listed, 1)
	s := listed[0]
	require.NotEmpty(t, s.UID)

	staleUID, staleRV := s, s
	staleUID.UID = "00000000-0000-0000-0000-000000000000"
	staleRV.ResourceVersion = "1"
	notOurs := s.Clone()
	notOurs.Type = "Opaque"
	elsewhere := s.Clone()
	elsewhere.Namespace = "kube-system"
	for _, tt := range []struct {
		name string
		s    domain.ChunkSecret
		want error
	}{
		{"another UID", staleUID, ports.ErrConflict},
		{"another resourceVersion", staleRV, ports.ErrConflict},
		{"not ours", notOurs, nil},
		{"outside the inventory namespace", elsewhere, ports.ErrOutsideInventoryNamespace},
	} {
		err := p.DeleteChunk(ctx, tt.s)
		require.Error(t, err, tt.name)
		if tt.want != nil {
			assert.ErrorIs(t, err, tt.want, tt.name)
		}
		assert.Equal(t, []string{name}, secretsIn(t, c, inv), tt.name)
	}
	require.NoError(t, p.DeleteChunk(ctx, s))
	assert.Empty(t, secretsIn(t, c, inv))
	assert.ErrorIs(t, p.DeleteChunk(ctx, s), ports.ErrNotFound)
}

func TestPruneRejectsBadFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--older-than", "0s"}, "--older-than must be positive"},
		{[]string{"-o", "yaml"}, "-o must be table or json"},
		{[]string{"--inventory-namespace", ""}, "--inventory-namespace must not be empty"},
		{[]string{"--max-chunks", "0"}, "--max-chunks must be at least 1"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		var out, errOut bytes.Buffer
		err := dispatch(context.Background(), append([]string{"prune"}, tt.args...), &out, &errOut)
		require.Error(t, err, tt.args)
		assert.Contains(t, err.Error(), "prune: "+tt.want)
	}
	var out, errOut bytes.Buffer
	require.NoError(t, dispatch(context.Background(), []string{"prune", "-h"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "--confirm")
}

// A user who may not read the inventory is told what failed and what the credentials need.
func TestPruneSaysWhatItsCredentialsLack(t *testing.T) {
	c := testEnv.AdminClients(t)
	inv := c.NewNamespace(t, "prune-inv")
	var out, errOut bytes.Buffer
	err := pruner{now: time.Now}.run(testCtx(t), []string{"--kubeconfig", kubeconfigOf(t, inspectReader), "--control-plane-id", "cp-a", "--inventory-namespace", inv, "--confirm"}, &out, &errOut)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "prune: reading the clusters, nothing was deleted: listing inventory secrets in namespace "+inv)
	assert.Contains(t, err.Error(), "they need list and delete on secrets in "+inv+" downstream")
	assert.Empty(t, out.String())
}

// deploy/prune-cronjob.yaml is accepted by the API server, and its prune is a dry run with flags
// prune accepts.
func TestPruneCronJobExample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "prune-cronjob.yaml"))
	require.NoError(t, err)
	objs, err := kubetest.DecodeManifests(data)
	require.NoError(t, err)
	c := testEnv.AdminClients(t)
	ctx := testCtx(t)
	_, err = c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "eno-system"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	gvr := map[string]schema.GroupVersionResource{
		"ServiceAccount":     {Version: "v1", Resource: "serviceaccounts"},
		"ClusterRole":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		"ClusterRoleBinding": {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
		"CronJob":            {Group: "batch", Version: "v1", Resource: "cronjobs"},
	}
	var args []string
	for _, o := range objs {
		r, ok := gvr[o.GetKind()]
		require.True(t, ok, "unexpected kind %s", o.GetKind())
		opts := metav1.ApplyOptions{FieldManager: "test", DryRun: []string{metav1.DryRunAll}}
		if ns := o.GetNamespace(); ns != "" {
			_, err = c.Dynamic.Resource(r).Namespace(ns).Apply(ctx, o.GetName(), o, opts)
		} else {
			_, err = c.Dynamic.Resource(r).Apply(ctx, o.GetName(), o, opts)
		}
		require.NoError(t, err, "%s %s", o.GetKind(), o.GetName())
		if o.GetKind() == "CronJob" {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "jobTemplate", "spec", "template", "spec", "containers")
			require.Len(t, containers, 1)
			args, _, _ = unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		}
	}
	require.NotEmpty(t, args)
	assert.Equal(t, "prune", args[0])
	o, err := parsePruneFlags(args[1:], &bytes.Buffer{})
	require.NoError(t, err)
	assert.False(t, o.confirm, "the example is a dry run")
}
