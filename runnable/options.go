package runnable

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/enocel"
)

// Options configures the controller SetupWithManager adds. Zero values mean the defaults
// named on each field, except Enabled: the library default is off, so a caller that wants
// recording and recovery says so (design §4).
type Options struct {
	// QPS and Burst limit each client of this controller; 0 keeps the rest.Config's.
	QPS   float32
	Burst int

	// CompositionNamespace limits the controller to one namespace; "" is all of them.
	CompositionNamespace string
	// CompositionSelector limits it to matching Compositions; nil selects everything. Pass
	// eno-reconciler's, so that both work on the same shard.
	CompositionSelector labels.Selector

	// Enabled turns recording and recovery on. False leaves every Composition alone.
	Enabled bool
	// InventoryNamespace is the downstream namespace of the inventory Secrets; "" is kube-system.
	InventoryNamespace string
	// MaxChunkBytes bounds one chunk's inventory.json; 0 is domain.DefaultMaxChunkBytes.
	MaxChunkBytes int
	// MaxChunks caps the chunks of one snapshot; 0 is domain.DefaultMaxChunks.
	MaxChunks int
	// MaxTombstoneFraction is the deletion guard; nil is
	// domain.DefaultMaxTombstoneFraction, 1 disables the guard, 0 holds every recovery.
	MaxTombstoneFraction *float64
	// AllowCrossNamespaceLineage lets a Composition with no history of its own adopt its
	// lineage's history from another namespace. False, the default, keeps
	// each namespace's history to itself: a lineage override must not let anyone who can write
	// Compositions in one namespace have Eno delete another namespace's orphans.
	AllowCrossNamespaceLineage bool
	// EnoFieldManagers are the field managers the host's eno-reconciler writes downstream
	// objects with; the zero value is Eno v0.2.17's (domain.DefaultEnoManagers).
	EnoFieldManagers domain.EnoManagers
	// ResourceFilters are the --resource-filter of each eno-reconciler in use ("" for one
	// without); a tombstone none loads is kept. nil loads everything, as Eno without the flag.
	ResourceFilters []string
	// PendingRecheckInterval is how often a hand-off that Eno has not carried yet is checked
	// again against the downstream objects; 0 is app.DefaultPendingRecheckInterval.
	PendingRecheckInterval time.Duration
	// ReconcileTimeout bounds one reconcile; 0 is app.DefaultReconcileTimeout.
	ReconcileTimeout time.Duration
	// ControlPlaneID names this control plane in the inventory; "" is the UID of its kube-system
	// Namespace, read at each start. Set a predecessor's to take over its history (design §3).
	ControlPlaneID string

	// Workers is the number of concurrent reconciles (MaxConcurrentReconciles); 0 is 2.
	Workers int
	// ResyncPeriod re-delivers every cached Composition this often; 0 is 10 minutes, a negative
	// value never. Standalone only: inside eno-reconciler the guest reads the host's cache.
	ResyncPeriod time.Duration

	// HostElects says that the manager elects a leader and starts leader-election runnables on
	// its leader only (eno-reconciler --leader-election: pass mgrOpts.LeaderElection; the
	// standalone binary with --leader-elect). The controller then runs on the leader only.
	HostElects bool
	// EveryReplica runs the controller on every replica of a manager that does not elect (the
	// standalone binary with --leader-elect=false): safe (resourceVersion preconditions, and
	// recovery slices sealed before their commit), but every replica then does the work. Without
	// it or HostElects the controller refuses to start, logging why, and the host carries on.
	EveryReplica bool

	// Impersonate is the user every client acts as, on both clusters; "" is the host's identity.
	// eno-reconciler passes ReleaseServiceAccount, which the release's RBAC and policies confine.
	Impersonate string
	// Logger receives the controller's logs; it is also put in the context of every reconcile.
	// The zero Logger is the manager's, named tombstone-recovery.
	Logger logr.Logger
	// Registerer receives the controller's metrics (eno_tombstone_recovery_*); nil exports none.
	// eno-reconciler and the binary pass controller-runtime's metrics.Registry. The work queue's
	// metrics are controller-runtime's (workqueue_*, name "compositions") in either case.
	Registerer prometheus.Registerer

	// Getenv, when set (to os.Getenv, say), lets the ENO_TOMBSTONE_RECOVERY_* variables (Env*)
	// override the fields they name: settings for an operator of a process whose flags are not
	// ours. nil reads no environment.
	Getenv func(string) string
}

// ErrNoLeaderElection is why the controller refuses to start in a manager that does not elect
// a leader, unless Options.EveryReplica says every replica may run it.
var ErrNoLeaderElection = errors.New("eno-reconciler runs without --leader-election: every replica would run the tombstone recovery controller; " +
	"run eno-reconciler with --leader-election to enable it (the rest of eno-reconciler is unaffected)")

