package runnable

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/adapters/metrics"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Controller is the tombstone recovery controller: informers, a work queue drained by app's
// Controller, and, unless disabled, a Lease that lets one replica reconcile at a time.
// Build it with New; run it once with Start.
type Controller struct {
	s   settings
	err error // New's; Start returns it
	// hostElects is Options.LeaderElection.HostElects, kept even when the options are refused.
	hostElects bool

	cp       typedClients // of the control plane
	informer *k8s.CompositionInformer
	store    *k8s.SecretStore
	deps     app.Deps // without Events: the recorder starts in Start
	queues   *metrics.WorkqueueProvider
	identity string

	started atomic.Bool
	synced  atomic.Bool

	mu    sync.Mutex
	queue workqueue.TypedRateLimitingInterface[domain.CompositionRef] // the current term's; nil between terms
}

// New builds the controller without contacting a cluster or starting a goroutine. It returns
// a single value so that it fits mgr.Add(New(...)); a bad option makes Start fail at once with
// the reason.
func New(opts Options) *Controller {
	c := &Controller{hostElects: opts.LeaderElection.HostElects}
	c.err = c.build(opts)
	return c
}

// Err is the reason Start will fail at once, or nil: New's refusal of its options.
func (c *Controller) Err() error { return c.err }

// NeedLeaderElection is true when the host elects a leader (LeaderElection.HostElects): the
// manager then starts the controller on its leader only, and the controller takes no Lease.
// Otherwise it is false: the manager starts the controller on every replica, and the controller
// elects its own leader (unless LeaderElection.Disabled). It satisfies controller-runtime's
// LeaderElectionRunnable.
func (c *Controller) NeedLeaderElection() bool { return c.hostElects }

// ReadyzCheck is nil once the caches have synced. It has the shape of controller-runtime's
// healthz.Checker, for mgr.AddReadyzCheck.
func (c *Controller) ReadyzCheck(*http.Request) error {
	if !c.synced.Load() {
		return errors.New("tombstone recovery: caches not synced")
	}
	return nil
}

