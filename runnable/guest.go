package runnable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync/atomic"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/Azure/eno-tombstone-recovery/ports"
)

// Guest is the tombstone recovery controller in its host's manager (eno-reconciler's or the
// standalone binary's): all it adds runs on the leader only, and never stops or delays the host (§8.2).
type Guest struct {
	s       Options // resolved
	log     logr.Logger
	mgr     manager.Manager
	clients clients
	metrics ports.Metrics // nil when no Registerer was given

	added  bool        // the controller was added; false when refused
	failed atomic.Bool // a runnable of the guest failed; it stays stopped until the process restarts
	ready  atomic.Bool // the leader's caches hold their initial lists, and said so in the log
}

// SetupWithManager adds the controller to mgr, whose config is the control plane's; downstream
// holds the inventory Secrets (nil: the control plane). It contacts no cluster, starts nothing and
// fails on bad options only. In a manager that does not elect it adds nothing (unless
// EveryReplica) and logs why.
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
	if downstream == nil {
		downstream = mgr.GetConfig()
	}
	if err := g.setup(context.Background(), downstream); err != nil {
		return nil, fmt.Errorf("tombstone recovery: %w", err)
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

// isolated is the host's manager as the guest's builder sees it: each runnable the guest adds
// runs on the leader only, after the host's caches, and its failure or panic is logged and
// counted, never returned to the host (a manager stops when a runnable returns an error).
type isolated struct {
	manager.Manager
	g *Guest
}

func (m isolated) Add(r manager.Runnable) error { return m.Manager.Add(guestRunnable{r: r, g: m.g}) }

// guestRunnable hides whether r is a cache, so that the manager neither starts it on a follower
// nor waits for it to sync before electing.
type guestRunnable struct {
	r manager.Runnable
	g *Guest
}

func (guestRunnable) NeedLeaderElection() bool { return true }

func (r guestRunnable) Start(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r.g.panicked("start")
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
		if err != nil {
			r.g.failed.Store(true)
			r.g.log.Error(err, "the tombstone recovery controller stopped until the process restarts; the host carries on")
		}
		err = nil
	}()
	return r.r.Start(logr.NewContext(ctx, r.g.log))
}

func (g *Guest) panicked(where string) {
	if g.metrics != nil {
		g.metrics.Panicked(where)
	}
}
