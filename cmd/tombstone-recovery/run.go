package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/adapters/metrics"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

type runOptions struct {
	clusterFlags
	enabled                                   bool
	compositionNamespace, compositionSelector string
	workers                                   int
	leaderElect                               bool
	leaderElectionNamespace, leaderElectionID string
	metricsAddr, healthAddr                   string
	qps                                       float64
	burst                                     int
	resync                                    time.Duration
	logging                                   logOptions
}

func parseRunFlags(args []string, stderr io.Writer) (runOptions, error) {
	var o runOptions
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	// Errors come back to main, which prints them as one line; only -h prints the flags.
	fs.SetOutput(io.Discard)
	o.clusterFlags.bind(fs, clusterFlagHelp{
		kubeconfig:           "kubeconfig of the control plane (default: in-cluster, then $KUBECONFIG)",
		maxChunkBytes:        "largest inventory.json of one chunk Secret",
		maxChunks:            "most chunk Secrets one snapshot may use",
		maxTombstoneFraction: "hold recoveries that would delete more than this fraction of a snapshot for review (1 disables)",
	})
	fs.BoolVar(&o.enabled, "enabled", true, "record and recover; false leaves every Composition alone")
	fs.StringVar(&o.compositionNamespace, "composition-namespace", "", "only Compositions in this namespace (default: all)")
	fs.StringVar(&o.compositionSelector, "composition-label-selector", "", "only Compositions matching this label selector (default: everything)")
	fs.IntVar(&o.workers, "workers", 2, "concurrent reconciles")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader with a Lease before reconciling")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: $POD_NAMESPACE, else kube-system)")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "eno-tombstone-recovery", "name of the leader election Lease")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 disables it")
	fs.Float64Var(&o.qps, "kube-api-qps", 50, "client QPS towards each API server")
	fs.IntVar(&o.burst, "kube-api-burst", 100, "client burst towards each API server")
	fs.DurationVar(&o.resync, "resync-period", 10*time.Minute, "re-deliver every cached Composition this often")
	o.logging.bind(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "usage: tombstone-recovery run [flags]")
			fs.PrintDefaults()
			return o, err
		}
		return o, fmt.Errorf("run: %w", err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("run: unexpected arguments %q", fs.Args())
	}
	if err := o.validate(); err != nil {
		return o, err
	}
	if o.leaderElectionNamespace == "" {
		o.leaderElectionNamespace = os.Getenv("POD_NAMESPACE")
	}
	if o.leaderElectionNamespace == "" {
		o.leaderElectionNamespace = "kube-system"
	}
	return o, nil
}

// validate rejects bad flag values before any cluster is contacted.
func (o runOptions) validate() error {
	if o.workers < 1 {
		return fmt.Errorf("run: --workers must be at least 1, got %d", o.workers)
	}
	if err := o.clusterFlags.check(); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	switch {
	case !(o.qps > 0) || o.burst < 1:
		return fmt.Errorf("run: --kube-api-qps must be positive and --kube-api-burst at least 1, got %g and %d", o.qps, o.burst)
	case o.resync < 0:
		return fmt.Errorf("run: --resync-period must not be negative, got %s", o.resync)
	}
	if _, err := k8s.NewLabelMatcher(o.compositionSelector); err != nil {
		return fmt.Errorf("run: --composition-label-selector: %w", err)
	}
	return nil
}

// loadRESTConfig: an explicit path, else in-cluster, else $KUBECONFIG / ~/.kube/config.
func loadRESTConfig(path string) (*rest.Config, error) {
	if path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	if cfg, err := rest.InClusterConfig(); err == nil {
		return cfg, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}

// checkReachable fails fast with one line when an API server does not answer.
func checkReachable(ctx context.Context, name string, client kubernetes.Interface) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := client.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		return fmt.Errorf("%s is unreachable: %s", name, oneLine(err))
	}
	return nil
}

