package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

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
	assert.Equal(t, []string{"eno", "my-eno"}, run.controller.EnoManagers.Names())
	run, err = parseRunFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, domain.DefaultEnoManagers, run.enoFieldManagers.Names())
	_, err = parseRunFlags([]string{"--eno-field-managers", `eno,"x"`}, &bytes.Buffer{})
	require.ErrorContains(t, err, "is not a field manager name")
}

// --eno-resource-filter (design §6.3), once per eno-reconciler in use, reaches run and inspect; an
// expression that does not compile is refused; without the flag every resource loads.
func TestEnoResourceFilterFlag(t *testing.T) {
	args := []string{"--eno-resource-filter", `self.kind == "Role"`, "--eno-resource-filter", `self.kind == "Secret"`}
	run, err := parseRunFlags(args, &bytes.Buffer{})
	require.NoError(t, err)
	inspect, err := parseInspectFlags(append([]string{"--lineage", "x"}, args...), &bytes.Buffer{})
	require.NoError(t, err)
	for _, f := range []clusterFlags{run.clusterFlags, inspect.clusterFlags} {
		cfg := app.DefaultConfig()
		f.configure(&cfg)
		require.NotNil(t, cfg.ResourceFilter)
		assert.NoError(t, cfg.ResourceFilter(`{"kind":"Secret","metadata":{"name":"s"}}`, domain.Composition{}))
		assert.Error(t, cfg.ResourceFilter(`{"kind":"ConfigMap","metadata":{"name":"c"}}`, domain.Composition{}))
	}
	require.NotNil(t, run.controller.ResourceFilter, "the controller gets the filters")
	assert.NoError(t, run.controller.ResourceFilter(`{"kind":"Role","metadata":{"name":"r"}}`, domain.Composition{}))
	run, err = parseRunFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Nil(t, run.enoResourceFilters.filter)
	_, err = parseRunFlags([]string{"--eno-resource-filter", `self.kind ==`}, &bytes.Buffer{})
	require.ErrorContains(t, err, `resource filter "self.kind =="`)
}

// --pending-recheck-interval defaults to a minute, reaches the controller's options, and a
// value under a second is refused before any cluster is contacted.
func TestPendingRecheckIntervalFlag(t *testing.T) {
	o, err := parseRunFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, app.DefaultPendingRecheckInterval, o.controller.PendingRecheckInterval)
	o, err = parseRunFlags([]string{"--pending-recheck-interval=15s"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 15*time.Second, o.controller.PendingRecheckInterval)
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
	assert.Equal(t, app.DefaultReconcileTimeout, o.controller.ReconcileTimeout)
	o, err = parseRunFlags([]string{"--reconcile-timeout=0s"}, &bytes.Buffer{})
	if err == nil {
		err = o.validate()
	}
	assert.ErrorContains(t, err, "--reconcile-timeout must be positive")
}

// Names and periods are checked before any cluster is contacted, one line each.
func TestRunRefusesBadNamesAndPeriods(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--resync-period=0"}, "run: --resync-period must be positive, got 0s"},
		{[]string{"run", "--resync-period=-1m"}, "run: --resync-period must be positive, got -1m0s"},
		{[]string{"run", "--composition-namespace=Team_A"}, `run: --composition-namespace "Team_A" is not a valid name: a lowercase RFC 1123 label`},
		{[]string{"run", "--leader-election-namespace=kube system"}, `run: --leader-election-namespace "kube system" is not a valid name`},
		{[]string{"run", "--leader-election-id=Recovery_Lease"}, `run: --leader-election-id "Recovery_Lease" is not a valid name: a lowercase RFC 1123 subdomain`},
		{[]string{"run", "--inventory-namespace=kube.system"}, `run: --inventory-namespace "kube.system" is not a valid name`},
		{[]string{"inspect", "--lineage", "x", "--inventory-namespace=KUBE"}, `inspect: --inventory-namespace "KUBE" is not a valid name`},
		{[]string{"inspect", "--all", "--composition-namespace=a/b"}, `inspect: --composition-namespace "a/b" is not a valid name`},
		{[]string{"approve", "a/b", "--inventory-namespace=-x"}, `approve: --inventory-namespace "-x" is not a valid name`},
	} {
		var out, errOut bytes.Buffer
		err := dispatch(context.Background(), tc.args, &out, &errOut)
		require.Error(t, err, "%v", tc.args)
		assert.True(t, strings.HasPrefix(err.Error(), tc.want), "%v: %v", tc.args, err)
		assert.NotContains(t, err.Error(), "\n")
	}
	o, err := parseRunFlags([]string{"--leader-election-id=recovery.shard-a", "--composition-namespace=team-a"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, "recovery.shard-a", o.leaderElectionID)
}

