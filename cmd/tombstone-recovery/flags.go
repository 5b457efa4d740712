package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/enocel"
)

// clusterFlags are the flags run and inspect share: the two clusters, the inventory limits and
// whether history may cross namespaces. Both bind them under the same names and defaults and
// refuse bad values with the same one-line errors, before any cluster is contacted.
type clusterFlags struct {
	kubeconfig, remoteKubeconfig string
	inventoryNamespace           string
	maxChunkBytes, maxChunks     int
	maxTombstoneFraction         float64
	allowCrossNamespaceLineage   bool
	enoFieldManagers             domain.EnoManagers
	enoResourceFilters           resourceFilters
	controlPlaneID               string
}

// resourceFilters is a repeated flag: each value one eno-reconciler's --resource-filter,
// compiled as each is given.
type resourceFilters struct {
	exprs  []string
	filter domain.ResourceFilter
}

func (r *resourceFilters) String() string { return strings.Join(r.exprs, " | ") }

func (r *resourceFilters) Set(v string) (err error) {
	r.exprs = append(r.exprs, v)
	r.filter, err = enocel.ResourceFilters(r.exprs)
	return err
}

// clusterFlagHelp is the help text of the flags whose meaning differs between the commands.
type clusterFlagHelp struct {
	kubeconfig, maxChunkBytes, maxChunks, maxTombstoneFraction string
}

func (f *clusterFlags) bind(fs *flag.FlagSet, help clusterFlagHelp) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", help.kubeconfig)
	fs.StringVar(&f.remoteKubeconfig, "remote-kubeconfig", "", "kubeconfig of the downstream cluster that holds the inventory (default: the control plane)")
	fs.StringVar(&f.inventoryNamespace, "inventory-namespace", domain.DefaultInventoryNamespace, "downstream namespace of the inventory Secrets")
	fs.IntVar(&f.maxChunkBytes, "max-chunk-bytes", domain.DefaultMaxChunkBytes, help.maxChunkBytes)
	fs.IntVar(&f.maxChunks, "max-chunks", domain.DefaultMaxChunks, help.maxChunks)
	fs.Float64Var(&f.maxTombstoneFraction, "max-tombstone-fraction", domain.DefaultMaxTombstoneFraction, help.maxTombstoneFraction)
	fs.BoolVar(&f.allowCrossNamespaceLineage, "allow-cross-namespace-lineage", false,
		"let a Composition with no history of its own adopt its lineage's history from another namespace, and record over it once its Composition is gone; off, a lineage override never reaches into another namespace")
	fs.Var(&f.enoFieldManagers, "eno-field-managers",
		"comma-separated field managers eno-reconciler writes downstream objects with (Eno v0.2.17: eno,eno-reconciler); an object any other manager manages is kept")
	fs.Var(&f.enoResourceFilters, "eno-resource-filter",
		"the --resource-filter of an eno-reconciler in use, once per reconciler (\"\" for one without); an object none loads is kept (default: every reconciler loads everything)")
	bindControlPlaneID(fs, &f.controlPlaneID)
}

// parseFlags parses args into fs. Errors come back to main, which prints them as one line; only
// -h prints, help and then the flags, on stderr.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer, help string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stderr)
		fmt.Fprint(stderr, help)
		fs.PrintDefaults()
	}
	return err
}

// bindControlPlaneID binds --control-plane-id, for every command that reads or writes history.
func bindControlPlaneID(fs *flag.FlagSet, dst *string) {
	fs.StringVar(dst, "control-plane-id", "", "the name of this control plane's inventory history (default: the UID of its kube-system Namespace); set a rebuilt control plane's to its predecessor's")
}

// check applies app.Config.Validate's rules before any cluster is contacted, naming the flag.
func (f clusterFlags) check() error {
	cfg := app.DefaultConfig()
	f.configure(&cfg)
	return checkConfig(cfg)
}

// checkConfig is cfg.Validate's refusal naming the flag, or a bad --inventory-namespace.
func checkConfig(cfg app.Config) error {
	var se *app.SettingError
	if err := cfg.Validate(); errors.As(err, &se) {
		return errors.New(se.Named("--" + se.Setting.Flag()))
	} else if err != nil {
		return err
	}
	return checkName("--inventory-namespace", cfg.InventoryNamespace, validation.IsDNS1123Label)
}

// checkName refuses a non-empty value that is not a valid name of its kind.
func checkName(flag, v string, valid func(string) []string) error {
	if v == "" {
		return nil
	}
	if errs := valid(v); len(errs) > 0 {
		return fmt.Errorf("%s %q is not a valid name: %s", flag, v, strings.Join(errs, "; "))
	}
	return nil
}

// warnMissingNamespace prints one line on stderr when namespace ns does not exist on the
// cluster of cfg. A read that fails otherwise (Forbidden, say) says nothing and warns of nothing.
func warnMissingNamespace(ctx context.Context, stderr io.Writer, cfg *rest.Config, where, flag, ns string) {
	if ns != "" && namespaceMissing(ctx, cfg, ns) {
		fmt.Fprintf(stderr, "warning: namespace %s (%s) does not exist in %s\n", ns, flag, where)
	}
}

func namespaceMissing(ctx context.Context, cfg *rest.Config, ns string) bool {
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return false
	}
	_, err = core.Namespaces().Get(ctx, ns, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

// configure sets the inventory namespace, the limits and the adoption across namespaces of cfg.
func (f clusterFlags) configure(cfg *app.Config) {
	cfg.InventoryNamespace = f.inventoryNamespace
	cfg.MaxChunkBytes = f.maxChunkBytes
	cfg.MaxChunks = f.maxChunks
	cfg.MaxTombstoneFraction = f.maxTombstoneFraction
	cfg.AllowCrossNamespaceLineage = f.allowCrossNamespaceLineage
	cfg.EnoManagers = f.enoFieldManagers
	cfg.ResourceFilter = f.enoResourceFilters.filter
	cfg.ControlPlane = f.controlPlaneID
}

// controlPlaneID is id when given, else the UID of the kube-system Namespace of the control
// plane of cfg (design §3).
func controlPlaneID(ctx context.Context, cfg *rest.Config, id string) (string, error) {
	if id != "" {
		return id, nil
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("control plane metadata client: %w", err)
	}
	return k8s.ControlPlaneID(ctx, meta)
}
