package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// inspectReader is a token user bound to nothing but get/list/watch on what inspect reads.
const inspectReader = "inspect-reader"

// lineageSeq makes lineages unique across tests and -count runs sharing one API server, so no
// test ever sees another's Secrets in kube-system.
var lineageSeq atomic.Int64

func uniqueLineage(prefix string) string {
	return prefix + "-" + strconv.FormatInt(lineageSeq.Add(1), 10)
}

// testCtx bounds one test's calls to the API server.
func testCtx(t *testing.T) context.Context { return kubetest.Context(t, 2*time.Minute) }

func kubeconfigOf(t *testing.T, user string) string {
	t.Helper()
	path, err := testEnv.Kubeconfig(user)
	require.NoError(t, err)
	return path
}

// inspectOK runs `inspect args...` and returns what it printed.
func inspectOK(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	err := dispatch(testCtx(t), append([]string{"inspect"}, args...), &out, &errOut)
	require.NoError(t, err, "stderr: %s", errOut.String())
	return out.String()
}

func inspectJSON(t *testing.T, args ...string) app.InspectReport {
	t.Helper()
	raw := inspectOK(t, append(args, "-o", "json")...)
	var r app.InspectReport
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&r), raw)
	return r
}

// hasLine asserts that some line matches pattern, with runs of spaces written as `\s+`.
func hasLine(t *testing.T, out, pattern string) {
	t.Helper()
	assert.Regexp(t, regexp.MustCompile(`(?m)`+pattern), out)
}

// webEntries is the inventory of design §3.1: 460 bytes, digest sha256:ad60f5..., two chunks at 300 bytes.
func webEntries() []domain.Entry {
	return []domain.Entry{
		{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "web-settings",
			Labels:      map[string]string{"app": "web", "tier": "frontend"},
			Annotations: map[string]string{domain.AnnotationReadinessGroup: "1", domain.AnnotationDeletionGroup: "2"}},
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "team-a", Name: "web",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{domain.AnnotationDeletionGroup: "-1"}},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "web-reader"},
	}
}

const webDigest = "sha256:ad60f577b0e7993930226e46802f03234a8602561918249f1b47b759e672373b"

// orphans are in the recorded snapshot of the recreated fixture but no longer synthesized.
func orphans() []domain.Entry {
	return []domain.Entry{
		{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "web-feature-flags", Labels: map[string]string{"app": "web"}},
		{Group: "batch", Version: "v1", Kind: "CronJob", Namespace: "team-a", Name: "web-cleanup"},
	}
}

// storeSnapshot writes the chunks of a snapshot of entries as Secrets in kube-system (only the
// given indexes when any are given), creating or overwriting them, and returns the chunk count.
func storeSnapshot(t *testing.T, c kubetest.Clients, meta domain.SnapshotMeta, entries []domain.Entry, maxBytes int, only ...int) int {
	t.Helper()
	inv, err := domain.NewInventory(entries)
	require.NoError(t, err)
	chunks, err := domain.SplitInventory(inv, maxBytes, 0)
	require.NoError(t, err)
	meta.Digest, meta.ChunkCount = inv.Digest(), len(chunks)
	if meta.ControlPlane == "" { // as this control plane records it: history naming none is held for review
		meta.ControlPlane = localControlPlane(t, c)
	}
	for _, ch := range chunks {
		if len(only) > 0 && !containsInt(only, ch.Index()) {
			continue
		}
		cs := domain.DesiredChunkSecret(domain.DefaultInventoryNamespace, meta, ch)
		putSecret(t, c, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: cs.Namespace, Name: cs.Name, Labels: cs.Labels, Annotations: cs.Annotations},
			Type:       corev1.SecretType(cs.Type),
			Data:       cs.Data,
		})
	}
	return len(chunks)
}

// localControlPlane is the test API server's control plane name: its kube-system UID.
func localControlPlane(t *testing.T, c kubetest.Clients) string {
	ks, err := c.Kube.CoreV1().Namespaces().Get(t.Context(), metav1.NamespaceSystem, metav1.GetOptions{})
	require.NoError(t, err)
	return string(ks.UID)
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// putSecret writes s as this controller's recording would: under its field manager, whose
// writes alone give the history its write time (design §6.3).
func putSecret(t *testing.T, c kubetest.Clients, s *corev1.Secret) {
	t.Helper()
	ctx := testCtx(t)
	secrets := c.Kube.CoreV1().Secrets(s.Namespace)
	_, err := secrets.Create(ctx, s, metav1.CreateOptions{FieldManager: domain.FieldManager})
	if apierrors.IsAlreadyExists(err) {
		live, getErr := secrets.Get(ctx, s.Name, metav1.GetOptions{})
		require.NoError(t, getErr)
		s.ResourceVersion = live.ResourceVersion
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{FieldManager: domain.FieldManager})
	}
	require.NoError(t, err)
}

func manifestOf(t *testing.T, e domain.Entry) string {
	t.Helper()
	meta := map[string]any{"name": e.Name}
	if e.Namespace != "" {
		meta["namespace"] = e.Namespace
	}
	if len(e.Labels) > 0 {
		meta["labels"] = e.Labels
	}
	if len(e.Annotations) > 0 {
		meta["annotations"] = e.Annotations
	}
	b, err := json.Marshal(map[string]any{"apiVersion": e.APIVersion(), "kind": e.Kind, "metadata": meta})
	require.NoError(t, err)
	return string(b)
}

// recreated is a Composition <ns>/web whose earlier incarnation (another UID) recorded a snapshot.
type recreated struct {
	ns, lineage         string
	sourceUUID, nowUUID string
	sourceTime          time.Time
	compUID, sliceName  string
}

const (
	recreatedSourceUUID = "11111111-0000-4000-8000-000000000001"
	recreatedNowUUID    = "22222222-0000-4000-8000-000000000002"
)

