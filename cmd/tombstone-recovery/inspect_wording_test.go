package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports/portsfakes"
)

// inspect words three problems as it did before design §5 moved into domain (commit 64967d0
// changed them by accident): a mixed-metadata chunk, an index out of range and a repeated index.
// app words them from the findings; the verdict keeps domain's detail. Secrets go through
// app.Inspector and the rendering as `inspect` runs them, in the table and in the JSON document.
func TestInspectProblemWording(t *testing.T) {
	const uuid = "cccccccc-0000-4000-8000-0000000000c3"
	l, err := domain.NewLineage("wording")
	require.NoError(t, err)
	inv, err := domain.NewInventory(webEntries())
	require.NoError(t, err)
	chunks, err := domain.SplitInventory(inv, 300, 0)
	require.NoError(t, err)
	require.Len(t, chunks, 2)
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	meta := domain.SnapshotMeta{Lineage: l, CompositionNamespace: "team-a", CompositionName: "web", CompositionUID: "uid-a",
		SynthesisUUID: uuid, SynthesisTime: at.Add(-time.Hour), ChunkCount: 2, Digest: inv.Digest()}
	var good []domain.ChunkSecret
	for _, c := range chunks {
		good = append(good, domain.DesiredChunkSecret(domain.DefaultInventoryNamespace, meta, c))
	}
	s0, s1 := good[0].Name, good[1].Name
	// with returns the two chunk Secrets with the second one edited, plus any extra.
	with := func(edit func(*domain.ChunkSecret), extra ...domain.ChunkSecret) []domain.ChunkSecret {
		second := good[1].Clone()
		edit(&second)
		return append([]domain.ChunkSecret{good[0], second}, extra...)
	}
	copyOf := good[1].Clone()
	copyOf.Name += "-copy"

	for _, tc := range []struct {
		name    string
		secrets []domain.ChunkSecret
		problem string
		verdict []string
	}{
		{"mixed metadata", with(func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationChunkCount] = "3" }),
			"secret " + s1 + " disagrees with " + s0 + " on chunk count (2 vs 3)",
			[]string{"VERDICT ON THE HISTORY: InventoryInvalid (MixedMetadata): disagrees with " + s0 + " on chunk count (2 vs 3)", "  secret: " + s1}},
		{"index out of range", with(func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationChunkIndex] = "7" }),
			"secret " + s1 + " has index 7, out of range for 2 chunks",
			[]string{"VERDICT ON THE HISTORY: InventoryInvalid (MissingChunk): index 7 is out of range for 2 chunks", "  secret: " + s1}},
		{"repeated index", with(func(*domain.ChunkSecret) {}, copyOf),
			"secrets " + s1 + " and " + s1 + "-copy both hold index 1",
			[]string{"VERDICT ON THE HISTORY: InventoryInvalid (MissingChunk): index 1 is also held by " + s1, "  secret: " + s1 + "-copy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secrets := &portsfakes.FakeSnapshotLister{}
			secrets.ListChunksReturns(tc.secrets, nil)
			cfg := app.DefaultConfig()
			cfg.Now = func() time.Time { return at }
			in, err := app.NewInspector(cfg, app.InspectDeps{Secrets: secrets, Downstream: &portsfakes.FakeDownstreamReader{}})
			require.NoError(t, err)
			report, err := in.Inspect(context.Background(), app.InspectTarget{Lineage: l})
			require.NoError(t, err)

			var table, doc bytes.Buffer
			require.NoError(t, writeInspectTable(&table, report))
			require.NoError(t, writeInspectJSON(&doc, report))
			lines := strings.Split(table.String(), "\n")
			assert.Contains(t, lines, "  snapshot "+uuid+": "+tc.problem, table.String())
			for _, v := range tc.verdict {
				assert.Contains(t, lines, v, table.String())
			}
			var back app.InspectReport
			require.NoError(t, json.Unmarshal(doc.Bytes(), &back))
			require.Len(t, back.Snapshots, 1)
			assert.Contains(t, back.Snapshots[0].Problems, tc.problem)
		})
	}
}

// `inspect` itself, against the API server, prints the repeated index so in the table and the
// JSON document.
func TestInspectPrintsAProblemInItsOwnWording(t *testing.T) {
	c := testEnv.AdminClients(t)
	lineage := uniqueLineage("insp-wording")
	l, _ := domain.NewLineage(lineage)
	meta := domain.SnapshotMeta{Lineage: l, CompositionNamespace: "team-a", CompositionName: "web", CompositionUID: "uid-a",
		SynthesisUUID: "dddddddd-0000-4000-8000-0000000000d4", SynthesisTime: time.Now().Add(-time.Hour).UTC().Truncate(time.Second)}
	require.Equal(t, 2, storeSnapshot(t, c, meta, webEntries(), 300))
	inv, err := domain.NewInventory(webEntries())
	require.NoError(t, err)
	chunks, err := domain.SplitInventory(inv, 300, 0)
	require.NoError(t, err)
	meta.ChunkCount, meta.Digest, meta.ControlPlane = 2, inv.Digest(), localControlPlane(t, c)
	cs := domain.DesiredChunkSecret(domain.DefaultInventoryNamespace, meta, chunks[1])
	putSecret(t, c, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cs.Namespace, Name: cs.Name + "-copy", Labels: cs.Labels, Annotations: cs.Annotations},
		Type:       corev1.SecretType(cs.Type),
		Data:       cs.Data,
	})
	want := "secrets " + cs.Name + " and " + cs.Name + "-copy both hold index 1"

	args := []string{"--lineage", lineage, "--remote-kubeconfig", kubeconfigOf(t, ""), "--max-chunk-bytes", "300"}
	assert.Contains(t, strings.Split(inspectOK(t, args...), "\n"), "  snapshot "+meta.SynthesisUUID+": "+want)
	r := inspectJSON(t, args...)
	require.Len(t, r.Snapshots, 1)
	assert.Equal(t, []string{want}, r.Snapshots[0].Problems)
}
