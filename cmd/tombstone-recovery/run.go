package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/internal/buildinfo"
	"github.com/Azure/eno-tombstone-recovery/runnable"
)

type runOptions struct {
	clusterFlags
	controller                                runnable.Options // the flags below, and clusterFlags once checked
	compositionSelector                       string
	leaderElect                               bool
	leaderElectionNamespace, leaderElectionID string
	metricsAddr, healthAddr                   string
	qps                                       float64
	logging                                   logOptions
}

func parseRunFlags(args []string, stderr io.Writer) (runOptions, error) {
	o := runOptions{controller: runnable.DefaultOptions()}
	c := &o.controller
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	o.clusterFlags.bind(fs, clusterFlagHelp{
		kubeconfig:           "kubeconfig of the control plane (default: in-cluster, then $KUBECONFIG)",
		maxChunkBytes:        "largest inventory.json of one chunk Secret",
		maxChunks:            "most chunk Secrets one snapshot may use",
		maxTombstoneFraction: "hold recoveries that would delete more than this fraction of a snapshot for review (1 disables the guard, 0 reviews every recovery)",
	})
	fs.BoolVar(&c.Enabled, "enabled", true, "record and recover; false leaves every Composition alone")
	fs.StringVar(&c.Scope.Namespace, "composition-namespace", "", "only Compositions in this namespace (default: all)")
	fs.StringVar(&o.compositionSelector, "composition-label-selector", "", "only Compositions matching this label selector (default: everything)")
	fs.IntVar(&c.Workers, "workers", c.Workers, "concurrent reconciles")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader with a Lease before reconciling")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: $POD_NAMESPACE, else kube-system)")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "", "name of the leader election Lease; each shard (--composition-namespace, --composition-label-selector) elects its own (default: eno-tombstone-recovery, plus a hash of the shard when one is set)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 disables it")
	fs.Float64Var(&o.qps, "kube-api-qps", 50, "client QPS towards each API server")
	fs.IntVar(&c.Burst, "kube-api-burst", 100, "client burst towards each API server")
	fs.DurationVar(&c.ResyncPeriod, "resync-period", c.ResyncPeriod, "re-deliver every cached Composition this often")
	fs.DurationVar(&c.ReconcileTimeout, "reconcile-timeout", c.ReconcileTimeout,
		"cancel a reconcile that takes longer than this and retry it with backoff")
	fs.DurationVar(&c.PendingRecheckInterval, "pending-recheck-interval", c.PendingRecheckInterval,
		"check a hand-off that Eno has not carried yet this often, disarming it when another Composition produces one of its tombstones (at least 1s)")
	o.logging.bind(fs)
	if err := parseFlags(fs, args, stderr, "usage: tombstone-recovery run [flags]\n\nExit codes: 0 on SIGTERM or SIGINT once drained; 1 bad flags, an unreachable cluster or lost leadership (one line on stderr).\n\nflags:\n"); err != nil {
		return o, fmt.Errorf("run: %w", err) // -h: main's unlessHelp sees flag.ErrHelp through the wrap
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("run: unexpected arguments %q", fs.Args())
	}
	o.configure(&c.Config)
	c.QPS = float32(o.qps)
	if err := o.validate(); err != nil {
		return o, err
	}
	o.leaderElectionNamespace = cmp.Or(o.leaderElectionNamespace, os.Getenv("POD_NAMESPACE"), "kube-system")
	return o, nil
}

