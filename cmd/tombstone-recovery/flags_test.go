package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// TestClusterFlagsAreCheckedAlikeByRunAndInspect: a bad shared flag is refused by both commands
// with the same one-line message, before any cluster is contacted (no kubeconfig is given).
func TestClusterFlagsAreCheckedAlikeByRunAndInspect(t *testing.T) {
	for _, tc := range []struct {
		flag string
		want string
	}{
		{"--inventory-namespace=", "--inventory-namespace must not be empty"},
		{"--max-chunk-bytes=1", "--max-chunk-bytes must be between 2 and 1048576, got 1"},
		{"--max-chunk-bytes=1048577", "--max-chunk-bytes must be between 2 and 1048576, got 1048577"},
		{"--max-chunks=0", "--max-chunks must be at least 1, got 0"},
		{"--max-tombstone-fraction=-0.1", "--max-tombstone-fraction must be between 0 and 1, got -0.1"},
		{"--max-tombstone-fraction=NaN", "--max-tombstone-fraction must be between 0 and 1, got NaN"},
	} {
		for cmd, args := range map[string][]string{
			"run":     {"run", tc.flag},
			"inspect": {"inspect", "--lineage", "x", tc.flag},
		} {
			var out, errOut bytes.Buffer
			err := dispatch(context.Background(), args, &out, &errOut)
			require.Error(t, err, "%v", args)
			assert.Equal(t, cmd+": "+tc.want, err.Error(), "%v", args)
		}
	}
}

func TestClusterFlagsKeepTheirDefaults(t *testing.T) {
	run, err := parseRunFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	inspect, err := parseInspectFlags([]string{"--lineage", "x"}, &bytes.Buffer{})
	require.NoError(t, err)
	want := clusterFlags{inventoryNamespace: "kube-system", maxChunkBytes: 1048576, maxChunks: 64, maxTombstoneFraction: 0.5}
	assert.Equal(t, want, run.clusterFlags)
	assert.Equal(t, want, inspect.clusterFlags)
}

// --max-tombstone-fraction=0, "review every recovery" for a first rollout (design §6.1), is
// accepted by run and inspect and reaches the use cases' configuration as 0, not the default.
func TestMaxTombstoneFractionZeroIsASetting(t *testing.T) {
	run, err := parseRunFlags([]string{"--max-tombstone-fraction=0"}, &bytes.Buffer{})
	require.NoError(t, err)
	inspect, err := parseInspectFlags([]string{"--lineage", "x", "--max-tombstone-fraction=0"}, &bytes.Buffer{})
	require.NoError(t, err)
	for _, f := range []clusterFlags{run.clusterFlags, inspect.clusterFlags} {
		require.NoError(t, f.check())
		cfg := app.DefaultConfig()
		f.configure(&cfg)
		assert.Equal(t, 0.0, cfg.MaxTombstoneFraction)
		require.NoError(t, cfg.Validate())
	}
}

// --allow-cross-namespace-lineage (design §5 step 3, design §9) is off unless given, for run and inspect
// alike, and reaches the use cases' configuration.
func TestAllowCrossNamespaceLineageFlag(t *testing.T) {
	run, err := parseRunFlags([]string{"--allow-cross-namespace-lineage"}, &bytes.Buffer{})
	require.NoError(t, err)
	inspect, err := parseInspectFlags([]string{"--lineage", "x", "--allow-cross-namespace-lineage=true"}, &bytes.Buffer{})
	require.NoError(t, err)
	for _, f := range []clusterFlags{run.clusterFlags, inspect.clusterFlags} {
		assert.True(t, f.allowCrossNamespaceLineage)
		cfg := app.DefaultConfig()
		f.configure(&cfg)
		assert.True(t, cfg.AllowCrossNamespaceLineage)
	}
	run, err = parseRunFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	cfg := app.DefaultConfig()
	run.configure(&cfg)
	assert.False(t, cfg.AllowCrossNamespaceLineage, "off by default")
}

// --eno-field-managers (design §6.3) defaults to Eno v0.2.17's managers, reaches the use cases'
// configuration for run and inspect, and refuses a name a precondition cannot quote.
func TestEnoFieldManagersFlag(t *testing.T) {
	run, err := parseRunFlags([]string{"--eno-field-managers", "eno,my-eno"}, &bytes.Buffer{})
	require.NoError(t, err)
	inspect, err := parseInspectFlags([]string{"--lineage", "x", "--eno-field-managers=eno,my-eno"}, &bytes.Buffer{})
	require.NoError(t, err)
	for _, f := range []clusterFlags{run.clusterFlags, inspect.clusterFlags} {
		cfg := app.DefaultConfig()
		f.configure(&cfg)
		assert.Equal(t, []string{"eno", "my-eno"}, cfg.EnoManagers.Names())
	}
	assert.Equal(t, []string{"eno", "my-eno"}, run.controllerOptions(nil, logr.Discard()).EnoFieldManagers.Names())
	run, err = parseRunFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, domain.DefaultEnoManagers, run.enoFieldManagers.Names())
	_, err = parseRunFlags([]string{"--eno-field-managers", `eno,"x"`}, &bytes.Buffer{})
	require.ErrorContains(t, err, "is not a field manager name")
}

// --pending-recheck-interval defaults to a minute, reaches the controller's options, and a
// value under a second is refused before any cluster is contacted.
func TestPendingRecheckIntervalFlag(t *testing.T) {
	o, err := parseRunFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, app.DefaultPendingRecheckInterval, o.pendingRecheck)
	o, err = parseRunFlags([]string{"--pending-recheck-interval=15s"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 15*time.Second, o.pendingRecheck)
	o, err = parseRunFlags([]string{"--pending-recheck-interval=10ms"}, &bytes.Buffer{})
	if err == nil {
		err = o.validate()
	}
	assert.ErrorContains(t, err, "--pending-recheck-interval must be at least 1s")
}

// --reconcile-timeout defaults to two minutes and must be positive.
func TestReconcileTimeoutFlag(t *testing.T) {
	o, err := parseRunFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, app.DefaultReconcileTimeout, o.reconcileTimeout)
	o, err = parseRunFlags([]string{"--reconcile-timeout=0s"}, &bytes.Buffer{})
	if err == nil {
		err = o.validate()
	}
	assert.ErrorContains(t, err, "--reconcile-timeout must be positive")
}