func (c *Controller) build(opts Options) error {
	s, err := opts.resolve()
	if err != nil {
		return err
	}
	c.s = s
	cpConfig, remoteConfig := c.clientConfig(s.ControlPlane), c.clientConfig(s.Downstream)
	// Only the typed clients of the two resources used (events and Leases on the control plane,
	// Secrets downstream): the full clientset would link every API group's client into the host.
	if c.cp, err = newTypedClients(cpConfig); err != nil {
		return fmt.Errorf("tombstone recovery: control plane client: %w", err)
	}
	remote, err := newTypedClients(remoteConfig)
	if err != nil {
		return fmt.Errorf("tombstone recovery: downstream client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cpConfig)
	if err != nil {
		return fmt.Errorf("tombstone recovery: control plane dynamic client: %w", err)
	}

	reg, queueReg := s.Registerer, s.WorkqueueRegisterer
	if reg != nil {
		if c.deps.Metrics, err = metrics.New(reg); err != nil {
			return fmt.Errorf("tombstone recovery: registering metrics: %w", err)
		}
	} else {
		// The queue still needs a provider of its own: client-go's global one is whatever the
		// embedding process installed (controller-runtime's, say).
		reg = prometheus.NewRegistry()
	}
	if queueReg == nil {
		queueReg = prometheus.WrapRegistererWithPrefix("eno_tombstone_recovery_", reg)
	}
	if c.queues, err = metrics.NewWorkqueueProvider(queueReg); err != nil {
		return fmt.Errorf("tombstone recovery: registering work queue metrics: %w", err)
	}

	c.informer = k8s.NewCompositionInformer(dyn, k8s.CompositionScope{Namespace: s.CompositionNamespace, LabelSelector: s.selector, Resync: s.ResyncPeriod})
	comps, err := k8s.NewCompositions(dyn, c.informer.Lister())
	if err != nil {
		return err
	}
	slices, err := k8s.NewSlices(dyn)
	if err != nil {
		return err
	}
	sink, err := k8s.NewTombstoneSink(dyn)
	if err != nil {
		return err
	}
	meta, err := metadata.NewForConfig(remoteConfig)
	if err != nil {
		return fmt.Errorf("tombstone recovery: downstream metadata client: %w", err)
	}
	if c.store, err = k8s.NewSecretStore(remote.core, meta, s.config.InventoryNamespace); err != nil {
		return err
	}
	downstream, err := k8s.NewDownstreamObjects(meta, remote.discovery)
	if err != nil {
		return err
	}
	if s.Registerer != nil {
		if err := metrics.RegisterCacheSizes(s.Registerer, map[string]func() int{
			"compositions": c.informer.CachedCount, "inventory-secrets": c.store.CachedCount,
		}); err != nil {
			return fmt.Errorf("tombstone recovery: registering cache metrics: %w", err)
		}
	}
	c.deps.Compositions, c.deps.Guard, c.deps.Decisions, c.deps.Lister = comps, comps, comps, comps
	c.deps.Slices, c.deps.Sink, c.deps.Store, c.deps.Downstream = slices, sink, c.store, downstream
	if err := c.informer.AddRefHandler(c.enqueue, c.handlerPanicked); err != nil {
		return err
	}
	if err := c.store.AddRefHandler(c.enqueue, c.handlerPanicked); err != nil {
		return err
	}

	c.identity = s.LeaderElection.Identity
	if c.identity == "" {
		host, _ := os.Hostname()
		c.identity = host + "_" + string(uuid.NewUUID())
	}
	return nil
}

// typedClients are the typed clients of one cluster the controller uses, sharing one HTTP client
// and one rate limiter, as a clientset's would.
type typedClients struct {
	core         corev1client.CoreV1Interface
	coordination coordinationv1client.CoordinationV1Interface
	discovery    discovery.DiscoveryInterface
}

func newTypedClients(cfg *rest.Config) (typedClients, error) {
	var tc typedClients
	cfg = rest.CopyConfig(cfg)
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return tc, err
	}
	if tc.core, err = corev1client.NewForConfigAndClient(cfg, httpClient); err != nil {
		return tc, err
	}
	if tc.coordination, err = coordinationv1client.NewForConfigAndClient(cfg, httpClient); err != nil {
		return tc, err
	}
	tc.discovery, err = discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	return tc, err
}

// clientConfig copies cfg for this controller's clients: its own user agent and limits.
func (c *Controller) clientConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.UserAgent = UserAgent
	if c.s.QPS > 0 {
		out.QPS = c.s.QPS
	}
	if c.s.Burst > 0 {
		out.Burst = c.s.Burst
	}
	return out
}

// Start fills the caches and reconciles — as leader, unless leader election is disabled —
// until ctx is cancelled; then it drains the workers, releases the Lease and stops everything
// it started before returning nil. It returns an error for bad options, a second call, a cache
// that cannot sync for a reason other than ctx, and, with StopOnLoss, a lost Lease.
func (c *Controller) Start(ctx context.Context) error {
	if c.err != nil {
		return c.err
	}
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("tombstone recovery: Start called more than once")
	}
	log := c.s.Logger
	if log.GetSink() == nil {
		log = logr.FromContextOrDiscard(ctx)
	}
	ctx = logr.NewContext(ctx, log)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	recorder, err := k8s.StartRecorder(ctx, c.cp.core, "")
	if err != nil {
		return err
	}
	defer recorder.Shutdown()
	deps := c.deps
	deps.Events = recorder
	svc, err := app.New(c.s.config, deps)
	if err != nil {
		return err
	}

	c.informer.Start(ctx)
	c.store.Start(ctx)
	defer func() {
		cancel()
		c.informer.Wait()
		c.store.Wait()
	}()
	if err := c.informer.WaitForCacheSync(ctx); err != nil {
		return stoppedOr(ctx, log, fmt.Errorf("syncing the composition cache: %w", err))
	}
	if err := c.store.WaitForCacheSync(ctx); err != nil {
		return stoppedOr(ctx, log, fmt.Errorf("syncing the inventory secret cache: %w", err))
	}
	c.synced.Store(true)
	log.Info("caches synced", "workers", c.s.Workers, "inventoryNamespace", c.s.config.InventoryNamespace)

	if c.s.LeaderElection.Disabled || c.hostElects {
		return c.reconcile(ctx, svc)
	}
	return c.lead(ctx, svc)
}

// stoppedOr is nil when ctx ended the wait (a stop during startup is a clean stop), else err.
func stoppedOr(ctx context.Context, log logr.Logger, err error) error {
	if ctx.Err() != nil {
		log.Info("stopped before the caches synced")
		return nil
	}
	return err
}