// recreatedComposition stores a snapshot of webEntries+orphans from an old incarnation of <ns>/web
// with lineage override `lineage`, and a new incarnation whose current synthesis produces only
// webEntries: two tombstones out of five entries, under the default guard of 0.5.
func recreatedComposition(t *testing.T, c kubetest.Clients, lineage string) recreated {
	t.Helper()
	ctx := testCtx(t)
	r := recreated{ns: c.NewNamespace(t, "inspect"), lineage: lineage, sourceUUID: recreatedSourceUUID, nowUUID: recreatedNowUUID,
		sourceTime: time.Now().Add(-time.Hour).UTC().Truncate(time.Second), sliceName: "web-" + recreatedNowUUID[:8]}
	l, err := domain.NewLineage(lineage)
	require.NoError(t, err)
	// The old incarnation's orphans exist downstream from before its snapshot was written, as
	// Eno applies a synthesis before it is Ready and recorded (design §6.3 reads them).
	deployOrphans(t, c)
	storeSnapshot(t, c, domain.SnapshotMeta{Lineage: l, CompositionNamespace: r.ns, CompositionName: "web",
		CompositionUID: "0ld0ld00-0000-4000-8000-000000000000", SynthesisUUID: r.sourceUUID, SynthesisTime: r.sourceTime},
		append(webEntries(), orphans()...), domain.DefaultMaxChunkBytes)

	slice := domain.ResourceSlice{Namespace: r.ns, Name: r.sliceName, SynthesisUUID: r.nowUUID}
	for _, e := range webEntries() {
		slice.Resources = append(slice.Resources, domain.SliceResource{Manifest: manifestOf(t, e)})
	}
	_, err = kubetest.CreateSlice(ctx, c.Dynamic, slice)
	require.NoError(t, err)

	created, err := kubetest.CreateComposition(ctx, c.Dynamic, domain.Composition{
		Namespace: r.ns, Name: "web",
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationLineageOverride: lineage},
		Synthesis:   &domain.Synthesis{UUID: r.nowUUID, Synthesized: time.Now().Add(-time.Minute), Ready: true, Slices: []string{r.sliceName}},
	})
	require.NoError(t, err)
	r.compUID = string(created.GetUID())
	return r
}

// deployOrphans creates the objects of orphans() downstream (the test API server) unless they
// exist: an object older than the history is the one it recorded.
func deployOrphans(t *testing.T, c kubetest.Clients) {
	t.Helper()
	ctx := testCtx(t)
	ignoreExists := func(err error) {
		t.Helper()
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{})
	ignoreExists(err)
	_, err = c.Kube.CoreV1().ConfigMaps("team-a").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "web-feature-flags", Labels: map[string]string{"app": "web"}}}, metav1.CreateOptions{FieldManager: "eno"}) // as Eno wrote it
	ignoreExists(err)
	_, err = c.Kube.BatchV1().CronJobs("team-a").Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "web-cleanup"},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "cleanup", Image: "busybox"}}},
		}}}},
	}, metav1.CreateOptions{FieldManager: "eno"})
	ignoreExists(err)
}