// validate rejects bad flag values before any cluster is contacted.
func (o runOptions) validate() error {
	c := o.controller
	if c.Workers < 1 {
		return fmt.Errorf("run: --workers must be at least 1, got %d", c.Workers)
	}
	if err := checkConfig(c.Config); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	switch {
	case !(o.qps > 0) || c.Burst < 1:
		return fmt.Errorf("run: --kube-api-qps must be positive and --kube-api-burst at least 1, got %g and %d", o.qps, c.Burst)
	case c.ResyncPeriod <= 0:
		return fmt.Errorf("run: --resync-period must be positive, got %s", c.ResyncPeriod)
	}
	if err := errors.Join(checkName("--composition-namespace", c.Scope.Namespace, validation.IsDNS1123Label),
		checkName("--leader-election-namespace", o.leaderElectionNamespace, validation.IsDNS1123Label),
		checkName("--leader-election-id", o.leaderElectionID, validation.IsDNS1123Subdomain)); err != nil {
		return fmt.Errorf("run: %w", err)
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

// checkReachable fails fast with one line when the API server of cfg does not answer.
func checkReachable(ctx context.Context, name string, cfg *rest.Config) error {
	client, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s client: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := client.RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		return fmt.Errorf("%s is unreachable: %s", name, oneLine(err))
	}
	return nil
}

// runController parses the flags, checks both clusters answer, and runs a controller-runtime
// manager with the controller, leader election, probes and metrics until ctx is cancelled.
func runController(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseRunFlags(args, stderr)
	if err != nil {
		return unlessHelp(err)
	}
	log, flush, err := o.logging.build(stderr)
	if err != nil {
		return err
	}
	defer flush()
	defaultMemory(os.LookupEnv)
	routeClientGoLogs(log)
	ctrllog.SetLogger(log)
	ctx = logr.NewContext(ctx, log)

	// The control plane's and the downstream cluster's configuration (the control plane's when
	// no downstream kubeconfig is given); each must answer.
	cpConfig, err := loadRESTConfig(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the control plane kubeconfig: %w", err)
	}
	remoteConfig := cpConfig
	if o.remoteKubeconfig != "" {
		if _, err := os.Stat(o.remoteKubeconfig); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("the downstream kubeconfig %s does not exist: create the Secret it is mounted from (README, Install), or drop --remote-kubeconfig for one cluster", o.remoteKubeconfig)
		}
		if remoteConfig, err = loadRESTConfig(o.remoteKubeconfig); err != nil {
			return fmt.Errorf("loading the downstream kubeconfig: %w", err)
		}
	}
	if err := checkReachable(ctx, "the control plane", cpConfig); err != nil {
		return err
	}
	if err := checkReachable(ctx, "the downstream cluster", remoteConfig); err != nil {
		return err
	}
	if namespaceMissing(ctx, remoteConfig, o.inventoryNamespace) {
		return fmt.Errorf("run: --inventory-namespace %s does not exist in the downstream cluster: create it, or pass the namespace of the inventory", o.inventoryNamespace)
	}
	selector, _ := labels.Parse(o.compositionSelector) // validate refused one that does not parse
	// controller-runtime would fail a busy port only once the manager starts, among other logs.
	for _, s := range []struct{ what, addr string }{{"metrics", o.metricsAddr}, {"probes", o.healthAddr}} {
		if s.addr == "" || s.addr == "0" { // no server
			continue
		}
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			return fmt.Errorf("listening for %s on %s: %w", s.what, s.addr, err)
		}
		ln.Close()
	}
	leaseName := cmp.Or(o.leaderElectionID, runnable.DefaultLeaseName(o.controller.Scope.Namespace, selector))
	log.Info("starting", o.startupValues(leaseName)...)
	mgr, err := ctrl.NewManager(cpConfig, ctrl.Options{
		Logger:                        log,
		Metrics:                       metricsserver.Options{BindAddress: cmp.Or(o.metricsAddr, "0")}, // "0" disables a server, as "" does
		HealthProbeBindAddress:        cmp.Or(o.healthAddr, "0"),
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              leaseName,
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		BaseContext:                   func() context.Context { return logr.NewContext(context.Background(), log) },
	})
	if err != nil {
		return fmt.Errorf("run: building the manager: %w", err)
	}
	c := o.controller
	c.CompositionSelector, c.HostElects, c.EveryReplica = selector, o.leaderElect, !o.leaderElect
	c.Logger, c.Registerer = log, ctrlmetrics.Registry
	guest, err := runnable.SetupWithManager(mgr, remoteConfig, c)
	if err != nil {
		return err
	}
	if err := errors.Join(mgr.AddHealthzCheck("ping", healthz.Ping), mgr.AddReadyzCheck("tombstone-recovery", guest.ReadyzCheck)); err != nil {
		return err
	}
	// A lost Lease ends the manager with an error, so that the process exits and restarts clean
	// while a new leader takes over.
	if err := mgr.Start(ctx); err != nil {
		if ctx.Err() == nil && strings.Contains(err.Error(), "leader election lost") {
			return errors.New("lost leadership; exiting so a new leader takes over")
		}
		return err
	}
	log.Info("stopped after draining")
	return nil
}

// gcPercent is run's GOGC when the environment sets none: the heap a fleet keeps is small next to
// what a recording allocates, so GOGC=100's headroom is much of the peak (BENCHMARKS.md, Scale).
const gcPercent = 50

// defaultMemory sets gcPercent unless GOGC is set, and stops the heap profile unless GODEBUG sets
// memprofilerate. run serves no profile (pprof stays off), yet each sample unwound its
// goroutine's stack and kept it for the life of the process.
func defaultMemory(lookupEnv func(string) (string, bool)) {
	if _, set := lookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	if godebug, _ := lookupEnv("GODEBUG"); !strings.Contains(godebug, "memprofilerate=") {
		runtime.MemProfileRate = 0
	}
}

// startupValues are the build and the effective settings, logged once at start.
func (o runOptions) startupValues(leaseName string) []any {
	info, c := buildinfo.Read(), o.controller
	return []any{"version", info.Version, "revision", info.Revision, "enabled", c.Enabled,
		"compositionNamespace", c.Scope.Namespace, "compositionLabelSelector", o.compositionSelector,
		"inventoryNamespace", c.InventoryNamespace, "maxChunkBytes", c.MaxChunkBytes, "maxChunks", c.MaxChunks,
		"maxTombstoneFraction", c.MaxTombstoneFraction, "allowCrossNamespaceLineage", c.AllowCrossNamespaceLineage,
		"workers", c.Workers, "resyncPeriod", c.ResyncPeriod.String(), "reconcileTimeout", c.ReconcileTimeout.String(),
		"pendingRecheckInterval", c.PendingRecheckInterval.String(), "leaderElect", o.leaderElect,
		"leaderElectionNamespace", o.leaderElectionNamespace, "leaderElectionID", leaseName,
		"remoteKubeconfig", o.remoteKubeconfig != ""}
}
