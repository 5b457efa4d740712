package runnable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// What the guest adds runs on the manager's leader only (design §8.2).
var _ manager.LeaderElectionRunnable = guestRunnable{}

func TestResolveDefaults(t *testing.T) {
	s, err := DefaultOptions().resolve()
	require.NoError(t, err)
	assert.False(t, s.Enabled, "the library default is off (design §4)")
	assert.Equal(t, domain.DefaultInventoryNamespace, s.InventoryNamespace)
	assert.Equal(t, domain.DefaultMaxChunkBytes, s.MaxChunkBytes)
	assert.Equal(t, domain.DefaultMaxChunks, s.MaxChunks)
	assert.Equal(t, domain.DefaultMaxTombstoneFraction, s.MaxTombstoneFraction)
	assert.False(t, s.AllowCrossNamespaceLineage, "each namespace's history is its own by default (design §5 step 3)")
	assert.Equal(t, 2, s.Workers)
	assert.Equal(t, 10*time.Minute, s.ResyncPeriod)
	assert.False(t, s.HostElects || s.EveryReplica, "without election the guest refuses to start")
	assert.True(t, s.Scope.Contains(domain.Composition{Namespace: "any", Labels: map[string]string{"a": "b"}}))
}

func TestResolveScope(t *testing.T) {
	sel, err := labels.Parse("shard=a")
	require.NoError(t, err)
	o := DefaultOptions()
	o.Scope.Namespace, o.CompositionSelector = "team-a", sel
	s, err := o.resolve()
	require.NoError(t, err)
	assert.True(t, s.Scope.Contains(domain.Composition{Namespace: "team-a", Labels: map[string]string{"shard": "a"}}))
	assert.False(t, s.Scope.Contains(domain.Composition{Namespace: "team-a", Labels: map[string]string{"shard": "b"}}))
	assert.False(t, s.Scope.Contains(domain.Composition{Namespace: "team-b", Labels: map[string]string{"shard": "a"}}))
}

func TestDefaultLeaseNameFollowsTheShard(t *testing.T) {
	a, err := labels.Parse("shard=a")
	require.NoError(t, err)
	a2, err := labels.Parse("shard = a")
	require.NoError(t, err)
	b, err := labels.Parse("shard=b")
	require.NoError(t, err)

	assert.Equal(t, "eno-tombstone-recovery", DefaultLeaseName("", nil))
	assert.Equal(t, "eno-tombstone-recovery", DefaultLeaseName("", labels.Everything()))
	// Replicas that differ only by --resource-filter parse the same selector: one Lease.
	assert.Equal(t, DefaultLeaseName("", a), DefaultLeaseName("", a2))
	names := map[string]bool{}
	for _, n := range []string{DefaultLeaseName("", a), DefaultLeaseName("", b), DefaultLeaseName("team-a", nil), DefaultLeaseName("team-a", a)} {
		assert.Regexp(t, `^eno-tombstone-recovery-[0-9a-f]{10}$`, n)
		names[n] = true
	}
	assert.Len(t, names, 4, "each shard elects its own leader")
}

// withEnv is DefaultOptions reading vars as its environment.
func withEnv(vars map[string]string) Options {
	o := DefaultOptions()
	o.Getenv = func(k string) string { return vars[k] }
	return o
}

// A first rollout reviews every recovery: ENO_TOMBSTONE_RECOVERY_MAX_TOMBSTONE_FRACTION=0 is a
// setting, not "unset", and wins over the option (design §6.1).
func TestResolveEnvironmentFractionZero(t *testing.T) {
	s, err := withEnv(map[string]string{"ENO_TOMBSTONE_RECOVERY_MAX_TOMBSTONE_FRACTION": "0"}).resolve()
	require.NoError(t, err)
	assert.Equal(t, 0.0, s.MaxTombstoneFraction)
}

