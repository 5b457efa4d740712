package runnable

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Options configures a Controller. Zero values mean the defaults named on each field, except
// Enabled: the library default is off, so a caller that wants recording and recovery says so.
type Options struct {
	// ControlPlane is the cluster that holds the Compositions and ResourceSlices (eno-reconciler:
	// mgr.GetConfig()). Required. It is copied, never modified.
	ControlPlane *rest.Config
	// Downstream is the cluster that holds the inventory Secrets (eno-reconciler: remoteConfig).
	// nil means ControlPlane.
	Downstream *rest.Config
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
	// PendingRecheckInterval is how often a hand-off that Eno has not carried yet is checked
	// again against the downstream objects; 0 is app.DefaultPendingRecheckInterval.
	PendingRecheckInterval time.Duration
	// ReconcileTimeout bounds one reconcile; 0 is app.DefaultReconcileTimeout.
	ReconcileTimeout time.Duration

	// Workers is the number of concurrent reconciles; 0 is 2.
	Workers int
	// ResyncPeriod re-delivers every cached Composition this often; 0 is 10 minutes, a negative
	// value never.
	ResyncPeriod time.Duration

	// LeaderElection decides which replica reconciles; by default one at a time, through a
	// Lease of the controller's own.
	LeaderElection LeaderElection

	// Logger receives the controller's logs; it is also put in the context of every reconcile.
	Logger logr.Logger
	// Registerer receives the controller's metrics (eno_tombstone_recovery_*); nil exports none.
	// eno-reconciler can pass controller-runtime's metrics.Registry.
	Registerer prometheus.Registerer
	// WorkqueueRegisterer receives the work queue's client-go metrics (workqueue_*, label name).
	// nil means Registerer under the prefix eno_tombstone_recovery_, because controller-runtime's
	// registry already holds workqueue_* families with other labels.
	WorkqueueRegisterer prometheus.Registerer

	// Getenv, when set (to os.Getenv, say), lets the ENO_TOMBSTONE_RECOVERY_* variables (Env*)
	// override the fields they name: settings for an operator of a process whose flags are not
	// ours. nil reads no environment.
	Getenv func(string) string
}

// LeaderElection configures the Lease that lets one replica reconcile at a time.
// eno-reconciler starts every runnable on every replica (its own leader election is off by
// default), so the controller elects a leader by itself unless Disabled.
type LeaderElection struct {
	// Disabled reconciles on every replica at once: safe (resourceVersion preconditions, and
	// recovery slices sealed before their commit), but every replica then does the work.
	Disabled bool
	// HostElects says that the process embedding the controller elects a leader and starts
	// leader-election runnables only on its leader (eno-reconciler run with --leader-election:
	// pass mgrOpts.LeaderElection). The controller then follows the host: NeedLeaderElection is
	// true and it takes no Lease of its own, so a follower starts nothing of it and sends nothing.
	HostElects bool
	// Namespace of the Lease; "" is $POD_NAMESPACE, else kube-system.
	Namespace string
	// Name of the Lease; "" is DefaultLeaseName for the controller's Composition scope.
	Name string
	// Identity of this replica; "" is the host name and a random suffix.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's; 0 is 15s, 10s and 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// StopOnLoss makes Start return ErrLeadershipLost when the Lease is lost, so that a
	// standalone process restarts clean. Otherwise the controller drains its workers and
	// campaigns again, and the process that embeds it carries on.
	StopOnLoss bool
}

// ErrLeadershipLost is returned by Start when the Lease was lost and StopOnLoss is set.
var ErrLeadershipLost = errors.New("lost the leader election Lease")

const (
	// UserAgent identifies the controller's requests to both API servers.
	UserAgent = "eno-tombstone-recovery"
	// leaseBaseName is the Lease of the whole Composition space.
	leaseBaseName = "eno-tombstone-recovery"

	defaultWorkers       = 2
	defaultResync        = 10 * time.Minute
	defaultLeaseDuration = 15 * time.Second
	defaultRenewDeadline = 10 * time.Second
	defaultRetryPeriod   = 2 * time.Second
	defaultLeaseNS       = "kube-system"
)

// DefaultLeaseName is the Lease of a Composition scope: eno-tombstone-recovery for all
// Compositions, with a suffix from the namespace and selector otherwise. Replicas of one shard
// (eno-reconciler replicas that differ only by --resource-filter) share a Lease; different
// shards each elect their own leader.
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
// clients', the use cases' configuration, the workers and resync period, and leader election.
func (o Options) resolve() (settings, error) {
	if o.Getenv != nil {
		var err error
		if o, err = o.fromEnvironment(o.Getenv); err != nil {
			return settings{}, fmt.Errorf("tombstone recovery: %w", err)
		}
	}
	s := settings{Options: o, selector: selectorString(o.CompositionSelector)}
	if o.ControlPlane == nil {
		return s, errors.New("tombstone recovery: the control plane rest.Config is required")
	}
	if s.Downstream == nil {
		s.Downstream = o.ControlPlane
	}
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
		s.ResyncPeriod = 0 // the informer's "never"
	}
	if err := s.LeaderElection.resolve(o.CompositionNamespace, o.CompositionSelector); err != nil {
		return s, err
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

// resolve applies the Lease's defaults, its name following the shard, and checks client-go's
// rules for its durations.
func (le *LeaderElection) resolve(shardNamespace string, shardSelector labels.Selector) error {
	if le.Namespace == "" {
		le.Namespace = os.Getenv("POD_NAMESPACE")
	}
	if le.Namespace == "" {
		le.Namespace = defaultLeaseNS
	}
	if le.Name == "" {
		le.Name = DefaultLeaseName(shardNamespace, shardSelector)
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&le.LeaseDuration, defaultLeaseDuration}, {&le.RenewDeadline, defaultRenewDeadline}, {&le.RetryPeriod, defaultRetryPeriod}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	// client-go's own rules (leaderelection.NewLeaderElector), checked here so Start cannot fail on them.
	if !le.Disabled && !le.HostElects && (le.LeaseDuration <= le.RenewDeadline || le.RetryPeriod <= 0 ||
		float64(le.RenewDeadline) <= 1.2*float64(le.RetryPeriod)) {
		return fmt.Errorf("tombstone recovery: leader election needs LeaseDuration > RenewDeadline > 1.2 × RetryPeriod > 0, got %s, %s, %s",
			le.LeaseDuration, le.RenewDeadline, le.RetryPeriod)
	}
	return nil
}
