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
	"github.com/Azure/eno-tombstone-recovery/internal/enocel"
)

// Options configures the controller SetupWithManager adds; start from DefaultOptions.
type Options struct {
	// Config holds the use cases' settings, each documented there; Scope.Selector is set from
	// CompositionSelector. app.DefaultConfig is off: set Enabled to record and recover (design §4).
	app.Config
	// CompositionSelector limits the controller to matching Compositions (nil: all); pass eno-reconciler's.
	CompositionSelector labels.Selector
	// ResourceFilters, when not nil, are compiled into Config.ResourceFilter: each eno-reconciler's
	// --resource-filter ("" for one without).
	ResourceFilters []string

	// QPS and Burst limit each client of this controller; 0 keeps the rest.Config's.
	QPS     float32
	Burst   int
	Workers int // concurrent reconciles (MaxConcurrentReconciles)
	// ResyncPeriod re-delivers every cached Composition this often (0: never); standalone only.
	ResyncPeriod time.Duration

	// HostElects says that the manager elects a leader (eno-reconciler's mgrOpts.LeaderElection,
	// run's --leader-elect): the controller then runs on the leader only.
	HostElects bool
	// EveryReplica runs the controller on every replica of a manager that does not elect (run
	// --leader-elect=false): safe (resourceVersion preconditions, recovery slices sealed before
	// their commit), but duplicated work. Without it or HostElects the controller refuses to
	// start, logging why, and the host carries on.
	EveryReplica bool

	// Impersonate is the user every client acts as, on both clusters ("": the host's identity);
	// eno-reconciler passes ReleaseServiceAccount, which the release's RBAC and policies confine.
	Impersonate string
	// Logger receives the controller's logs, also via every reconcile's context; zero: the manager's.
	Logger logr.Logger
	// Registerer receives the controller's metrics (eno_tombstone_recovery_*); nil exports none.
	// The work queue's are controller-runtime's (workqueue_*, name "compositions") in either case.
	Registerer prometheus.Registerer

	// Getenv, when set (to os.Getenv, say), lets the ENO_TOMBSTONE_RECOVERY_* variables override
	// the settings they name (environment.go), in a process whose flags are not ours; nil: none.
	Getenv func(string) string
}

// DefaultOptions are app.DefaultConfig, two workers and a resync every ten minutes.
func DefaultOptions() Options {
	return Options{Config: app.DefaultConfig(), Workers: 2, ResyncPeriod: 10 * time.Minute}
}

// ErrNoLeaderElection is why the controller refuses a manager that does not elect (see EveryReplica).
var ErrNoLeaderElection = errors.New("eno-reconciler runs without --leader-election: every replica would run the tombstone recovery controller; " +
	"run eno-reconciler with --leader-election to enable it (the rest of eno-reconciler is unaffected)")

const (
	// ReleaseServiceAccount is deploy/control-plane/release.yaml's ServiceAccount, as a user name.
	ReleaseServiceAccount = "system:serviceaccount:eno-system:eno-tombstone-recovery"
	UserAgent             = "eno-tombstone-recovery" // of the controller's requests to both API servers
	leaseBaseName         = "eno-tombstone-recovery" // the Lease of the whole Composition space
)

// DefaultLeaseName is the standalone binary's Lease for a Composition scope: leaseBaseName for
// all Compositions, else with a suffix from the namespace and selector, one per shard.
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

// resolve applies the environment, then the selector and the filters, and checks every value.
func (o Options) resolve() (Options, error) {
	var err error
	if o.Getenv != nil {
		if o, err = o.fromEnvironment(o.Getenv); err != nil {
			return o, fmt.Errorf("tombstone recovery: %w", err)
		}
	}
	sel := selectorString(o.CompositionSelector)
	if o.CompositionSelector != nil && sel == "" && !o.CompositionSelector.Empty() {
		// labels.Nothing() prints as "", which a list request would read as everything.
		return o, errors.New("tombstone recovery: a composition selector that selects nothing is not supported")
	}
	if o.Scope.Selector, err = k8s.NewLabelMatcher(sel); err != nil {
		return o, fmt.Errorf("tombstone recovery: composition selector: %w", err)
	}
	if o.ResourceFilters != nil {
		if o.ResourceFilter, err = enocel.ResourceFilters(o.ResourceFilters); err != nil {
			return o, fmt.Errorf("tombstone recovery: %w", err)
		}
	}
	var se *app.SettingError
	if err := o.Validate(); errors.As(err, &se) && o.Getenv != nil && o.Getenv(envName(se.Setting.Flag())) != "" {
		// A refusal of a setting that came from the environment names the variable.
		return o, errors.New("tombstone recovery: " + se.Named(envName(se.Setting.Flag())))
	} else if err != nil {
		return o, fmt.Errorf("tombstone recovery: %w", err)
	}
	switch {
	case o.QPS < 0 || o.Burst < 0:
		return o, fmt.Errorf("tombstone recovery: QPS and Burst must not be negative, got %g and %d", o.QPS, o.Burst)
	case o.Workers < 1:
		return o, fmt.Errorf("tombstone recovery: Workers must be at least 1, got %d", o.Workers)
	case o.ResyncPeriod < 0:
		return o, fmt.Errorf("tombstone recovery: ResyncPeriod must not be negative, got %s", o.ResyncPeriod)
	}
	return o, nil
}