// enqueue hands a Composition to the current term's queue. Between terms there is none: a term
// starts by queueing every cached Composition.
// handlerPanicked logs and counts a panic recovered in an informer event handler.
func (c *Controller) handlerPanicked(recovered any, stack []byte) {
	if c.deps.Metrics != nil {
		c.deps.Metrics.Panicked("event-handler")
	}
	c.s.Logger.Error(fmt.Errorf("panic: %v", recovered), "an informer event handler panicked; the event is dropped, the next resync re-delivers it", "stack", string(stack))
}

func (c *Controller) enqueue(ref domain.CompositionRef) {
	c.mu.Lock()
	q := c.queue
	c.mu.Unlock()
	if q != nil {
		q.Add(ref)
	}
}

// reconcile is one term: a fresh queue holding every cached Composition, drained by the
// workers until ctx ends. A queue cannot be restarted once shut down, hence one per term.
func (c *Controller) reconcile(ctx context.Context, svc *app.Service) error {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[domain.CompositionRef](),
		workqueue.TypedRateLimitingQueueConfig[domain.CompositionRef]{Name: "compositions", MetricsProvider: c.queues})
	ctl, err := app.NewController(svc, q, c.s.Workers)
	if err != nil {
		q.ShutDown()
		return err
	}
	c.mu.Lock()
	c.queue = q
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.queue = nil
		c.mu.Unlock()
	}()
	// The informer updates its store before it notifies, so what a handler saw before the queue
	// existed is in this list.
	for _, key := range c.informer.Informer().GetStore().ListKeys() {
		if ns, name, err := cache.SplitMetaNamespaceKey(key); err == nil {
			q.Add(domain.CompositionRef{Namespace: ns, Name: name})
		}
	}
	ctl.Run(ctx)
	return nil
}

// lead campaigns for the Lease and reconciles while holding it, until ctx ends. A lost Lease
// ends the term; then Start returns ErrLeadershipLost (StopOnLoss) or campaigns again.
func (c *Controller) lead(ctx context.Context, svc *app.Service) error {
	log := logr.FromContextOrDiscard(ctx)
	for {
		if err := c.campaign(ctx, svc); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		if c.s.LeaderElection.StopOnLoss {
			return ErrLeadershipLost
		}
		log.Info("lost the Lease; campaigning again", "lease", c.s.LeaderElection.Namespace+"/"+c.s.LeaderElection.Name)
	}
}

// campaign runs one client-go leader election until leadership is lost or ctx ends, and
// returns once the workers of the term, if any, have drained.
func (c *Controller) campaign(ctx context.Context, svc *app.Service) error {
	le := c.s.LeaderElection
	log := logr.FromContextOrDiscard(ctx)

	// The elector runs OnStartedLeading in a goroutine it does not wait for, and releases the
	// Lease as soon as its context ends. So it gets its own context, ended only once the workers
	// have drained: no successor starts while this replica still writes.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	var (
		mu       sync.Mutex
		stopping bool
		leading  sync.WaitGroup
		termErr  error
	)
	drain := func() {
		mu.Lock()
		stopping = true
		mu.Unlock()
		leading.Wait()
	}
	stopOnCancel := context.AfterFunc(ctx, func() { drain(); stopElecting() })
	defer stopOnCancel()

	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
			Client:     c.cp.coordination,
			LockConfig: resourcelock.ResourceLockConfig{Identity: c.identity},
		},
		ReleaseOnCancel: true,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				mu.Lock()
				if stopping {
					mu.Unlock()
					return
				}
				leading.Add(1)
				mu.Unlock()
				defer leading.Done()
				// Workers stop when ctx ends or leadership is lost, whichever comes first.
				runCtx, cancel := context.WithCancel(leaderCtx)
				defer cancel()
				stop := context.AfterFunc(ctx, cancel)
				defer stop()
				log.Info("became leader", "identity", c.identity, "lease", le.Namespace+"/"+le.Name)
				if err := c.reconcile(runCtx, svc); err != nil {
					mu.Lock()
					termErr = err
					mu.Unlock()
				}
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("tombstone recovery: leader election: %w", err)
	}
	elector.Run(electCtx)
	// Leadership lost or ctx ended: wait for the workers before returning.
	drain()
	mu.Lock()
	defer mu.Unlock()
	return termErr
}