// assertUntouched checks that inspect left no decision and published no tombstones.
func (r recreated) assertUntouched(t *testing.T, c kubetest.Clients) {
	t.Helper()
	ctx := testCtx(t)
	comp, err := c.Dynamic.Resource(k8s.CompositionGVR).Namespace(r.ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, comp.GetAnnotations(), domain.AnnotationDecision)
	list, err := c.Dynamic.Resource(k8s.ResourceSliceGVR).Namespace(r.ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	family := domain.RecoverySliceFamily("web", r.nowUUID)
	for _, sl := range list.Items {
		assert.False(t, strings.HasPrefix(sl.GetName(), family), "a recovery slice exists: %s", sl.GetName())
	}
}

// assertRecoveredTable checks the table of a --composition inspect of the recreated fixture.
func (r recreated) assertRecoveredTable(t *testing.T, out string) {
	t.Helper()
	hasLine(t, out, `^Lineage `+r.lineage+` in namespace kube-system`)
	hasLine(t, out, `^Composition `+r.ns+`/web\s+uid `+r.compUID+`\s+current synthesis `+r.nowUUID+`\s+\(lineage from override`)
	hasLine(t, out, `^`+r.sourceUUID+`\s+`+r.sourceTime.Format(time.RFC3339)+`\s+`+r.ns+`/web\s+0ld0ld00-\S+\s+1/1\s+.*\s+ok\s+complete, selected$`)
	hasLine(t, out, `^VERDICT ON THE HISTORY: snapshot `+r.sourceUUID+` selected: .*, 5 entries, digest sha256:[0-9a-f]{64} verified$`)
	hasLine(t, out, `^DRY RUN of recovery for `+r.ns+`/web \(nothing is written\)$`)
	hasLine(t, out, `^\s+recovery runs now\s+yes$`)
	hasLine(t, out, `^\s+decision\s+Recovered$`)
	hasLine(t, out, `^TOMBSTONES \(2\)$`)
	hasLine(t, out, `^ConfigMap\s+v1\s+team-a\s+web-feature-flags$`)
	hasLine(t, out, `^CronJob\s+batch/v1\s+team-a\s+web-cleanup$`)
	assert.NotRegexp(t, `(?m)^\S+\s+\S+\s+team-a\s+web-settings$`, out, "a produced resource is listed as a tombstone")
}

func TestInspectLineageWithAValidSnapshot(t *testing.T) {
	c := testEnv.AdminClients(t)
	lineage := uniqueLineage("insp-valid")
	l, _ := domain.NewLineage(lineage)
	ts := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	const uuid = "aaaaaaaa-0000-4000-8000-00000000000a"
	require.Equal(t, 2, storeSnapshot(t, c, domain.SnapshotMeta{Lineage: l, CompositionNamespace: "team-a", CompositionName: "web",
		CompositionUID: "uid-1", SynthesisUUID: uuid, SynthesisTime: ts}, webEntries(), 300))

	out := inspectOK(t, "--lineage", lineage, "--remote-kubeconfig", kubeconfigOf(t, ""), "--max-chunk-bytes", "300")
	t.Log("\n" + out)
	hasLine(t, out, `^Limits: 300 B per chunk, 64 chunks per snapshot, deletion guard 0.5, adoption across namespaces off$`)
	hasLine(t, out, `^SNAPSHOTS \(1\)$`)
	hasLine(t, out, `^`+uuid+`\s+`+ts.Format(time.RFC3339)+`\s+team-a/web\s+uid-1\s+2/2\s+461 B\s+255 B / 300 B \(85%\)\s+ok\s+complete, selected$`)
	hasLine(t, out, `^SECRETS \(2\)$`)
	hasLine(t, out, `^web-`+lineage+`-0\s+`+uuid+`\s+0\s+206 B\s*$`)
	hasLine(t, out, `^web-`+lineage+`-1\s+`+uuid+`\s+1\s+255 B\s*$`)
	hasLine(t, out, `^VERDICT ON THE HISTORY: snapshot `+uuid+` selected: `+ts.Format(time.RFC3339)+`, 3 entries, digest `+webDigest+` verified$`)
	hasLine(t, out, `^DRY RUN: not run; the control plane was not given`)
	assert.NotContains(t, out, "PROBLEMS")

	// The default limit is the API server's: the same chunks are far below it.
	out = inspectOK(t, "--lineage", lineage, "--remote-kubeconfig", kubeconfigOf(t, ""))
	hasLine(t, out, `\s255 B / 1024 KiB \(0%\)\s`)

	// With the control plane but no Composition of that lineage, the dry run says why it did not run.
	out = inspectOK(t, "--lineage", lineage, "--kubeconfig", kubeconfigOf(t, ""))
	hasLine(t, out, `^DRY RUN: not run; no Composition named by the snapshots has lineage `+lineage+` \(team-a/web does not exist\); pass --composition NAMESPACE/NAME for a dry run$`)
}

func TestInspectLineageWithAHalfWrittenReplacement(t *testing.T) {
	c := testEnv.AdminClients(t)
	lineage := uniqueLineage("insp-half")
	l, _ := domain.NewLineage(lineage)
	old := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	const oldUUID, newUUID = "aaaaaaaa-0000-4000-8000-0000000000a1", "bbbbbbbb-0000-4000-8000-0000000000b2"
	meta := domain.SnapshotMeta{Lineage: l, CompositionNamespace: "team-b", CompositionName: "api", CompositionUID: "uid-b"}
	oldMeta, newMeta := meta, meta
	oldMeta.SynthesisUUID, oldMeta.SynthesisTime = oldUUID, old
	newMeta.SynthesisUUID, newMeta.SynthesisTime = newUUID, old.Add(time.Hour)
	require.Equal(t, 2, storeSnapshot(t, c, oldMeta, webEntries(), 300))
	// The replacement crashed after its first write: chunk 0 now belongs to the new synthesis.
	newCount := storeSnapshot(t, c, newMeta, append(webEntries(), orphans()...), 300, 0)
	require.Greater(t, newCount, 1)

	out := inspectOK(t, "--lineage", lineage, "--remote-kubeconfig", kubeconfigOf(t, ""), "--max-chunk-bytes", "300")
	t.Log("\n" + out)
	hasLine(t, out, `^SNAPSHOTS \(2\)$`)
	hasLine(t, out, `^`+newUUID+`\s.*\s1/`+itoa(newCount)+`\s.*\sunchecked\s+incomplete, newest$`)
	hasLine(t, out, `^`+oldUUID+`\s.*\s1/2\s.*\sunchecked\s+incomplete, older$`)
	hasLine(t, out, `^api-`+lineage+`-0\s+`+newUUID+`\s+0\s`)
	hasLine(t, out, `^api-`+lineage+`-1\s+`+oldUUID+`\s+1\s`)
	hasLine(t, out, `^  snapshot `+oldUUID+`: missing chunk index 0$`)
	hasLine(t, out, `^VERDICT ON THE HISTORY: InventoryInvalid \(MissingChunk\): chunk 1 of `+itoa(newCount)+` for synthesis `+newUUID+` is missing$`)
	hasLine(t, out, `^  recovery generates no tombstones from this history$`)

	r := inspectJSON(t, "--lineage", lineage, "--remote-kubeconfig", kubeconfigOf(t, ""), "--max-chunk-bytes", "300")
	assert.Equal(t, "InventoryInvalid", r.Verdict.Outcome)
	assert.Equal(t, "MissingChunk", r.Verdict.Reason)
	require.Len(t, r.Snapshots, 2)
	assert.Equal(t, []string{newUUID, oldUUID}, []string{r.Snapshots[0].SynthesisUUID, r.Snapshots[1].SynthesisUUID})
	assert.False(t, r.Snapshots[0].Complete)
	assert.Equal(t, "newest", r.Snapshots[0].Role)
}

func TestInspectLineageWithAForeignSecret(t *testing.T) {
	c := testEnv.AdminClients(t)
	lineage := uniqueLineage("insp-foreign")
	impostor := lineage + "-impostor"
	l, _ := domain.NewLineage(lineage)
	const uuid = "cccccccc-0000-4000-8000-00000000000c"
	storeSnapshot(t, c, domain.SnapshotMeta{Lineage: l, CompositionNamespace: "team-a", CompositionName: "web",
		CompositionUID: "uid-1", SynthesisUUID: uuid, SynthesisTime: time.Now().Add(-time.Hour).UTC().Truncate(time.Second)},
		webEntries(), domain.DefaultMaxChunkBytes)
	// Someone else's Secret carrying our lineage label: design §5 refuses to trust the lineage at all.
	putSecret(t, c, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: impostor, Labels: map[string]string{domain.LabelLineage: lineage}},
		Data:       map[string][]byte{"password": []byte("hunter2")},
	})

	out := inspectOK(t, "--lineage", lineage, "--remote-kubeconfig", kubeconfigOf(t, ""))
	t.Log("\n" + out)
	hasLine(t, out, `^`+uuid+`\s.*\s1/1\s.*\sok\s+complete, newest$`)
	hasLine(t, out, `^SECRETS \(2\)$`)
	hasLine(t, out, `^`+impostor+`\s+-\s+-\s+7 B\s+not trusted \(Malformed\): not managed by eno-tombstone-recovery`)
	hasLine(t, out, `^VERDICT ON THE HISTORY: InventoryInvalid \(Malformed\): not managed by`)
	hasLine(t, out, `^  secret: `+impostor+`$`)
	assert.NotContains(t, out, "hunter2", "secret data must never be printed")

	r := inspectJSON(t, "--lineage", lineage, "--remote-kubeconfig", kubeconfigOf(t, ""))
	assert.Equal(t, "Malformed", r.Verdict.Reason)
	assert.Equal(t, impostor, r.Verdict.Secret)
	require.Len(t, r.RejectedSecrets, 1)
	assert.Equal(t, app.RejectedSecret{Secret: impostor, Bytes: 7, Reason: "Malformed",
		Detail: "not managed by eno-tombstone-recovery or not of type eno.azure.io/inventory-snapshot; refusing to trust or touch it"}, r.RejectedSecrets[0])
}

func TestInspectLineageWithNoSecrets(t *testing.T) {
	lineage := uniqueLineage("insp-none")
	out := inspectOK(t, "--lineage", lineage, "--remote-kubeconfig", kubeconfigOf(t, ""))
	t.Log("\n" + out)
	hasLine(t, out, `^SNAPSHOTS \(0\)$`)
	hasLine(t, out, `^SECRETS \(0\)$`)
	hasLine(t, out, `^VERDICT ON THE HISTORY: NoInventory: no Secret in kube-system carries eno.azure.io/inventory-lineage=`+lineage+`$`)

	r := inspectJSON(t, "--lineage", lineage, "--remote-kubeconfig", kubeconfigOf(t, ""))
	assert.Equal(t, "NoInventory", r.Verdict.Outcome)
	assert.Empty(t, r.Snapshots)
	assert.Nil(t, r.DryRun)
}

func TestInspectCompositionWithALineageOverride(t *testing.T) {
	c := testEnv.AdminClients(t)
	r := recreatedComposition(t, c, uniqueLineage("insp-override"))
	admin := kubeconfigOf(t, "")

	out := inspectOK(t, "--composition", r.ns+"/web", "--kubeconfig", admin)
	t.Log("\n" + out)
	r.assertRecoveredTable(t, out)
	// The default lineage of <ns>/web holds nothing; the override is what was read.
	assert.NotContains(t, out, domain.DefaultLineage(r.ns, "web").String())

	// A stricter guard holds the same two deletions for review and lists them all.
	out = inspectOK(t, "--composition", r.ns+"/web", "--kubeconfig", admin, "--max-tombstone-fraction", "0.3")
	t.Log("\n" + out)
	hasLine(t, out, `^\s+decision\s+HeldForReview \(OverDeletionGuard\)$`)
	hasLine(t, out, `^\s+message\s+2 of 5 resources would be deleted, over the guard of 0.3; set eno.azure.io/tombstone-recovery-review to approve:`+r.nowUUID)
	hasLine(t, out, `^HELD FOR REVIEW \(2\)$`)
	hasLine(t, out, `^ConfigMap\s+v1\s+team-a\s+web-feature-flags$`)
	assert.NotContains(t, out, "TOMBSTONES (")

	r.assertUntouched(t, c)
}