func runController(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseRunFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log, flush, err := o.logging.build(stderr)
	if err != nil {
		return err
	}
	defer flush()
	ctx = logr.NewContext(ctx, log)

	cpConfig, err := loadRESTConfig(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the control plane kubeconfig: %w", err)
	}
	remoteConfig := cpConfig
	if o.remoteKubeconfig != "" {
		if remoteConfig, err = loadRESTConfig(o.remoteKubeconfig); err != nil {
			return fmt.Errorf("loading the downstream kubeconfig: %w", err)
		}
	}
	for _, c := range []*rest.Config{cpConfig, remoteConfig} {
		c.QPS, c.Burst = float32(o.qps), o.burst
		c.UserAgent = "eno-tombstone-recovery"
	}
	w, err := newWiring(ctx, o, cpConfig, remoteConfig)
	if err != nil {
		return err
	}
	return w.run(ctx)
}

// wiring holds everything `run` builds; nothing starts until run.
type wiring struct {
	opts       runOptions
	cp         kubernetes.Interface
	remote     kubernetes.Interface
	informer   *k8s.CompositionInformer
	store      *k8s.SecretStore
	svc        *app.Service
	queue      workqueue.TypedRateLimitingInterface[domain.CompositionRef]
	registry   *prometheus.Registry
	recorder   *k8s.Recorder
	dynamic    dynamic.Interface
	ready      atomic.Bool
	controller *app.Controller
}

func newWiring(ctx context.Context, o runOptions, cpConfig, remoteConfig *rest.Config) (*wiring, error) {
	w := &wiring{opts: o, registry: prometheus.NewRegistry()}
	var err error
	if w.cp, err = kubernetes.NewForConfig(cpConfig); err != nil {
		return nil, fmt.Errorf("control plane client: %w", err)
	}
	if w.remote, err = kubernetes.NewForConfig(remoteConfig); err != nil {
		return nil, fmt.Errorf("downstream client: %w", err)
	}
	if w.dynamic, err = dynamic.NewForConfig(cpConfig); err != nil {
		return nil, fmt.Errorf("control plane dynamic client: %w", err)
	}
	if err := checkReachable(ctx, "the control plane", w.cp); err != nil {
		return nil, err
	}
	if err := checkReachable(ctx, "the downstream cluster", w.remote); err != nil {
		return nil, err
	}
	matcher, err := k8s.NewLabelMatcher(o.compositionSelector)
	if err != nil {
		return nil, fmt.Errorf("--composition-label-selector: %w", err)
	}
	w.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(w.registry)
	if err != nil {
		return nil, err
	}
	wqp, err := metrics.NewWorkqueueProvider(w.registry)
	if err != nil {
		return nil, err
	}

	w.informer = k8s.NewCompositionInformer(w.dynamic, k8s.CompositionScope{Namespace: o.compositionNamespace, LabelSelector: o.compositionSelector, Resync: o.resync})
	comps, err := k8s.NewCompositions(w.dynamic, w.informer.Lister())
	if err != nil {
		return nil, err
	}
	slices, err := k8s.NewSlices(w.dynamic)
	if err != nil {
		return nil, err
	}
	sink, err := k8s.NewTombstoneSink(w.dynamic)
	if err != nil {
		return nil, err
	}
	if w.store, err = k8s.NewSecretStore(w.remote, o.inventoryNamespace); err != nil {
		return nil, err
	}
	if w.recorder, err = k8s.StartRecorder(ctx, w.cp, ""); err != nil {
		return nil, err
	}
	cfg := app.DefaultConfig()
	cfg.Enabled = o.enabled
	cfg.Scope = domain.Scope{Namespace: o.compositionNamespace, Selector: matcher}
	o.clusterFlags.configure(&cfg)
	if w.svc, err = app.New(cfg, app.Deps{
		Compositions: comps, Guard: comps, Slices: slices, Store: w.store,
		Sink: sink, Decisions: comps, Events: w.recorder, Metrics: m,
	}); err != nil {
		w.recorder.Shutdown()
		return nil, err
	}
	w.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[domain.CompositionRef](),
		workqueue.TypedRateLimitingQueueConfig[domain.CompositionRef]{Name: "compositions", MetricsProvider: wqp})
	if w.controller, err = app.NewController(w.svc, w.queue, o.workers); err != nil {
		w.recorder.Shutdown()
		return nil, err
	}
	if err := w.informer.AddRefHandler(func(r domain.CompositionRef) { w.queue.Add(r) }); err != nil {
		return nil, err
	}
	if err := w.store.AddRefHandler(func(r domain.CompositionRef) { w.queue.Add(r) }); err != nil {
		return nil, err
	}
	return w, nil
}

