package domain_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Golden values of design §3.1.
const (
	goldenLineage   = "a6d6889313c2"
	goldenChunkName = "web-a6d6889313c2-0"
	goldenCanonical = `[{"version":"v1","kind":"ConfigMap","namespace":"team-a","name":"web-settings","labels":{"app":"web","tier":"frontend"},"annotations":{"eno.azure.io/deletion-group":"2","eno.azure.io/readiness-group":"1"}},{"group":"apps","version":"v1","kind":"Deployment","namespace":"team-a","name":"web","labels":{"app":"web"},"annotations":{"eno.azure.io/deletion-group":"-1"}},{"group":"rbac.authorization.k8s.io","version":"v1","kind":"ClusterRole","name":"web-reader"}]`
	goldenDigest    = "sha256:ad60f577b0e7993930226e46802f03234a8602561918249f1b47b759e672373b"
	// The two chunks of the golden inventory at MaxChunkBytes = 300.
	goldenChunk0 = `[{"version":"v1","kind":"ConfigMap","namespace":"team-a","name":"web-settings","labels":{"app":"web","tier":"frontend"},"annotations":{"eno.azure.io/deletion-group":"2","eno.azure.io/readiness-group":"1"}}]`
	goldenChunk1 = `[{"group":"apps","version":"v1","kind":"Deployment","namespace":"team-a","name":"web","labels":{"app":"web"},"annotations":{"eno.azure.io/deletion-group":"-1"}},{"group":"rbac.authorization.k8s.io","version":"v1","kind":"ClusterRole","name":"web-reader"}]`

	compUID     = "uid-new"
	oldCompUID  = "uid-old"
	synUUID     = "11111111-2222-3333-4444-555555555555"
	oldSynUUID  = "00000000-aaaa-bbbb-cccc-dddddddddddd"
	invNS       = domain.DefaultInventoryNamespace
	goldenSlice = "web-slice-1"
)

var (
	now     = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	synTime = now.Add(-time.Hour)

	cmID     = domain.ResourceID{Kind: "ConfigMap", Namespace: "team-a", Name: "web-settings"}
	deployID = domain.ResourceID{Group: "apps", Kind: "Deployment", Namespace: "team-a", Name: "web"}
	roleID   = domain.ResourceID{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "web-reader"}
)

// goldenEntries are the design §3.1 entries, deliberately out of canonical order.
func goldenEntries() []domain.Entry {
	return []domain.Entry{
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "web-reader"},
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "team-a", Name: "web",
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{domain.AnnotationDeletionGroup: "-1"}},
		{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "web-settings",
			Labels: map[string]string{"tier": "frontend", "app": "web"},
			Annotations: map[string]string{domain.AnnotationReadinessGroup: "1",
				domain.AnnotationDeletionGroup: "2"}},
	}
}

func goldenInventory(t testing.TB) domain.Inventory {
	t.Helper()
	inv, err := domain.NewInventory(goldenEntries())
	require.NoError(t, err)
	return inv
}