// Two Compositions share a lineage override and west was recreated: its own predecessor is the
// candidate, not east's newer snapshot (design §5 step 3). While east lives the dry run refuses
// the lineage (design §6, SharedLineage); east reads its own incarnation's snapshot. Once east is
// gone, an orphan already gone downstream is dropped, not tombstoned (design §6.3).
func TestInspectShowsTheCandidatesAndTheDroppedTombstones(t *testing.T) {
	c := testEnv.AdminClients(t)
	ctx := testCtx(t)
	admin := kubeconfigOf(t, "")
	ns, lineage := c.NewNamespace(t, "inspect"), uniqueLineage("insp-siblings")
	l, _ := domain.NewLineage(lineage)
	shared := map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationLineageOverride: lineage}
	const westOld, westNow, eastNow = "aaaaaaaa-0000-4000-8000-0000000000a1", "aaaaaaaa-0000-4000-8000-0000000000a2", "eeeeeeee-0000-4000-8000-0000000000e1"
	synthesize := func(name, uuid string, entries []domain.Entry) string {
		slice := domain.ResourceSlice{Namespace: ns, Name: name + "-" + uuid[:8], SynthesisUUID: uuid}
		for _, e := range entries {
			slice.Resources = append(slice.Resources, domain.SliceResource{Manifest: manifestOf(t, e)})
		}
		_, err := kubetest.CreateSlice(ctx, c.Dynamic, slice)
		require.NoError(t, err)
		created, err := kubetest.CreateComposition(ctx, c.Dynamic, domain.Composition{Namespace: ns, Name: name, Annotations: shared,
			Synthesis: &domain.Synthesis{UUID: uuid, Synthesized: time.Now().Add(-time.Minute), Ready: true, Slices: []string{slice.Name}}})
		require.NoError(t, err)
		return string(created.GetUID())
	}
	eastEntries := []domain.Entry{{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "east-settings"}}
	eastUID := synthesize("east", eastNow, eastEntries)
	gone := domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "web-gone"}
	deployOrphans(t, c)
	base := time.Now().UTC().Truncate(time.Second)
	storeSnapshot(t, c, domain.SnapshotMeta{Lineage: l, CompositionNamespace: ns, CompositionName: "west", CompositionUID: "0ld0ld00-0000-4000-8000-000000000000",
		SynthesisUUID: westOld, SynthesisTime: base.Add(-time.Hour)}, append(append(webEntries(), orphans()...), gone), domain.DefaultMaxChunkBytes)
	storeSnapshot(t, c, domain.SnapshotMeta{Lineage: l, CompositionNamespace: ns, CompositionName: "east", CompositionUID: eastUID,
		SynthesisUUID: eastNow, SynthesisTime: base.Add(-30 * time.Minute)}, eastEntries, domain.DefaultMaxChunkBytes)
	synthesize("west", westNow, webEntries())

	out := inspectOK(t, "--composition", ns+"/west", "--kubeconfig", admin)
	t.Log("\n" + out)
	hasLine(t, out, `^`+eastNow+`\s.*\s`+ns+`/east\s.*\sok\s+complete, not-candidate$`)
	hasLine(t, out, `^`+westOld+`\s.*\s`+ns+`/west\s.*\sok\s+complete, selected$`)
	hasLine(t, out, `^VERDICT ON THE HISTORY: snapshot `+westOld+` selected: .*, 6 entries,`)
	hasLine(t, out, `^\s+candidate snapshots\s+1 recorded for `+ns+`/west: `+westOld+`$`)
	hasLine(t, out, `^\s+decision\s+InventoryInvalid \(SharedLineage\)$`)
	hasLine(t, out, `^\s+message\s+the lineage's history is shared with composition `+ns+`/east \(exists\): .*give each Composition its own lineage`)
	hasLine(t, out, `^TOMBSTONES \(0\)$`)

	out = inspectOK(t, "--composition", ns+"/east", "--kubeconfig", admin)
	t.Log("\n" + out)
	hasLine(t, out, `^`+eastNow+`\s.*\sok\s+complete, same-incarnation$`)
	hasLine(t, out, `^`+westOld+`\s.*\sok\s+complete, not-candidate$`)
	hasLine(t, out, `^VERDICT ON THE HISTORY: NothingToRecover \(SameIncarnation\): snapshot `+eastNow+` carries this composition's UID`)
	hasLine(t, out, `^\s+decision\s+NothingToRecover \(SameIncarnation\)$`)
	assert.NotContains(t, out, "DROPPED")

	// east is gone: its snapshot is a predecessor's, and west recovers from its own.
	require.NoError(t, c.Dynamic.Resource(k8s.CompositionGVR).Namespace(ns).Delete(ctx, "east", metav1.DeleteOptions{}))
	out = inspectOK(t, "--composition", ns+"/west", "--kubeconfig", admin)
	t.Log("\n" + out)
	hasLine(t, out, `^\s+decision\s+Recovered$`)
	hasLine(t, out, `^\s+message\s+2 of 6 resources .*; dropped 1: 1 NotFound \(first ConfigMap/team-a/web-gone\)$`)
	hasLine(t, out, `^TOMBSTONES \(2\)$`)
	hasLine(t, out, `^DROPPED AFTER READING THE OBJECTS DOWNSTREAM \(1\)$`)
	hasLine(t, out, `^KIND\s+API VERSION\s+NAMESPACE\s+NAME\s+REASON$`)
	hasLine(t, out, `^ConfigMap\s+v1\s+team-a\s+web-gone\s+NotFound$`)

	r := inspectJSON(t, "--composition", ns+"/west", "--kubeconfig", admin)
	require.NotNil(t, r.DryRun)
	assert.Equal(t, &app.CandidatesReport{Own: true, SynthesisUUIDs: []string{westOld}, OtherNamespaces: []string{}}, r.DryRun.Candidates)
	assert.Equal(t, []app.DroppedReport{{TombstoneReport: app.TombstoneReport{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "web-gone",
		Manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web-gone","namespace":"team-a"}}`}, Reason: "NotFound"}}, r.DryRun.Dropped)
	require.Len(t, r.DryRun.Tombstones, 2)

	// The lineage read by no Composition: every snapshot is a candidate, and east's is the newest.
	out = inspectOK(t, "--lineage", lineage, "--remote-kubeconfig", admin)
	hasLine(t, out, `^`+eastNow+`\s.*\sok\s+complete, selected$`)
	hasLine(t, out, `^`+westOld+`\s.*\sok\s+complete, older$`)
}

// design §5 step 3 in inspect: a Composition of another namespace with a copied lineage override
// adopts nothing unless --allow-cross-namespace-lineage is given, and the table says why.
func TestInspectShowsAnotherNamespacesHistory(t *testing.T) {
	c := testEnv.AdminClients(t)
	ctx := testCtx(t)
	admin := kubeconfigOf(t, "")
	home, away, lineage := c.NewNamespace(t, "insp-home"), c.NewNamespace(t, "insp-away"), uniqueLineage("insp-otherns")
	l, _ := domain.NewLineage(lineage)
	const homeOld, awayNow = "bbbbbbbb-0000-4000-8000-0000000000b1", "bbbbbbbb-0000-4000-8000-0000000000b2"
	storeSnapshot(t, c, domain.SnapshotMeta{Lineage: l, CompositionNamespace: home, CompositionName: "web", CompositionUID: "0ld0ld00-0000-4000-8000-000000000001",
		SynthesisUUID: homeOld, SynthesisTime: time.Now().UTC().Truncate(time.Second).Add(-time.Hour)}, webEntries(), domain.DefaultMaxChunkBytes)
	slice := domain.ResourceSlice{Namespace: away, Name: "web-" + awayNow[:8], SynthesisUUID: awayNow}
	_, err := kubetest.CreateSlice(ctx, c.Dynamic, slice)
	require.NoError(t, err)
	_, err = kubetest.CreateComposition(ctx, c.Dynamic, domain.Composition{Namespace: away, Name: "web",
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationLineageOverride: lineage},
		Synthesis:   &domain.Synthesis{UUID: awayNow, Synthesized: time.Now().Add(-time.Minute), Ready: true, Slices: []string{slice.Name}}})
	require.NoError(t, err)

	out := inspectOK(t, "--composition", away+"/web", "--kubeconfig", admin)
	t.Log("\n" + out)
	hasLine(t, out, `^Limits: .*, adoption across namespaces off$`)
	hasLine(t, out, `^`+homeOld+`\s.*\s`+home+`/web\s.*\sok\s+complete, other-namespace$`)
	hasLine(t, out, `^VERDICT ON THE HISTORY: NothingToRecover \(OtherNamespace\): every snapshot of the lineage was recorded in another namespace \(`+home+`\)`)
	hasLine(t, out, `^\s+candidate snapshots\s+none: every snapshot of the lineage is of namespace `+home+`, and adoption across namespaces is off$`)
	hasLine(t, out, `^\s+decision\s+NothingToRecover \(OtherNamespace\)$`)

	out = inspectOK(t, "--composition", away+"/web", "--kubeconfig", admin, "--allow-cross-namespace-lineage")
	t.Log("\n" + out)
	hasLine(t, out, `^Limits: .*, adoption across namespaces on$`)
	hasLine(t, out, `^`+homeOld+`\s.*\sok\s+complete, selected$`)
	hasLine(t, out, `^\s+candidate snapshots\s+none recorded for `+away+`/web, so every snapshot of the lineage, of any namespace \(1\): `+homeOld+`$`)
	// Adopted and judged: none of its objects is downstream, so design §6.3 leaves nothing orphaned.
	hasLine(t, out, `^\s+decision\s+NothingToRecover \(NoOrphans\)$`)
	hasLine(t, out, `^\s+from snapshot\s+`+homeOld+` `)
}

func TestInspectJSONIsAStableDocument(t *testing.T) {
	c := testEnv.AdminClients(t)
	r := recreatedComposition(t, c, uniqueLineage("insp-json"))
	admin := kubeconfigOf(t, "")

	raw := inspectOK(t, "--composition", r.ns+"/web", "--kubeconfig", admin, "-o", "json")
	t.Log("\n" + raw)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &doc), raw)
	for _, key := range []string{"lineage", "inventoryNamespace", "inspectedAt", "limits", "composition", "snapshots", "rejectedSecrets", "verdict", "dryRun"} {
		assert.Contains(t, doc, key)
	}
	assert.Equal(t, []any{}, doc["rejectedSecrets"], "empty lists are [] for scripts, not null")
	verdict := doc["verdict"].(map[string]any)
	assert.Equal(t, "Selected", verdict["outcome"])
	assert.Equal(t, r.sourceUUID, verdict["synthesisUUID"])

	rep := inspectJSON(t, "--composition", r.ns+"/web", "--kubeconfig", admin)
	assert.Equal(t, r.lineage, rep.Lineage)
	require.NotNil(t, rep.Composition)
	assert.Equal(t, app.CompositionReport{Namespace: r.ns, Name: "web", UID: r.compUID, SynthesisUUID: r.nowUUID, LineageSource: "override"}, *rep.Composition)
	require.Len(t, rep.Snapshots, 1)
	s := rep.Snapshots[0]
	assert.Equal(t, "selected", s.Role)
	assert.Equal(t, domain.DigestOK.String(), s.Digest.Check)
	assert.Equal(t, s.Digest.Claimed, s.Digest.Computed)
	assert.Equal(t, 5, s.Entries)
	assert.Equal(t, []app.ChunkReport{{Secret: "web-" + r.lineage + "-0", Index: 0, Bytes: s.TotalBytes}}, s.Chunks)
	require.NotNil(t, rep.DryRun)
	require.NotNil(t, rep.DryRun.Decision)
	assert.True(t, rep.DryRun.WouldRun)
	assert.Equal(t, domain.OutcomeRecovered, rep.DryRun.Decision.Outcome)
	assert.Equal(t, 2, rep.DryRun.Decision.Tombstones)
	assert.Equal(t, r.sourceUUID, rep.DryRun.Decision.SourceSynthesisUUID)
	require.Len(t, rep.DryRun.Tombstones, 2)
	assert.Equal(t, app.TombstoneReport{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "web-feature-flags",
		Manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web-feature-flags","namespace":"team-a","labels":{"app":"web"}}}`},
		rep.DryRun.Tombstones[0])
	assert.Equal(t, "CronJob", rep.DryRun.Tombstones[1].Kind)
	assert.Empty(t, rep.DryRun.HeldForReview)

	// --lineage with the control plane dry-runs the Composition the snapshot names.
	byLineage := inspectJSON(t, "--lineage", r.lineage, "--kubeconfig", admin)
	require.NotNil(t, byLineage.DryRun)
	assert.Equal(t, r.ns+"/web", byLineage.DryRun.Composition)
	require.NotNil(t, byLineage.DryRun.Decision)
	assert.Equal(t, domain.OutcomeRecovered, byLineage.DryRun.Decision.Outcome)
	assert.Nil(t, byLineage.Composition)

	r.assertUntouched(t, c)
}

func TestInspectReportsWhyRecoveryWouldNotRun(t *testing.T) {
	c := testEnv.AdminClients(t)
	r := recreatedComposition(t, c, uniqueLineage("insp-decided"))
	ctx := testCtx(t)
	compositions := c.Dynamic.Resource(k8s.CompositionGVR).Namespace(r.ns)
	comp, err := compositions.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	decided := domain.Decision{SynthesisUUID: r.nowUUID, Outcome: domain.OutcomeRecovered, Tombstones: 2,
		TombstoneSlice: "web-recovery-22222222", DecidedAt: time.Now().UTC().Truncate(time.Second)}
	ann := comp.GetAnnotations()
	ann[domain.AnnotationDecision] = decided.Encode()
	comp.SetAnnotations(ann)
	_, err = compositions.Update(ctx, comp, metav1.UpdateOptions{})
	require.NoError(t, err)

	out := inspectOK(t, "--composition", r.ns+"/web", "--kubeconfig", kubeconfigOf(t, ""))
	t.Log("\n" + out)
	hasLine(t, out, `^\s+recovery runs now\s+no \(SynthesisDecided\); the plan below is what it would decide$`)
	hasLine(t, out, `^\s+recorded decision\s+Recovered for synthesis `+r.nowUUID+`, 2 tombstones in ResourceSlice web-recovery-22222222$`)

	// A Composition not synthesized yet: recovery would not run and there is nothing to plan.
	fresh := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eno.azure.io/v1", "kind": "Composition",
		"metadata": map[string]any{"name": "fresh", "namespace": r.ns, "annotations": map[string]any{domain.AnnotationOptIn: domain.OptInValue}},
	}}
	_, err = compositions.Create(ctx, fresh, metav1.CreateOptions{})
	require.NoError(t, err)
	// Unsynthesized, it would hold every other test's hand-off (design §6.3, first syntheses).
	t.Cleanup(func() { assert.NoError(t, compositions.Delete(context.Background(), "fresh", metav1.DeleteOptions{})) })
	out = inspectOK(t, "--composition", r.ns+"/fresh", "--kubeconfig", kubeconfigOf(t, ""))
	hasLine(t, out, `^Lineage `+domain.DefaultLineage(r.ns, "fresh").String()+` in namespace kube-system`)
	hasLine(t, out, `\(lineage from default: sha256 of "`+r.ns+`/fresh"\)$`)
	hasLine(t, out, `^VERDICT ON THE HISTORY: NoInventory`)
	hasLine(t, out, `^\s+current synthesis\s+-$`)
	hasLine(t, out, `^\s+recovery runs now\s+no \(NotSynthesized\)`)
	hasLine(t, out, `^\s+decision\s+none: the composition has no current synthesis yet$`)
}