func TestResolveEnvironment(t *testing.T) {
	o := withEnv(map[string]string{
		"ENO_TOMBSTONE_RECOVERY_ENABLED":                       "false",
		"ENO_TOMBSTONE_RECOVERY_INVENTORY_NAMESPACE":           "inv",
		"ENO_TOMBSTONE_RECOVERY_MAX_CHUNK_BYTES":               "2048",
		"ENO_TOMBSTONE_RECOVERY_MAX_CHUNKS":                    "7",
		"ENO_TOMBSTONE_RECOVERY_MAX_TOMBSTONE_FRACTION":        "1",
		"ENO_TOMBSTONE_RECOVERY_ALLOW_CROSS_NAMESPACE_LINEAGE": "true",
		"ENO_TOMBSTONE_RECOVERY_PENDING_RECHECK_INTERVAL":      "5s",
		"ENO_TOMBSTONE_RECOVERY_RECONCILE_TIMEOUT":             "7s",
		"ENO_TOMBSTONE_RECOVERY_WORKERS":                       "3",
		"ENO_TOMBSTONE_RECOVERY_IMPERSONATE":                   "system:serviceaccount:ops:recovery",
		"ENO_TOMBSTONE_RECOVERY_ENO_FIELD_MANAGERS":            "eno, my-eno",
		"ENO_TOMBSTONE_RECOVERY_ENO_RESOURCE_FILTERS":          `["self.kind == 'Secret'", "self.kind == 'Role'"]`,
		"ENO_TOMBSTONE_RECOVERY_CONTROL_PLANE_ID":              "old-cp",
	})
	o.Enabled = true
	s, err := o.resolve()
	require.NoError(t, err)
	assert.False(t, s.Enabled, "the operator's variable wins over the compiled-in value")
	assert.Equal(t, "inv", s.InventoryNamespace)
	assert.Equal(t, 2048, s.MaxChunkBytes)
	assert.Equal(t, 7, s.MaxChunks)
	assert.Equal(t, 1.0, s.MaxTombstoneFraction)
	assert.True(t, s.AllowCrossNamespaceLineage)
	assert.Equal(t, 5*time.Second, s.PendingRecheckInterval)
	assert.Equal(t, 7*time.Second, s.ReconcileTimeout)
	assert.Equal(t, 3, s.Workers)
	assert.Equal(t, "system:serviceaccount:ops:recovery", s.Impersonate)
	assert.Equal(t, []string{"eno", "my-eno"}, s.EnoManagers.Names())
	assert.Equal(t, "old-cp", s.ControlPlane)
	require.NotNil(t, s.ResourceFilter, "the variable lists every reconciler's filter")
	assert.NoError(t, s.ResourceFilter(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r"}}`, domain.Composition{}))
	assert.ErrorContains(t, s.ResourceFilter(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`, domain.Composition{}), "no --resource-filter")

	o = withEnv(nil)
	o.Enabled, o.MaxChunks = true, 9
	s, err = o.resolve()
	require.NoError(t, err)
	assert.True(t, s.Enabled, "unset variables change nothing")
	assert.Equal(t, 9, s.MaxChunks)
}

func TestRefusals(t *testing.T) {
	with := func(edit func(*Options)) Options {
		o := DefaultOptions()
		edit(&o)
		return o
	}
	env := func(k, v string) Options { return withEnv(map[string]string{"ENO_TOMBSTONE_RECOVERY_" + k: v}) }
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"zero options", Options{}, "inventory namespace must not be empty"},
		{"bad fraction", with(func(o *Options) { o.MaxTombstoneFraction = 1.5 }), "max tombstone fraction must be between 0 and 1, got 1.5"},
		{"negative chunks", with(func(o *Options) { o.MaxChunks = -1 }), "max chunks must be at least 1"},
		{"chunk bytes over the Secret limit", with(func(o *Options) { o.MaxChunkBytes = domain.SecretDataLimit + 1 }), "max chunk bytes must be between"},
		{"no workers", with(func(o *Options) { o.Workers = 0 }), "Workers must be at least 1"},
		{"negative resync", with(func(o *Options) { o.ResyncPeriod = -1 }), "ResyncPeriod must not be negative"},
		{"negative QPS", with(func(o *Options) { o.QPS = -1 }), "QPS and Burst must not be negative"},
		{"a selector of nothing", with(func(o *Options) { o.CompositionSelector = labels.Nothing() }), "selects nothing"},
		{"variable not a number", env("MAX_CHUNKS", "many"), `ENO_TOMBSTONE_RECOVERY_MAX_CHUNKS="many": want an integer`},
		{"variable not a boolean", env("ENABLED", "yes please"), "ENO_TOMBSTONE_RECOVERY_ENABLED"},
		{"a field manager a precondition cannot quote", env("ENO_FIELD_MANAGERS", `eno,"x"`), `ENO_TOMBSTONE_RECOVERY_ENO_FIELD_MANAGERS="eno,\"x\"": want field manager names separated by commas`},
		{"a resource filter that does not compile", with(func(o *Options) { o.ResourceFilters = []string{"self.kind =="} }), `resource filter "self.kind =="`},
		{"filters not a JSON list", env("ENO_RESOURCE_FILTERS", "self.kind == 'Role'"), "want a JSON list of CEL expressions"},
		{"variable out of range, named", env("MAX_TOMBSTONE_FRACTION", "2"), "ENO_TOMBSTONE_RECOVERY_MAX_TOMBSTONE_FRACTION must be between 0 and 1, got 2"},
		{"control plane id, named", env("CONTROL_PLANE_ID", "a/b"), `ENO_TOMBSTONE_RECOVERY_CONTROL_PLANE_ID must be 1-63`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.opts.resolve()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Every client of the guest acts as Options.Impersonate (design §6.2): the release's RBAC and
// policies confine it inside eno-reconciler; the host's own config is left as it was.
func TestClientsImpersonateTheReleaseServiceAccount(t *testing.T) {
	host := &rest.Config{Host: "https://control-plane", BearerToken: "eno"}
	g := &Guest{s: Options{Impersonate: ReleaseServiceAccount}}
	cfg := g.clientConfig(host)
	assert.Equal(t, rest.ImpersonationConfig{UserName: "system:serviceaccount:eno-system:eno-tombstone-recovery"}, cfg.Impersonate)
	assert.Equal(t, "eno", cfg.BearerToken, "the host's credentials authenticate the impersonation")
	assert.Empty(t, host.Impersonate.UserName, "the host's config is not changed")

	g = &Guest{}
	assert.Empty(t, g.clientConfig(host).Impersonate.UserName, "no impersonation unless asked")
}
