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
	s, err := Options{}.resolve()
	require.NoError(t, err)
	assert.False(t, s.config.Enabled, "the library default is off (design §4)")
	assert.Equal(t, domain.DefaultInventoryNamespace, s.config.InventoryNamespace)
	assert.Equal(t, domain.DefaultMaxChunkBytes, s.config.MaxChunkBytes)
	assert.Equal(t, domain.DefaultMaxChunks, s.config.MaxChunks)
	assert.Equal(t, domain.DefaultMaxTombstoneFraction, s.config.MaxTombstoneFraction)
	assert.False(t, s.config.AllowCrossNamespaceLineage, "each namespace's history is its own by default (design §5 step 3)")
	assert.Equal(t, 2, s.Workers)
	assert.Equal(t, 10*time.Minute, s.ResyncPeriod)
	assert.False(t, s.HostElects || s.EveryReplica, "without election the guest refuses to start")
	assert.True(t, s.config.Scope.Contains(domain.Composition{Namespace: "any", Labels: map[string]string{"a": "b"}}))
}

func TestResolveExplicitValues(t *testing.T) {
	zero := 0.0
	sel, err := labels.Parse("shard=a")
	require.NoError(t, err)
	s, err := Options{
		Enabled: true, CompositionNamespace: "team-a", CompositionSelector: sel,
		InventoryNamespace: "inv", MaxChunkBytes: 100, MaxChunks: 3, MaxTombstoneFraction: &zero,
		AllowCrossNamespaceLineage: true, Workers: 5, ResyncPeriod: -1,
	}.resolve()
	require.NoError(t, err)
	assert.True(t, s.config.Enabled)
	assert.True(t, s.config.AllowCrossNamespaceLineage)
	assert.Equal(t, "inv", s.config.InventoryNamespace)
	assert.Equal(t, 100, s.config.MaxChunkBytes)
	assert.Equal(t, 3, s.config.MaxChunks)
	assert.Equal(t, 0.0, s.config.MaxTombstoneFraction, "0 is a setting (hold every recovery), not the default")
	assert.Equal(t, 5, s.Workers)
	assert.Equal(t, time.Duration(0), s.ResyncPeriod, "negative: the cache never resyncs")
	assert.Equal(t, "shard=a", s.selector)
	assert.True(t, s.config.Scope.Contains(domain.Composition{Namespace: "team-a", Labels: map[string]string{"shard": "a"}}))
	assert.False(t, s.config.Scope.Contains(domain.Composition{Namespace: "team-a", Labels: map[string]string{"shard": "b"}}))
	assert.False(t, s.config.Scope.Contains(domain.Composition{Namespace: "team-b", Labels: map[string]string{"shard": "a"}}))
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

// A first rollout reviews every recovery: ENO_TOMBSTONE_RECOVERY_MAX_TOMBSTONE_FRACTION=0 is a
// setting, not "unset", and wins over the option (design §6.1).
func TestResolveEnvironmentFractionZero(t *testing.T) {
	s, err := Options{MaxTombstoneFraction: ptr(0.5),
		Getenv: func(k string) string {
			if k == EnvMaxTombstoneFraction {
				return "0"
			}
			return ""
		}}.resolve()
	require.NoError(t, err)
	assert.Equal(t, 0.0, s.config.MaxTombstoneFraction)
}

func TestResolveEnvironment(t *testing.T) {
	vars := map[string]string{
		EnvEnabled:                    "false",
		EnvInventoryNamespace:         "inv",
		EnvMaxChunkBytes:              "2048",
		EnvMaxChunks:                  "7",
		EnvMaxTombstoneFraction:       "1",
		EnvAllowCrossNamespaceLineage: "true",
		EnvWorkers:                    "3",
		EnvImpersonate:                "system:serviceaccount:ops:recovery",
		EnvEnoFieldManagers:           "eno, my-eno",
		EnvEnoResourceFilters:         `["self.kind == 'Secret'", "self.kind == 'Role'"]`,
	}
	s, err := Options{Enabled: true, Getenv: func(k string) string { return vars[k] }}.resolve()
	require.NoError(t, err)
	assert.False(t, s.config.Enabled, "the operator's variable wins over the compiled-in value")
	assert.Equal(t, "inv", s.config.InventoryNamespace)
	assert.Equal(t, 2048, s.config.MaxChunkBytes)
	assert.Equal(t, 7, s.config.MaxChunks)
	assert.Equal(t, 1.0, s.config.MaxTombstoneFraction)
	assert.True(t, s.config.AllowCrossNamespaceLineage)
	assert.Equal(t, 3, s.Workers)
	assert.Equal(t, "system:serviceaccount:ops:recovery", s.Impersonate)
	assert.Equal(t, []string{"eno", "my-eno"}, s.config.EnoManagers.Names())
	require.NotNil(t, s.config.ResourceFilter, "the variable lists every reconciler's filter")
	assert.NoError(t, s.config.ResourceFilter(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r"}}`, domain.Composition{}))
	assert.ErrorContains(t, s.config.ResourceFilter(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`, domain.Composition{}), "no --resource-filter")

	s, err = Options{Enabled: true, MaxChunks: 9, Getenv: func(string) string { return "" }}.resolve()
	require.NoError(t, err)
	assert.True(t, s.config.Enabled, "unset variables change nothing")
	assert.Equal(t, 9, s.config.MaxChunks)
}

func TestRefusals(t *testing.T) {
	env := func(k, v string) func(string) string {
		return func(name string) string {
			if name == k {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"bad fraction", Options{MaxTombstoneFraction: ptr(1.5)}, "max tombstone fraction must be between 0 and 1, got 1.5"},
		{"negative chunks", Options{MaxChunks: -1}, "max chunks must be at least 1"},
		{"chunk bytes over the Secret limit", Options{MaxChunkBytes: domain.SecretDataLimit + 1}, "max chunk bytes must be between"},
		{"negative workers", Options{Workers: -1}, "Workers must not be negative"},
		{"negative QPS", Options{QPS: -1}, "QPS and Burst must not be negative"},
		{"a selector of nothing", Options{CompositionSelector: labels.Nothing()}, "selects nothing"},
		{"variable not a number", Options{Getenv: env(EnvMaxChunks, "many")}, `ENO_TOMBSTONE_RECOVERY_MAX_CHUNKS="many": want an integer`},
		{"variable not a boolean", Options{Getenv: env(EnvEnabled, "yes please")}, "ENO_TOMBSTONE_RECOVERY_ENABLED"},
		{"a field manager a precondition cannot quote", Options{Getenv: env(EnvEnoFieldManagers, `eno,"x"`)}, `ENO_TOMBSTONE_RECOVERY_ENO_FIELD_MANAGERS="eno,\"x\"": want field manager names separated by commas`},
		{"a resource filter that does not compile", Options{ResourceFilters: []string{"self.kind =="}}, `resource filter "self.kind =="`},
		{"filters not a JSON list", Options{Getenv: env(EnvEnoResourceFilters, "self.kind == 'Role'")}, "want a JSON list of CEL expressions"},
		{"variable out of range, named", Options{Getenv: env(EnvMaxTombstoneFraction, "2")}, "ENO_TOMBSTONE_RECOVERY_MAX_TOMBSTONE_FRACTION must be between 0 and 1, got 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.opts.resolve()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// Every client of the guest acts as Options.Impersonate (design §6.2): the release's RBAC and
// policies confine it inside eno-reconciler; the host's own config is left as it was.
func TestClientsImpersonateTheReleaseServiceAccount(t *testing.T) {
	host := &rest.Config{Host: "https://control-plane", BearerToken: "eno"}
	g := &Guest{s: settings{Options: Options{Impersonate: ReleaseServiceAccount}}}
	cfg := g.clientConfig(host)
	assert.Equal(t, rest.ImpersonationConfig{UserName: "system:serviceaccount:eno-system:eno-tombstone-recovery"}, cfg.Impersonate)
	assert.Equal(t, "eno", cfg.BearerToken, "the host's credentials authenticate the impersonation")
	assert.Empty(t, host.Impersonate.UserName, "the host's config is not changed")

	g = &Guest{s: settings{}}
	assert.Empty(t, g.clientConfig(host).Impersonate.UserName, "no impersonation unless asked")
}
