package runnable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/Azure/eno-tombstone-recovery/adapters/metrics"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// Guest is the tombstone recovery controller in its host's manager (eno-reconciler's or the
// standalone binary's): it adds one runnable, which builds and runs the rest on the leader only,
// and never stops or delays the host (§8.2).
type Guest struct {
	s       Options // resolved
	log     logr.Logger
	mgr     manager.Manager
	clients clients
	metrics ports.Metrics // nil when no Registerer was given
	// The objects of the Composition and inventory Secret caches, counted from refHandler's events.
	cachedComps, cachedSecrets atomic.Int64

	added  bool        // the controller was added; false when refused
	failed atomic.Bool // the guest failed; it stays stopped until the process restarts
	ready  atomic.Bool // the leader's caches hold their initial lists, and said so in the log
}

// SetupWithManager adds the controller to mgr, whose config is the control plane's; downstream
// holds the inventory Secrets (nil: the control plane). It builds the clients and registers the
// metrics, contacts no cluster, starts nothing and fails on bad options only. In a manager that
// does not elect it adds nothing (unless EveryReplica) and logs why.
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
	if !s.HostElects && !s.EveryReplica {
		g.log.Error(ErrNoLeaderElection, "not starting the tombstone recovery controller")
		return g, nil
	}
	if g.clients, err = newClients(g.clientConfig(mgr.GetConfig()), g.clientConfig(cmp.Or(downstream, mgr.GetConfig()))); err != nil {
		return nil, fmt.Errorf("tombstone recovery: clients: %w", err)
	}
	if s.Registerer != nil { // on every replica, as before: a follower exports its build_info and zeroes
		if g.metrics, err = metrics.New(s.Registerer); err == nil {
			err = metrics.RegisterCacheSizes(s.Registerer, map[string]func() int{
				"compositions":      func() int { return int(g.cachedComps.Load()) },
				"inventory-secrets": func() int { return int(g.cachedSecrets.Load()) },
			})
		}
		if err != nil {
			return nil, fmt.Errorf("tombstone recovery: registering metrics: %w", err)
		}
	}
	if err := mgr.Add(guestRunnable{g: g, setup: g.setup}); err != nil {
		return nil, fmt.Errorf("tombstone recovery: %w", err)
	}
	g.added = true
	return g, nil
}

// clientConfig copies cfg for this controller's clients: its own user agent, limits and identity.
func (g *Guest) clientConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.UserAgent = UserAgent
	if g.s.Impersonate != "" {
		out.Impersonate = rest.ImpersonationConfig{UserName: g.s.Impersonate}
	}
	out.QPS, out.Burst = cmp.Or(g.s.QPS, out.QPS), cmp.Or(g.s.Burst, out.Burst) // resolve refused negatives
	return out
}

// ReadyzCheck, the standalone binary's /readyz, fails while the controller runs on this replica
// and its caches have not synced, and after it failed; a follower is ready. Inside eno-reconciler
// the guest adds no check, so it never holds its host unready.
func (g *Guest) ReadyzCheck(*http.Request) error {
	if g.failed.Load() {
		return errors.New("tombstone recovery: the controller failed (logged); restart the process")
	}
	if !g.added || g.ready.Load() {
		return nil // refused, or synced
	}
	if g.s.HostElects {
		select {
		case <-g.mgr.Elected():
		default:
			return nil // a follower, or before the election
		}
	}
	return errors.New("tombstone recovery: caches not synced")
}

// guestRunnable is the one runnable the guest adds to its host: the manager starts it on its
// leader only, and it never returns an error (a manager stops when a runnable returns one). Its
// Start builds the caches, fleet index and controller (Guest.setup), so that a follower touches
// none of them, and runs them until the host stops or one fails: a failure or panic of any is
// logged and counted and stops them all.
type guestRunnable struct {
	g     *Guest
	setup func(context.Context) ([]manager.Runnable, error) // Guest.setup
}

func (guestRunnable) NeedLeaderElection() bool { return true }

func (r guestRunnable) Start(ctx context.Context) error {
	g := r.g
	ctx, stop := context.WithCancel(logr.NewContext(ctx, g.log))
	defer stop()
	var wg sync.WaitGroup
	g.guard(stop, func() error {
		parts, err := r.setup(ctx)
		for _, p := range parts {
			wg.Go(func() { g.guard(stop, func() error { return p.Start(ctx) }) })
		}
		return err
	})
	wg.Wait()
	return nil
}

// guard runs f. Its error or panic is logged and counted, marks the guest failed and stops it.
func (g *Guest) guard(stop context.CancelFunc, f func() error) {
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				g.panicked("start")
				err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			}
		}()
		return f()
	}()
	if err != nil {
		g.failed.Store(true)
		g.log.Error(err, "the tombstone recovery controller stopped until the process restarts; the host carries on")
		stop()
	}
}

func (g *Guest) panicked(where string) {
	if g.metrics != nil {
		g.metrics.Panicked(where)
	}
}
