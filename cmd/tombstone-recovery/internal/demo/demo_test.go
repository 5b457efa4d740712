package demo

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/demo.golden from the demo's output")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDemoTellsTheWholeStory(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, Run(context.Background(), &out))
	story := out.String()
	for _, want := range []string{
		// Chapter 1: the hand-off to Eno, Eno deleting the orphans, then no recovery twice.
		"recovery decision for team-a/web synthesis 00000004: Recovered",
		"tombstone: ConfigMap/team-a/web-feature-flags",
		"tombstone: CronJob.batch/team-a/web-cleanup",
		"handed to Eno: ResourceSlice team-a/web-recovery-00000004-653252e70b83badb-0, named by status.currentSynthesis.resourceSlices: true (Ready now false)",
		"eno.azure.io/force-resynthesis=00000004 requested",
		"a synthesis decided Recovered is never recorded",
		`ResourceSlice web-00000007-0000-4000-8000-000000000007 (stamped "00000004"): 6 resources, tombstones carried forward: ConfigMap/web-feature-flags, CronJob/web-cleanup`,
		"recovery decision for team-a/web synthesis 00000006: NothingToRecover (AlreadyDecided)",
		"deleted by Eno: ConfigMap/team-a/web-feature-flags, CronJob.batch/team-a/web-cleanup\n",
		"secret kube-system/web-a6d6889313c2-0  synthesis 00000006  chunk 0/2",
		"inventory of lineage a6d6889313c2 unchanged",
		"recovery decision for team-a/web synthesis 00000008: NothingToRecover (SameIncarnation)",
		"deleted by Eno: none",
		// The refusals.
		"recovery decision for team-b/api synthesis 0000000f: InventoryInvalid (MissingChunk)",
		// Siblings: a living sibling's history is refused; once it is gone, each recovers from its
		// own predecessor; another namespace's history is none of a Composition's.
		"recovery decision for shop/checkout-east synthesis 00000013: InventoryInvalid (SharedLineage)",
		"recovery decision for shop/checkout-west synthesis 00000017: Recovered",
		"deleted by Eno: ConfigMap/shop/checkout-west\n",
		"recovery decision for shop/checkout-north synthesis 0000001b: InventoryInvalid (SharedLineage)",
		"recovery decision for shop-eu/checkout synthesis 0000001d: NothingToRecover (OtherNamespace)",
		"recovery decision for team-c/db synthesis 00000022: HeldForReview (OverDeletionGuard)",
		"recovery decision for team-c/db synthesis 00000022: Recovered (Approved)",
		"deleted by Eno: ConfigMap/team-c/db-config, ConfigMap/team-c/db-init, Secret/team-c/db-credentials-ref, Service/team-c/db-headless\n",
	} {
		assert.Contains(t, story, want)
	}
	// Only recoveries delete: the refusals' orphans are all still downstream.
	assert.Contains(t, story, "nothing was handed to Eno: the orphans stay\n     downstream: ConfigMap/team-b/api-a, ConfigMap/team-b/api-b, ConfigMap/team-b/api-c, ConfigMap/team-b/api-d, Service/team-b/api, Service/team-b/api-internal, Deployment.apps/team-b/api\n")
}

// The demo's output is golden: a change to the story shows in review. Run with -update to
// rewrite it.
func TestDemoGolden(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, Run(context.Background(), &out))
	golden := filepath.Join("testdata", "demo.golden")
	if *updateGolden {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, out.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run go test ./cmd/tombstone-recovery/internal/demo -run TestDemoGolden -update")
	assert.Equal(t, string(want), out.String())
}

func TestDemoIsDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	require.NoError(t, Run(context.Background(), &a))
	require.NoError(t, Run(context.Background(), &b))
	assert.Equal(t, a.String(), b.String())
}