const (
	// ReleaseServiceAccount is deploy/control-plane/release.yaml's ServiceAccount, as a user name.
	ReleaseServiceAccount = "system:serviceaccount:eno-system:eno-tombstone-recovery"
	// UserAgent identifies the controller's requests to both API servers.
	UserAgent = "eno-tombstone-recovery"
	// leaseBaseName is the Lease of the whole Composition space.
	leaseBaseName = "eno-tombstone-recovery"

	defaultWorkers = 2
	defaultResync  = 10 * time.Minute
)

// DefaultLeaseName is the standalone binary's Lease for a Composition scope:
// eno-tombstone-recovery for all Compositions, with a suffix from the namespace and selector
// otherwise. Replicas of one shard share a Lease; different shards each elect their own leader.
func DefaultLeaseName(namespace string, selector labels.Selector) string {
	sel := selectorString(selector)
	if namespace == "" && sel == "" {
		return leaseBaseName
	}
	sum := sha256.Sum256([]byte(namespace + "\x00" + sel))
	return leaseBaseName + "-" + hex.EncodeToString(sum[:])[:10]
}

func selectorString(s labels.Selector) string {
	if s == nil {
		return ""
	}
	return s.String()
}

// settings are Options with every default applied and every value checked.
type settings struct {
	Options
	config   app.Config
	selector string
}

// resolve applies the environment, then every default, and checks every value: the
// clients', the use cases' configuration, the workers and the resync period.
func (o Options) resolve() (settings, error) {
	if o.Getenv != nil {
		var err error
		if o, err = o.fromEnvironment(o.Getenv); err != nil {
			return settings{}, fmt.Errorf("tombstone recovery: %w", err)
		}
	}
	s := settings{Options: o, selector: selectorString(o.CompositionSelector)}
	if o.QPS < 0 || o.Burst < 0 {
		return s, fmt.Errorf("tombstone recovery: QPS and Burst must not be negative, got %g and %d", o.QPS, o.Burst)
	}
	if o.CompositionSelector != nil && s.selector == "" && !o.CompositionSelector.Empty() {
		// labels.Nothing() prints as "", which a list request would read as everything.
		return s, errors.New("tombstone recovery: a composition selector that selects nothing is not supported")
	}
	matcher, err := k8s.NewLabelMatcher(s.selector)
	if err != nil {
		return s, fmt.Errorf("tombstone recovery: composition selector: %w", err)
	}
	if s.config, err = o.appConfig(matcher); err != nil {
		return s, err
	}

	switch {
	case o.Workers < 0:
		return s, fmt.Errorf("tombstone recovery: Workers must not be negative, got %d", o.Workers)
	case o.Workers == 0:
		s.Workers = defaultWorkers
	}
	switch {
	case o.ResyncPeriod == 0:
		s.ResyncPeriod = defaultResync
	case o.ResyncPeriod < 0:
		s.ResyncPeriod = 0 // never
	}
	return s, nil
}

// appConfig is the use cases' configuration: app.DefaultConfig with each option that is set.
func (o Options) appConfig(matcher domain.LabelMatcher) (app.Config, error) {
	cfg := app.DefaultConfig()
	cfg.Enabled = o.Enabled
	cfg.Scope = domain.Scope{Namespace: o.CompositionNamespace, Selector: matcher}
	if o.InventoryNamespace != "" {
		cfg.InventoryNamespace = o.InventoryNamespace
	}
	if o.MaxChunkBytes != 0 {
		cfg.MaxChunkBytes = o.MaxChunkBytes
	}
	if o.MaxChunks != 0 {
		cfg.MaxChunks = o.MaxChunks
	}
	if o.MaxTombstoneFraction != nil {
		cfg.MaxTombstoneFraction = *o.MaxTombstoneFraction
	}
	cfg.AllowCrossNamespaceLineage = o.AllowCrossNamespaceLineage
	cfg.EnoManagers = o.EnoFieldManagers
	var err error
	if cfg.ResourceFilter, err = enocel.ResourceFilters(o.ResourceFilters); err != nil {
		return cfg, fmt.Errorf("tombstone recovery: %w", err)
	}
	cfg.ControlPlane = o.ControlPlaneID
	if o.PendingRecheckInterval != 0 {
		cfg.PendingRecheckInterval = o.PendingRecheckInterval
	}
	if o.ReconcileTimeout != 0 {
		cfg.ReconcileTimeout = o.ReconcileTimeout
	}
	if err := cfg.Validate(); err != nil {
		if named := withEnvName(err, o.Getenv); named != err {
			return cfg, named
		}
		return cfg, fmt.Errorf("tombstone recovery: %w", err)
	}
	return cfg, nil
}