func TestInspectCompositionErrors(t *testing.T) {
	c := testEnv.AdminClients(t)
	admin := kubeconfigOf(t, "")
	ns := c.NewNamespace(t, "inspect")

	var out, errOut bytes.Buffer
	err := dispatch(testCtx(t), []string{"inspect", "--composition", ns + "/gone", "--kubeconfig", admin}, &out, &errOut)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "composition "+ns+"/gone does not exist")
	assert.Contains(t, err.Error(), "--lineage")
	assert.Contains(t, err.Error(), domain.DefaultLineage(ns, "gone").String())

	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eno.azure.io/v1", "kind": "Composition",
		"metadata": map[string]any{"name": "bad", "namespace": ns, "annotations": map[string]any{domain.AnnotationLineageOverride: "Not_A_Label"}},
	}}
	_, err = c.Dynamic.Resource(k8s.CompositionGVR).Namespace(ns).Create(testCtx(t), bad, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, c.Dynamic.Resource(k8s.CompositionGVR).Namespace(ns).Delete(context.Background(), "bad", metav1.DeleteOptions{}))
	})
	err = dispatch(testCtx(t), []string{"inspect", "--composition", ns + "/bad", "--kubeconfig", admin}, &out, &errOut)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `lineage override "Not_A_Label" is invalid`)
	assert.Contains(t, err.Error(), "recording and recovery skip it")
	assert.Empty(t, out.String())
}

