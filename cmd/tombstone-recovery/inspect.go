package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// inspect parses its flags, wires app.Inspector to the clusters and renders its report. The use
// case is read-only by construction: it is handed only readers.

const (
	inspectUserAgent = "eno-tombstone-recovery-inspect"
	// inspectRequestTimeout bounds each API request so a hung server fails the command.
	inspectRequestTimeout = 30 * time.Second
)

// inspectOptions are the flags of `inspect`.
type inspectOptions struct {
	clusterFlags
	composition, lineage, output string
	target                       app.InspectTarget // parsed from --composition or --lineage
	// all is --all: the fleet view, of the Compositions in scope.
	all                                       bool
	compositionNamespace, compositionSelector string
	scope                                     domain.Scope // parsed from the two above
	pendingLong                               time.Duration
}

const inspectHelp = `usage: tombstone-recovery inspect (--composition NAMESPACE/NAME | --lineage L | --all) [flags]

Prints every inventory snapshot of the lineage, its chunk Secrets and sizes against the limit,
whether the history can be trusted and which snapshot recovery would read from, and, given the
control plane, a dry run of recovery. With --all, prints one row per Composition in scope, those
that need a person first. It never writes.

Exit codes: 0 printed (with --all: no row needs a person); 3 with --all, the report is printed and
some row needs a person; 1 bad flags, an unreachable cluster or a failed read.

flags:
`

func parseInspectFlags(args []string, stderr io.Writer) (inspectOptions, error) {
	var o inspectOptions
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.StringVar(&o.composition, "composition", "", "inspect this Composition's lineage (resolves its lineage override on the control plane) and dry-run its recovery")
	fs.StringVar(&o.lineage, "lineage", "", "inspect this lineage directly")
	fs.BoolVar(&o.target.Entries, "entries", false, "list every entry the selected snapshot recorded (not with --all)")
	fs.BoolVar(&o.all, "all", false, "the fleet view: one row per Composition in scope (--composition-namespace, --composition-label-selector), those that need a person first")
	fs.StringVar(&o.compositionNamespace, "composition-namespace", "", "with --all: only Compositions in this namespace (default: all)")
	fs.StringVar(&o.compositionSelector, "composition-label-selector", "", "with --all: only Compositions matching this label selector (default: everything)")
	fs.DurationVar(&o.pendingLong, "handoff-pending-long", app.DefaultHandoffPendingLong, "with --all: a hand-off pending this long needs a person")
	o.clusterFlags.bind(fs, clusterFlagHelp{
		kubeconfig:           "kubeconfig of the control plane; used with --composition (default: in-cluster, then $KUBECONFIG) or when given",
		maxChunkBytes:        "the chunk size limit the sizes are compared against",
		maxChunks:            "most chunk Secrets one snapshot may use (a history with more is not trusted)",
		maxTombstoneFraction: "deletion guard of the dry run (1 disables)",
	})
	fs.StringVar(&o.output, "o", "table", "output format: table or json")
	err := parseFlags(fs, args, stderr, inspectHelp)
	if err == nil {
		err = o.validate(fs.Args())
	}
	return o, wrapIf("inspect", err)
}

func (o *inspectOptions) validate(rest []string) error {
	switch {
	case len(rest) > 0:
		return fmt.Errorf("unexpected arguments %q", rest)
	case o.composition == "" && o.lineage == "" && !o.all:
		return errors.New("pass --composition NAMESPACE/NAME, --lineage L or --all")
	case o.composition != "" && o.lineage != "",
		o.all && (o.composition != "" || o.lineage != ""):
		return errors.New("pass one of --composition, --lineage and --all")
	case o.all && o.target.Entries:
		return errors.New("--entries goes with --composition or --lineage")
	case !o.all && (o.compositionNamespace != "" || o.compositionSelector != ""):
		return errors.New("--composition-namespace and --composition-label-selector go with --all")
	case checkName("--composition-namespace", o.compositionNamespace, validation.IsDNS1123Label) != nil:
		return checkName("--composition-namespace", o.compositionNamespace, validation.IsDNS1123Label)
	case o.pendingLong <= 0:
		return fmt.Errorf("--handoff-pending-long must be positive, got %s", o.pendingLong)
	case o.output != "table" && o.output != "json":
		return fmt.Errorf("-o must be table or json, got %q", o.output)
	}
	if err := o.clusterFlags.check(); err != nil {
		return err
	}
	if o.all {
		sel, err := k8s.NewLabelMatcher(o.compositionSelector)
		o.scope = domain.Scope{Namespace: o.compositionNamespace, Selector: sel}
		return wrapIf("--composition-label-selector", err)
	}
	if o.lineage != "" {
		l, err := domain.NewLineage(o.lineage)
		o.target.Lineage = l
		return wrapIf("--lineage", err)
	}
	ref, err := domain.ParseCompositionRef(o.composition)
	o.target.Composition = &ref
	return wrapIf("--composition", err)
}

