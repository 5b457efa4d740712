package runnable

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/Azure/eno-tombstone-recovery/adapters/metrics"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// Guest is the tombstone recovery controller as one runnable of a controller-runtime manager.
// The manager starts it on its elected leader only (NeedLeaderElection is true). Start runs
// the controller's caches and its controller-runtime controller inside itself, and never
// returns an error: a failure is logged and the controller starts again after a backoff, so
// that nothing of the guest stops or delays its host (design §8.2).
type Guest struct {
	s       settings
	log     logr.Logger
	mgr     manager.Manager
	clients clients
	metrics ports.Metrics // nil when no Registerer was given

	running atomic.Bool // an attempt is under way on this replica
	synced  atomic.Bool // the current attempt's caches have synced
	sizes   atomic.Pointer[cacheSizes]
}

// SetupWithManager adds the controller to mgr, which holds the Compositions (its config is the
// control plane's); downstream is the cluster of the inventory Secrets (nil: the control
// plane). It contacts no cluster and starts nothing; it fails on bad options only.
func SetupWithManager(mgr manager.Manager, downstream *rest.Config, opts Options) (*Guest, error) {
	if mgr == nil {
		return nil, errors.New("tombstone recovery: a manager is required")
	}
	s, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	g := &Guest{s: s, mgr: mgr, log: s.Logger}
	if g.log.GetSink() == nil {
		g.log = mgr.GetLogger().WithName("tombstone-recovery")
	}
	if downstream == nil {
		downstream = mgr.GetConfig()
	}
	if g.clients, err = newClients(g.clientConfig(mgr.GetConfig()), g.clientConfig(downstream)); err != nil {
		return nil, err
	}
	if s.Registerer != nil {
		rec, err := metrics.New(s.Registerer)
		if err != nil {
			return nil, fmt.Errorf("tombstone recovery: registering metrics: %w", err)
		}
		g.metrics = rec
		if err := metrics.RegisterCacheSizes(s.Registerer, map[string]func() int{
			"compositions": g.cachedCompositions, "inventory-secrets": g.cachedSecrets,
		}); err != nil {
			return nil, fmt.Errorf("tombstone recovery: registering cache metrics: %w", err)
		}
	}
	if err := mgr.Add(g); err != nil {
		return nil, fmt.Errorf("tombstone recovery: adding the controller to the manager: %w", err)
	}
	return g, nil
}

// clientConfig copies cfg for this controller's clients: its own user agent, limits and identity.
func (g *Guest) clientConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.UserAgent = UserAgent
	if g.s.Impersonate != "" {
		out.Impersonate = rest.ImpersonationConfig{UserName: g.s.Impersonate}
	}
	if g.s.QPS > 0 {
		out.QPS = g.s.QPS
	}
	if g.s.Burst > 0 {
		out.Burst = g.s.Burst
	}
	return out
}

// NeedLeaderElection is true: a manager that elects starts the controller on its leader only,
// so a follower starts nothing of it and sends nothing. It satisfies controller-runtime's
// LeaderElectionRunnable.
func (g *Guest) NeedLeaderElection() bool { return true }

// ReadyzCheck fails while the controller runs on this replica and its caches have not synced;
// a replica that does not lead is ready. It is a healthz.Checker, for the standalone binary's
// /readyz: inside eno-reconciler the guest adds no check, so it never holds its host unready.
func (g *Guest) ReadyzCheck(*http.Request) error {
	if g.synced.Load() {
		return nil
	}
	notSynced := errors.New("tombstone recovery: caches not synced")
	if g.s.HostElects {
		select {
		case <-g.mgr.Elected():
			return notSynced // the leader
		default:
			return nil // a follower, or before the election
		}
	}
	if g.s.EveryReplica {
		return notSynced
	}
	return nil // refused: it never runs here
}

// Start runs the controller until ctx ends and returns nil. An attempt that fails (a cache that
// does not sync within CacheSyncTimeout, a panic, an error of controller-runtime) is logged and
// retried after a backoff that doubles from RestartBackoff up to 5 minutes, and starts again
// from RestartBackoff once an attempt has synced. In a manager that does not elect a leader it
// refuses to run, unless EveryReplica, and returns nil at once.
func (g *Guest) Start(ctx context.Context) error {
	log := g.log
	ctx = logr.NewContext(ctx, log)
	if !g.s.HostElects && !g.s.EveryReplica {
		log.Error(ErrNoLeaderElection, "not starting the tombstone recovery controller")
		return nil
	}
	delay := g.s.RestartBackoff
	for {
		synced, err := g.attempt(ctx)
		if ctx.Err() != nil {
			if !synced {
				log.Info("stopped before the caches synced")
			}
			return nil
		}
		if synced {
			delay = g.s.RestartBackoff
		}
		log.Error(err, "the tombstone recovery controller stopped; starting it again after a backoff (the host carries on)", "backoff", delay.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, maxRestartBackoff)
	}
}

// attempt runs one controller until ctx ends or it fails; synced tells whether its caches
// synced. A panic is recovered into the error.
func (g *Guest) attempt(ctx context.Context) (synced bool, err error) {
	g.running.Store(true)
	defer func() {
		if r := recover(); r != nil {
			g.panicked("start")
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
		g.synced.Store(false)
		g.running.Store(false)
		g.sizes.Store(nil)
	}()
	run, err := g.build(ctx)
	if err != nil {
		return false, err
	}
	return run.run(ctx, g)
}

// panicked counts a panic recovered where it would have reached the host.
func (g *Guest) panicked(where string) {
	if g.metrics != nil {
		g.metrics.Panicked(where)
	}
}

// cacheSizes are the current attempt's cached object counts.
type cacheSizes struct{ compositions, secrets func() int }

func (g *Guest) cachedCompositions() int {
	if s := g.sizes.Load(); s != nil {
		return s.compositions()
	}
	return 0
}

func (g *Guest) cachedSecrets() int {
	if s := g.sizes.Load(); s != nil {
		return s.secrets()
	}
	return 0
}