// TestInspectRunsAsAReadOnlyUser proves inspect needs no write permission: a user bound only to
// get/list/watch gets the full report, dry run included.
func TestInspectRunsAsAReadOnlyUser(t *testing.T) {
	c := testEnv.AdminClients(t)
	ctx := testCtx(t)
	r := recreatedComposition(t, c, uniqueLineage("insp-rbac"))
	readVerbs := []string{"get", "list", "watch"}
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: inspectReader}}
	clusterRole, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "inspect-reader-"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"eno.azure.io"}, Resources: []string{"compositions", "resourceslices"}, Verbs: readVerbs},
			// The dry run reads each tombstone's object downstream (design §6.3).
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: readVerbs},
			{APIGroups: []string{"batch"}, Resources: []string{"cronjobs"}, Verbs: readVerbs},
			// Its UID names the control plane's history (design §3).
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{"kube-system"}, Verbs: []string{"get"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "inspect-reader-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole.Name},
		Subjects:   subject,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	role, err := c.Kube.RbacV1().Roles("kube-system").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "inspect-reader-"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: readVerbs}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Kube.RbacV1().RoleBindings("kube-system").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "inspect-reader-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   subject,
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	reader, err := kubernetes.NewForConfig(testEnv.UserConfig(inspectReader))
	require.NoError(t, err)
	// The authorizer learns of new bindings through its cache: wait until the grant is visible.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := reader.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			break
		}
		require.True(t, apierrors.IsForbidden(err), "listing as %s: %v", inspectReader, err)
		require.True(t, time.Now().Before(deadline), "the read-only grant never took effect: %v", err)
		time.Sleep(100 * time.Millisecond)
	}
	// The user really cannot write: a create of a Secret and an update of the Composition are refused.
	_, err = reader.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "insp-rbac-probe"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "the reader can create secrets: %v", err)
	readerDyn, err := dynamic.NewForConfig(testEnv.UserConfig(inspectReader))
	require.NoError(t, err)
	comp, err := readerDyn.Resource(k8s.CompositionGVR).Namespace(r.ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = readerDyn.Resource(k8s.CompositionGVR).Namespace(r.ns).Update(ctx, comp, metav1.UpdateOptions{})
	require.True(t, apierrors.IsForbidden(err), "the reader can update compositions: %v", err)

	out := inspectOK(t, "--composition", r.ns+"/web", "--kubeconfig", kubeconfigOf(t, inspectReader))
	t.Log("\n" + out)
	r.assertRecoveredTable(t, out)
	// The fleet view needs nothing more: it lists Compositions and reads each as above.
	out = inspectOK(t, "--all", "--composition-namespace", r.ns, "--kubeconfig", kubeconfigOf(t, inspectReader))
	hasLine(t, out, `^`+r.ns+`/web\s+`+r.lineage+`\s+-\s+`)
	r.assertUntouched(t, c)
}