// A downstream kubeconfig that is not there (its optional Secret not created yet) is named in
// one line, before any cluster is contacted.
func TestRunNamesAMissingDownstreamKubeconfig(t *testing.T) {
	cp := filepath.Join(t.TempDir(), "cp.kubeconfig")
	require.NoError(t, os.WriteFile(cp, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	var out, errOut bytes.Buffer
	err := dispatch(context.Background(), []string{"run", "--kubeconfig", cp, "--remote-kubeconfig", "/etc/eno-tombstone-recovery/downstream/kubeconfig"}, &out, &errOut)
	require.EqualError(t, err, "the downstream kubeconfig /etc/eno-tombstone-recovery/downstream/kubeconfig does not exist: "+
		"create the Secret it is mounted from (README, Install), or drop --remote-kubeconfig for one cluster")
}

// The start-up line carries the build and every effective setting, defaults included.
func TestStartupValues(t *testing.T) {
	o, err := parseRunFlags([]string{"--max-tombstone-fraction=0", "--composition-namespace=team-a", "--resync-period=5m"}, &bytes.Buffer{})
	require.NoError(t, err)
	kv := map[string]any{}
	vals := o.startupValues("lease-a")
	require.Zero(t, len(vals)%2)
	for i := 0; i < len(vals); i += 2 {
		kv[vals[i].(string)] = vals[i+1]
	}
	for k, want := range map[string]any{"maxTombstoneFraction": 0.0, "compositionNamespace": "team-a", "resyncPeriod": "5m0s",
		"inventoryNamespace": "kube-system", "maxChunks": 64, "leaderElectionID": "lease-a", "leaderElectionNamespace": "kube-system",
		"pendingRecheckInterval": "1m0s", "workers": 2, "enabled": true} {
		assert.Equal(t, want, kv[k], k)
	}
	assert.Contains(t, kv, "version")
	assert.Contains(t, kv, "revision")
}

// TestRunSetsItsGCPercentUnlessGOGCIsSet: run's default GOGC, and an operator's GOGC (even
// empty, which the runtime reads as 100) wins; so does an operator's memprofilerate, and
// otherwise run stops the heap profile nothing serves.
func TestRunSetsItsGCPercentUnlessGOGCIsSet(t *testing.T) {
	prev, prevRate := debug.SetGCPercent(100), runtime.MemProfileRate
	t.Cleanup(func() { debug.SetGCPercent(prev); runtime.MemProfileRate = prevRate })
	for _, tc := range []struct {
		name     string
		env      map[string]string
		want     int
		wantRate int
	}{
		{"unset", map[string]string{}, gcPercent, 0},
		{"set", map[string]string{"GOGC": "200"}, 100, 0},
		{"set empty", map[string]string{"GOGC": ""}, 100, 0},
		{"memprofilerate set", map[string]string{"GODEBUG": "madvdontneed=1,memprofilerate=4096"}, gcPercent, 4096},
		{"other GODEBUG", map[string]string{"GODEBUG": "madvdontneed=1"}, gcPercent, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			runtime.MemProfileRate = 4096 // as the runtime leaves it for GODEBUG=memprofilerate=4096
			defaultMemory(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			assert.Equal(t, tc.want, debug.SetGCPercent(100))
			assert.Equal(t, tc.wantRate, runtime.MemProfileRate)
		})
	}
}