// run serves probes and metrics, fills the caches, and reconciles (as leader, when elected)
// until ctx is cancelled; then it drains the workers and stops everything it started.
func (w *wiring) run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var bg sync.WaitGroup
	defer bg.Wait()
	defer w.recorder.Shutdown()
	defer w.queue.ShutDown()

	serveErr := make(chan error, 2)
	for _, s := range []struct {
		what, addr string
		handler    http.Handler
	}{{"metrics", w.opts.metricsAddr, promhttp.HandlerFor(w.registry, promhttp.HandlerOpts{})}, {"probes", w.opts.healthAddr, w.probes()}} {
		if s.addr == "0" || s.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			return fmt.Errorf("listening for %s on %s: %w", s.what, s.addr, err)
		}
		srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
		bg.Add(2)
		go func() {
			defer bg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				serveErr <- err
			}
		}()
		go func() {
			defer bg.Done()
			<-ctx.Done()
			shutdownCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
			defer done()
			_ = srv.Shutdown(shutdownCtx)
		}()
		log.Info("serving", "server", s.what, "address", ln.Addr().String())
	}

	w.informer.Start(ctx)
	w.store.Start(ctx)
	bg.Add(1)
	go func() {
		defer bg.Done()
		w.informer.Wait()
		w.store.Wait()
	}()
	if err := w.informer.WaitForCacheSync(ctx); err != nil {
		return stoppedOr(ctx, log, fmt.Errorf("syncing the composition cache: %w", err))
	}
	if err := w.store.WaitForCacheSync(ctx); err != nil {
		return stoppedOr(ctx, log, fmt.Errorf("syncing the inventory secret cache: %w", err))
	}
	w.ready.Store(true)
	log.Info("caches synced", "workers", w.opts.workers, "inventoryNamespace", w.opts.inventoryNamespace)

	lost := make(chan struct{})
	if w.opts.leaderElect {
		w.elect(ctx, lost)
	} else {
		w.controller.Run(ctx)
	}
	select {
	case err := <-serveErr:
		return err
	case <-lost:
		if ctx.Err() == nil {
			return errors.New("lost leadership; exiting so a new leader takes over")
		}
	default:
	}
	log.Info("stopped after draining")
	return nil
}

// stoppedOr is nil when a signal ended the wait (a SIGTERM during startup is a clean stop), else err.
func stoppedOr(ctx context.Context, log logr.Logger, err error) error {
	if ctx.Err() != nil {
		log.Info("stopped before the caches synced")
		return nil
	}
	return err
}

func (w *wiring) elect(ctx context.Context, lost chan struct{}) {
	host, _ := os.Hostname()
	identity := host + "_" + string(uuid.NewUUID())
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: w.opts.leaderElectionNamespace, Name: w.opts.leaderElectionID},
		Client:     w.cp.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	log := logr.FromContextOrDiscard(ctx)

	// The elector runs OnStartedLeading in a goroutine it does not wait for, and releases the
	// Lease as soon as its context ends. So it gets its own context, ended only once the workers
	// have drained: no successor starts while this process still writes, and the process does
	// not exit mid-reconcile.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	var (
		mu       sync.Mutex
		stopping bool
		leading  sync.WaitGroup
	)
	drain := func() {
		mu.Lock()
		stopping = true
		mu.Unlock()
		leading.Wait()
	}
	stopOnSignal := context.AfterFunc(ctx, func() { drain(); stopElecting() })
	defer stopOnSignal()

	leaderelection.RunOrDie(electCtx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		ReleaseOnCancel: true,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		Name:            w.opts.leaderElectionID,
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
				// Workers stop on SIGTERM or when leadership is lost, whichever comes first.
				runCtx, cancel := context.WithCancel(leaderCtx)
				defer cancel()
				stop := context.AfterFunc(ctx, cancel)
				defer stop()
				log.Info("became leader", "identity", identity)
				w.controller.Run(runCtx)
			},
			OnStoppedLeading: func() { close(lost) },
		},
	})
	// Leadership lost: wait for the workers before run returns.
	drain()
}

func (w *wiring) probes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(rw, "ok") })
	mux.HandleFunc("/readyz", func(rw http.ResponseWriter, _ *http.Request) {
		if !w.ready.Load() {
			http.Error(rw, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(rw, "ok")
	})
	return mux
}