// wrapIf prefixes a non-nil err with what.
func wrapIf(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// inspector runs `inspect`. Tests set wrap to observe every request and now to fix the clock.
type inspector struct {
	now  func() time.Time
	wrap func(http.RoundTripper) http.RoundTripper
}

func (in inspector) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseInspectFlags(args, stderr)
	if err != nil {
		return unlessHelp(err)
	}
	// --composition needs the control plane to resolve the lineage; --kubeconfig names it.
	withCP := o.target.Composition != nil || o.all || o.kubeconfig != ""
	cp, remote, err := loadConfigs(o.kubeconfig, o.remoteKubeconfig, withCP, inspectUserAgent, in.wrap)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup // the fleet index
	defer func() { cancel(); running.Wait() }()
	inspector, err := in.inspector(ctx, o, cp, remote, &running)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	warnMissingNamespace(ctx, stderr, remote, "the downstream cluster", "--inventory-namespace", o.inventoryNamespace)
	if o.all {
		warnMissingNamespace(ctx, stderr, cp, "the control plane", "--composition-namespace", o.compositionNamespace)
		fleet, err := inspector.InspectAll(ctx, o.pendingLong)
		if err != nil {
			return fmt.Errorf("inspect: %w", err)
		}
		err = writeReport(stdout, o.output, fleet, writeFleetTable)
		n := 0 // the rows that need a person
		for _, row := range fleet.Rows {
			if len(row.Attention) > 0 {
				n++
			}
		}
		if err == nil && n > 0 {
			err = exitCode{exitNeedsPerson, fmt.Sprintf("inspect: %d of %d Compositions need a person", n, len(fleet.Rows))}
		}
		return err
	}
	report, err := in.inspect(ctx, o, inspector)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	return writeReport(stdout, o.output, report, writeInspectTable)
}

// loadConfigs returns the control plane's config (nil unless withCP) and the downstream's: of
// remoteKubeconfig, else the control plane's, else the default one. Requests carry agent, pass
// through wrap when set, and end after inspectRequestTimeout unless a kubeconfig sets a timeout.
func loadConfigs(kubeconfig, remoteKubeconfig string, withCP bool, agent string, wrap func(http.RoundTripper) http.RoundTripper) (cp, remote *rest.Config, err error) {
	if withCP {
		if cp, err = loadRESTConfig(kubeconfig); err != nil {
			return nil, nil, fmt.Errorf("loading the control plane kubeconfig: %w", err)
		}
	}
	switch {
	case remoteKubeconfig != "":
		if remote, err = loadRESTConfig(remoteKubeconfig); err != nil {
			return nil, nil, fmt.Errorf("loading the downstream kubeconfig: %w", err)
		}
	case cp != nil:
		remote = rest.CopyConfig(cp)
	default:
		if remote, err = loadRESTConfig(""); err != nil {
			return nil, nil, fmt.Errorf("loading the downstream kubeconfig (pass --remote-kubeconfig): %w", err)
		}
	}
	for _, c := range []*rest.Config{cp, remote} {
		if c != nil {
			c.UserAgent, c.Timeout = agent, cmp.Or(c.Timeout, inspectRequestTimeout)
			if wrap != nil {
				c.Wrap(wrap)
			}
		}
	}
	return cp, remote, nil
}

// inspector builds app.Inspector over the clusters. Every read but the fleet index's goes to
// the API server: no cache, no lister.
func (in inspector) inspector(ctx context.Context, o inspectOptions, cpConfig, remoteConfig *rest.Config, running *sync.WaitGroup) (*app.Inspector, error) {
	// The four clients share one config: the first to fail (the core one) says why.
	remoteCore, err1 := corev1client.NewForConfig(remoteConfig)
	remoteDiscovery, err2 := discovery.NewDiscoveryClientForConfig(remoteConfig)
	meta, err3 := metadata.NewForConfig(remoteConfig)
	full, err4 := dynamic.NewForConfig(remoteConfig)
	if err := cmp.Or(err1, err2, err3, err4); err != nil {
		return nil, fmt.Errorf("downstream client: %w", err)
	}
	var deps app.InspectDeps
	if cpConfig != nil {
		if err := checkReachable(ctx, "the control plane", cpConfig); err != nil {
			return nil, err
		}
		dyn, err := dynamic.NewForConfig(cpConfig)
		if err != nil {
			return nil, fmt.Errorf("control plane dynamic client: %w", err)
		}
		comps, err1 := k8s.NewCompositions(dyn, nil)
		slices, err2 := k8s.NewSlices(dyn)
		fleet, err3 := k8s.NewFleetIndex(dyn)
		if err := cmp.Or(err1, err2, err3); err != nil {
			return nil, err
		}
		deps.Compositions, deps.Lister, deps.Slices = comps, comps, slices
		// The fleet index runs until ctx ends, once it has listed every slice and Composition.
		running.Go(func() { fleet.Run(ctx) })
		if !fleet.WaitForCacheSync(ctx) {
			return nil, fmt.Errorf("listing every resource slice and composition: %w", context.Cause(ctx))
		}
		deps.Fleet = fleet
	}
	if cpConfig == nil || o.remoteKubeconfig != "" {
		if err := checkReachable(ctx, "the downstream cluster", remoteConfig); err != nil {
			return nil, err
		}
	}
	var err error
	if deps.Secrets, err = k8s.NewSecretStore(remoteCore, nil, o.inventoryNamespace); err != nil {
		return nil, err
	}
	if deps.Downstream, err = k8s.NewDownstreamObjects(meta, full, remoteDiscovery); err != nil {
		return nil, err
	}
	cfg := app.DefaultConfig()
	o.clusterFlags.configure(&cfg)
	if cpConfig != nil {
		if cfg.ControlPlane, err = controlPlaneID(ctx, cpConfig, cfg.ControlPlane); err != nil {
			return nil, err
		}
	}
	cfg.Now = in.now
	if o.all {
		cfg.Scope = o.scope
	}
	return app.NewInspector(cfg, deps)
}

// inspect runs inspector on --composition or --lineage.
func (in inspector) inspect(ctx context.Context, o inspectOptions, inspector *app.Inspector) (*app.InspectReport, error) {
	report, err := inspector.Inspect(ctx, o.target)
	if ref := o.target.Composition; ref != nil && errors.Is(err, ports.ErrNotFound) {
		return nil, fmt.Errorf("composition %s does not exist on the control plane; without it its lineage override is unknown: "+
			"inspect the lineage with --lineage (without an override it is %s)", ref, domain.DefaultLineage(ref.Namespace, ref.Name))
	}
	return report, err
}