// The fleet view over the API server: one row per Composition in scope, as a stable document.
func TestInspectAllOnTheAPIServer(t *testing.T) {
	c := testEnv.AdminClients(t)
	r := recreatedComposition(t, c, uniqueLineage("insp-all"))
	_, err := kubetest.CreateComposition(testCtx(t), c.Dynamic, domain.Composition{Namespace: r.ns, Name: "sharded", Labels: map[string]string{"shard": "b"}})
	require.NoError(t, err)
	admin := kubeconfigOf(t, "")

	raw := inspectOK(t, "--all", "--composition-namespace", r.ns, "--composition-label-selector", "shard!=b", "--kubeconfig", admin, "-o", "json")
	var fleet app.FleetReport
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&fleet), raw)
	require.Len(t, fleet.Rows, 1, "only %s/web is in scope: %s", r.ns, raw)
	row := fleet.Rows[0]
	assert.Equal(t, app.FleetRow{Namespace: r.ns, Name: "web", Lineage: r.lineage, Attention: []string{}}, row,
		"no decision yet, nothing carried, and the only snapshot is the old incarnation's")

	out := inspectOK(t, "--all", "--composition-namespace", r.ns, "--kubeconfig", admin)
	hasLine(t, out, `^NEEDS A PERSON \(0\)$`)
	hasLine(t, out, `^THE REST \(2\)$`)
	hasLine(t, out, `^`+r.ns+`/sharded\s+`)
	r.assertUntouched(t, c)
}

// requestLog records every request inspect sends, through rest.Config.Wrap.
type requestLog struct {
	mu   sync.Mutex
	reqs []*http.Request
}

type loggingTransport struct {
	log  *requestLog
	next http.RoundTripper
}

func (l loggingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	l.log.mu.Lock()
	l.log.reqs = append(l.log.reqs, req.Clone(req.Context()))
	l.log.mu.Unlock()
	return l.next.RoundTrip(req)
}

func TestInspectSendsOnlyReads(t *testing.T) {
	c := testEnv.AdminClients(t)
	r := recreatedComposition(t, c, uniqueLineage("insp-verbs"))
	admin := kubeconfigOf(t, "")
	log := &requestLog{}
	in := inspector{now: time.Now, wrap: func(rt http.RoundTripper) http.RoundTripper { return loggingTransport{log: log, next: rt} }}

	// Admin credentials: any write inspect attempted would succeed, so only the log can catch it.
	for _, args := range [][]string{
		{"--composition", r.ns + "/web", "--kubeconfig", admin},
		{"--composition", r.ns + "/web", "--kubeconfig", admin, "--remote-kubeconfig", admin, "-o", "json"},
		{"--lineage", r.lineage, "--kubeconfig", admin},
		{"--lineage", r.lineage, "--remote-kubeconfig", admin},
		{"--all", "--composition-namespace", r.ns, "--kubeconfig", admin, "-o", "json"},
	} {
		var out, errOut bytes.Buffer
		require.NoError(t, in.run(testCtx(t), args, &out, &errOut), "%v: %s", args, errOut.String())
	}

	log.mu.Lock()
	defer log.mu.Unlock()
	seen := map[string]bool{}
	for _, req := range log.reqs {
		call := req.Method + " " + req.URL.Path
		assert.Equal(t, http.MethodGet, req.Method, "inspect sent %s", call)
		// The fleet index (design §6.3) watches every slice and Composition while inspect runs;
		// nothing else does.
		fleet := req.URL.Path == "/apis/eno.azure.io/v1/resourceslices" || req.URL.Path == "/apis/eno.azure.io/v1/compositions"
		assert.False(t, req.URL.Query().Get("watch") == "true" && !fleet, "inspect watched: %s", req.URL)
		seen[call] = true
	}
	for _, want := range []string{
		"GET /version",
		"GET /api/v1/namespaces/kube-system/secrets",
		"GET /apis/eno.azure.io/v1/namespaces/" + r.ns + "/compositions/web",
		"GET /apis/eno.azure.io/v1/compositions",
		"GET /apis/eno.azure.io/v1/namespaces/" + r.ns + "/resourceslices/" + r.sliceName,
	} {
		assert.True(t, seen[want], "inspect never sent %s; it sent %v", want, seen)
	}
	r.assertUntouched(t, c)
}

func TestInspectRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "pass --composition NAMESPACE/NAME, --lineage L or --all"},
		{[]string{"--composition", "a/b", "--lineage", "x"}, "pass one of --composition, --lineage and --all"},
		{[]string{"--all", "--lineage", "x"}, "pass one of --composition, --lineage and --all"},
		{[]string{"--all", "--composition", "a/b"}, "pass one of --composition, --lineage and --all"},
		{[]string{"--lineage", "x", "--composition-namespace", "a"}, "--composition-namespace and --composition-label-selector go with --all"},
		{[]string{"--all", "--composition-label-selector", "a in ("}, "--composition-label-selector: parsing label selector"},
		{[]string{"--all", "--handoff-pending-long", "0s"}, "--handoff-pending-long must be positive, got 0s"},
		{[]string{"--composition", "web"}, `--composition: composition "web" must be NAMESPACE/NAME`},
		{[]string{"--composition", "a/b/c"}, "must be NAMESPACE/NAME"},
		{[]string{"--lineage", "Bad_Lineage"}, `--lineage: lineage override "Bad_Lineage" is invalid`},
		{[]string{"--lineage", "x", "-o", "yaml"}, `-o must be table or json, got "yaml"`},
		{[]string{"--lineage", "x", "--max-chunk-bytes", "0"}, "--max-chunk-bytes must be between 2 and 1048576, got 0"},
		{[]string{"--lineage", "x", "--max-chunk-bytes", "2000000"}, "--max-chunk-bytes must be between 2 and 1048576"},
		{[]string{"--lineage", "x", "--max-chunks", "0"}, "--max-chunks must be at least 1"},
		{[]string{"--lineage", "x", "--max-tombstone-fraction", "1.5"}, "--max-tombstone-fraction must be between 0 and 1"},
		{[]string{"--lineage", "x", "--max-tombstone-fraction", "NaN"}, "--max-tombstone-fraction must be between 0 and 1"},
		{[]string{"--lineage", "x", "--inventory-namespace", ""}, "--inventory-namespace must not be empty"},
		{[]string{"--lineage", "x", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"--no-such-flag"}, "inspect: flag provided but not defined: -no-such-flag"},
	} {
		var out, errOut bytes.Buffer
		err := dispatch(context.Background(), append([]string{"inspect"}, tc.args...), &out, &errOut)
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error(), tc.want, "%v", tc.args)
		assert.Empty(t, out.String(), "%v printed a report", tc.args)
	}

	var out, errOut bytes.Buffer
	require.Error(t, dispatch(context.Background(), []string{"inspect", "--no-such-flag"}, &out, &errOut))
	assert.Empty(t, errOut.String(), "a flag error is one line from main, not a usage dump")
	require.NoError(t, dispatch(context.Background(), []string{"inspect", "-h"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "usage: tombstone-recovery inspect (--composition NAMESPACE/NAME | --lineage L | --all)")
	assert.Contains(t, errOut.String(), "-remote-kubeconfig")
}

func TestInspectReportsAnUnreachableCluster(t *testing.T) {
	path := t.TempDir() + "/unreachable.kubeconfig"
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	var out, errOut bytes.Buffer
	err := dispatch(testCtx(t), []string{"inspect", "--lineage", "x", "--remote-kubeconfig", path}, &out, &errOut)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the downstream cluster is unreachable")
	assert.NotContains(t, oneLine(err), "\n")
}

func TestInspectSizes(t *testing.T) {
	assert.Equal(t, "206 B", sizeOf(206))
	assert.Equal(t, "1023 B", sizeOf(1023))
	assert.Equal(t, "3.5 KiB", sizeOf(3584))
	assert.Equal(t, "812 KiB", sizeOf(812*1024))
	assert.Equal(t, "1024 KiB", sizeOf(domain.DefaultMaxChunkBytes))
	assert.Equal(t, "a b c  d", clean("a\tb\nc\x1b\u0085d"))
}

func itoa(n int) string { return strconv.Itoa(n) }

// --entries lists what the selected snapshot recorded, in the table and in JSON; without it
// the JSON has no recordedEntries.
func TestInspectEntries(t *testing.T) {
	c := testEnv.AdminClients(t)
	lineage := uniqueLineage("insp-entries")
	l, _ := domain.NewLineage(lineage)
	storeSnapshot(t, c, domain.SnapshotMeta{Lineage: l, CompositionNamespace: "team-a", CompositionName: "web",
		CompositionUID: "uid-1", SynthesisUUID: "aaaaaaaa-0000-4000-8000-00000000000b", SynthesisTime: time.Now().Add(-time.Hour).UTC().Truncate(time.Second)},
		webEntries(), 300)
	ds := kubeconfigOf(t, "")

	out := inspectOK(t, "--lineage", lineage, "--remote-kubeconfig", ds, "--entries")
	hasLine(t, out, `^RECORDED ENTRIES \(3\)$`)
	hasLine(t, out, `^ConfigMap\s+v1\s+team-a\s+web-settings$`)
	hasLine(t, out, `^Deployment\s+apps/v1\s+team-a\s+web$`)
	hasLine(t, out, `^ClusterRole\s+rbac.authorization.k8s.io/v1\s+-\s+web-reader$`)

	rep := inspectJSON(t, "--lineage", lineage, "--remote-kubeconfig", ds, "--entries")
	assert.Equal(t, webEntries(), rep.Verdict.RecordedEntries)
	assert.Nil(t, inspectJSON(t, "--lineage", lineage, "--remote-kubeconfig", ds).Verdict.RecordedEntries)
	assert.NotContains(t, inspectOK(t, "--lineage", lineage, "--remote-kubeconfig", ds), "RECORDED ENTRIES")

	var o, e bytes.Buffer
	require.EqualError(t, dispatch(testCtx(t), []string{"inspect", "--all", "--entries"}, &o, &e), "inspect: --entries goes with --composition or --lineage")
}

// Two control planes share this downstream kube-system (design §3): inspect, like recovery,
// reads only the history of the control plane it is given (named by its kube-system UID). A
// snapshot another control plane recorded for the same namespace/name refuses the lineage, as
// that one's Composition cannot be read from here.
func TestInspectReadsOnlyItsControlPlanesHistory(t *testing.T) {
	c := testEnv.AdminClients(t)
	ctx := testCtx(t)
	r := recreatedComposition(t, c, uniqueLineage("insp-cp"))
	admin := kubeconfigOf(t, "")
	l, err := domain.NewLineage(r.lineage)
	require.NoError(t, err)
	theirs := domain.SnapshotMeta{Lineage: l, CompositionNamespace: r.ns, CompositionName: "web", CompositionUID: "0ther000-0000-4000-8000-000000000000",
		SynthesisUUID: "22222222-0000-4000-8000-000000000002", SynthesisTime: r.sourceTime.Add(time.Minute), ControlPlane: "cp-other"}
	inv, err := domain.NewInventory(webEntries())
	require.NoError(t, err)
	theirs.Digest, theirs.ChunkCount = inv.Digest(), 1
	chunks, err := domain.SplitInventory(inv, domain.DefaultMaxChunkBytes, 0)
	require.NoError(t, err)
	cs := domain.DesiredChunkSecret(domain.DefaultInventoryNamespace, theirs, chunks[0])
	putSecret(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cs.Namespace, Name: cs.Name + "-b", Labels: cs.Labels, Annotations: cs.Annotations},
		Type: corev1.SecretType(cs.Type), Data: cs.Data})

	rep := inspectJSON(t, "--composition", r.ns+"/web", "--kubeconfig", admin)
	assert.Equal(t, domain.OutcomeInventoryInvalid.String(), rep.Verdict.Outcome, "a Secret naming no control plane beside another's")
	assert.Equal(t, domain.ReasonSharedLineage.String(), rep.Verdict.Reason)
	require.NotNil(t, rep.DryRun.Decision)
	assert.Equal(t, domain.ReasonSharedLineage.String(), rep.DryRun.Decision.Reason)
	assert.Empty(t, rep.DryRun.Tombstones)

	// Stamped as this control plane's (what its next recording does), the history is its own.
	ks, err := c.Kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	require.NoError(t, err)
	own, err := c.Kube.CoreV1().Secrets(domain.DefaultInventoryNamespace).Get(ctx, "web-"+r.lineage+"-0", metav1.GetOptions{})
	require.NoError(t, err)
	own.Annotations[domain.AnnotationControlPlane] = string(ks.UID)
	_, err = c.Kube.CoreV1().Secrets(domain.DefaultInventoryNamespace).Update(ctx, own, metav1.UpdateOptions{})
	require.NoError(t, err)
	// Another control plane records this lineage too: its Composition cannot be read from here,
	// so the lineage stays refused; only this control plane's snapshot is shown.
	rep = inspectJSON(t, "--composition", r.ns+"/web", "--kubeconfig", admin)
	assert.Equal(t, domain.ReasonSharedLineage.String(), rep.Verdict.Reason)
	require.Len(t, rep.Snapshots, 1)
	assert.Equal(t, string(ks.UID), rep.Snapshots[0].ControlPlane)
	assert.Empty(t, rep.DryRun.Tombstones)

	// Given the other control plane's name, the roles swap.
	rep = inspectJSON(t, "--composition", r.ns+"/web", "--kubeconfig", admin, "--control-plane-id", "cp-other")
	assert.Equal(t, domain.ReasonSharedLineage.String(), rep.Verdict.Reason)
	require.Len(t, rep.Snapshots, 1)
	assert.Equal(t, theirs.SynthesisUUID, rep.Snapshots[0].SynthesisUUID)
}