// goldenManifests are what the design §3.1 synthesis produced, with the spec, data and foreign
// annotations an inventory must drop.
func goldenManifests() []string {
	return []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web-settings","namespace":"team-a",` +
			`"labels":{"app":"web","tier":"frontend"},"annotations":{"eno.azure.io/readiness-group":"1",` +
			`"eno.azure.io/deletion-group":"2","note":"not recorded"}},"data":{"k":"v"}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"team-a",` +
			`"labels":{"app":"web"},"annotations":{"eno.azure.io/deletion-group":"-1"}},"spec":{"replicas":3}}`,
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"web-reader"},` +
			`"rules":[]}`,
	}
}

func manifest(apiVersion, kind, namespace, name string) string {
	m := map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": namespace}}
	b, _ := json.Marshal(m)
	return string(b)
}

func patchManifest(targetAPIVersion, targetKind, namespace, name string) string {
	m := map[string]any{"apiVersion": "eno.azure.io/v1", "kind": "Patch",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"patch":    map[string]any{"apiVersion": targetAPIVersion, "kind": targetKind, "ops": []any{}}}
	b, _ := json.Marshal(m)
	return string(b)
}

func resources(manifests ...string) []domain.SliceResource {
	out := make([]domain.SliceResource, len(manifests))
	for i, m := range manifests {
		out[i] = domain.SliceResource{Manifest: m}
	}
	return out
}

// composition is an opted-in, synthesized, Ready team-a/web in its new incarnation.
func composition() domain.Composition {
	return domain.Composition{
		Namespace:   "team-a",
		Name:        "web",
		UID:         compUID,
		Labels:      map[string]string{"shard": "a"},
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue},
		Synthesis: &domain.Synthesis{
			UUID: synUUID, Synthesized: synTime, Ready: true, Slices: []string{goldenSlice},
		},
	}
}

// slice is a slice as stock Eno writes it on a first synthesis: spec.synthesisUUID is "" (design §2).
func slice(name string, res ...domain.SliceResource) domain.ResourceSlice {
	return domain.ResourceSlice{Namespace: "team-a", Name: name, Resources: res}
}

func readSynthesis(t testing.TB, manifests ...string) domain.SynthesisContents {
	t.Helper()
	got, err := domain.ReadSynthesis(composition(), []domain.ResourceSlice{slice(goldenSlice, resources(manifests...)...)})
	require.NoError(t, err)
	return got
}

// meta describes the snapshot an earlier incarnation of team-a/web recorded.
func meta(inv domain.Inventory, uid, synthesis string, at time.Time) domain.SnapshotMeta {
	return domain.SnapshotMeta{
		Lineage:              domain.DefaultLineage("team-a", "web"),
		CompositionNamespace: "team-a",
		CompositionName:      "web",
		CompositionUID:       uid,
		SynthesisUUID:        synthesis,
		SynthesisTime:        at,
		Digest:               inv.Digest(),
		ControlPlane:         thisControlPlane,
	}
}

// thisControlPlane wrote the test's history; otherControlPlane shares its downstream cluster.
const thisControlPlane, otherControlPlane = "6b0c1f6e-cp-a", "9d2e7a10-cp-b"

// secretsFor records inv as the chunk Secrets the writer would create.
func secretsFor(t testing.TB, inv domain.Inventory, m domain.SnapshotMeta, maxBytes int) []domain.ChunkSecret {
	t.Helper()
	chunks, err := domain.SplitInventory(inv, maxBytes, domain.DefaultMaxChunks)
	require.NoError(t, err)
	m.ChunkCount = len(chunks)
	out := make([]domain.ChunkSecret, len(chunks))
	for i, c := range chunks {
		out[i] = domain.DesiredChunkSecret(invNS, m, c)
		out[i].DataWrittenAt = historyWritten
	}
	return out
}

// historyWritten is when the API server stored the test snapshots' data (design §6.3).
var historyWritten = time.Date(2025, 6, 1, 11, 0, 0, 0, time.UTC)

// testUID is the UID of every object the tests observe present.
const testUID = "0f1e2d3c-0000-4000-8000-000000000001"

// planObserved plans, and when the plan asks for downstream reads, answers them with every
// object present and older than the history, then plans again: recovery as it runs when the
// downstream cluster holds exactly what the history recorded.
func planObserved(t testing.TB, in domain.RecoveryInput) domain.RecoveryPlan {
	t.Helper()
	p, err := domain.PlanRecovery(in)
	require.NoError(t, err)
	if p.Decided() {
		return p
	}
	require.NotEmpty(t, p.Verify)
	in.Observed = map[domain.ResourceID]domain.Observation{}
	for _, ts := range p.Verify {
		in.Observed[ts.Entry.ID()] = domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-24 * time.Hour), Writes: enoWrote(historyWritten.Add(-24 * time.Hour)), UID: testUID}
	}
	p, err = domain.PlanRecovery(in)
	require.NoError(t, err)
	require.True(t, p.Decided())
	return p
}

// goldenSecrets is the design §3.1 snapshot of the old incarnation in two chunks.
func goldenSecrets(t testing.TB) []domain.ChunkSecret {
	t.Helper()
	inv := goldenInventory(t)
	return secretsFor(t, inv, meta(inv, oldCompUID, oldSynUUID, synTime.Add(-time.Hour)), 300)
}

// entriesN builds n distinct ConfigMap entries.
func entriesN(n int) []domain.Entry {
	out := make([]domain.Entry, n)
	for i := range out {
		out[i] = domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: fmt.Sprintf("cm-%03d", i)}
	}
	return out
}

func mustInventory(t testing.TB, entries []domain.Entry) domain.Inventory {
	t.Helper()
	inv, err := domain.NewInventory(entries)
	require.NoError(t, err)
	return inv
}

func invalidReason(t testing.TB, err error) domain.InvalidReason {
	t.Helper()
	require.Error(t, err)
	r, ok := domain.InvalidReasonOf(err)
	require.Truef(t, ok, "want an *InventoryInvalidError, got %T: %v", err, err)
	return r
}

// enoWrote is the write history of an object Eno last wrote at at.
func enoWrote(at time.Time) []domain.ObjectWrite {
	return []domain.ObjectWrite{{Manager: "eno", Time: at}}
}
