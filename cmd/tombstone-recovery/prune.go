package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// prune is inventory retention, run by an operator with their own credentials: the only command
// that deletes, and only with --confirm (design §7). The controller never builds its wiring.

const pruneUserAgent = "eno-tombstone-recovery-prune"

type pruneOptions struct {
	kubeconfig, remoteKubeconfig, inventoryNamespace, output, controlPlaneID string
	olderThan                                                                time.Duration
	maxChunks                                                                int
	confirm                                                                  bool
}

func parsePruneFlags(args []string, stderr io.Writer) (pruneOptions, error) {
	var o pruneOptions
	fs := flag.NewFlagSet("prune", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the control plane whose Compositions decide what is gone (default: in-cluster, then $KUBECONFIG)")
	fs.StringVar(&o.remoteKubeconfig, "remote-kubeconfig", "", "kubeconfig of the downstream cluster that holds the inventory (default: the control plane)")
	fs.StringVar(&o.inventoryNamespace, "inventory-namespace", domain.DefaultInventoryNamespace, "downstream namespace of the inventory Secrets")
	fs.DurationVar(&o.olderThan, "older-than", app.DefaultPruneOlderThan, "a lineage none of whose Compositions exists is deleted only when its newest write is older than this")
	fs.IntVar(&o.maxChunks, "max-chunks", domain.DefaultMaxChunks, "most chunk Secrets one snapshot may use, as the controller's --max-chunks")
	fs.BoolVar(&o.confirm, "confirm", false, "delete what is listed (default: a dry run that deletes nothing)")
	fs.StringVar(&o.output, "o", "table", "output format: table or json")
	bindControlPlaneID(fs, &o.controlPlaneID)
	err := parseFlags(fs, args, stderr, pruneHelp)
	if err == nil {
		err = o.validate(fs.Args())
	}
	return o, wrapIf("prune", err)
}

const pruneHelp = `usage: tombstone-recovery prune --kubeconfig CP --remote-kubeconfig DOWNSTREAM [--confirm] [flags]

Lists the inventory Secrets nothing will read again: (a) chunks left over by a newer complete
snapshot, (b) every Secret of a lineage none of whose Compositions exists (refused when no
lineage has a living Composition on the given control plane), (c) format-1 Secrets superseded
by a newer snapshot; only Secrets the given control plane wrote, or that name none while no
other control plane's share their lineage. Never the newest complete snapshot of a lineage with a living Composition,
a Secret not ours, or anything of a lineage whose hand-off is pending or held for review.
Dry run by default; --confirm deletes, each Secret checked again just before. Run it with your
own credentials: the controller cannot delete Secrets.

Exit codes: 0 listed (and, with --confirm, deleted); 1 bad flags, an unreachable cluster, a
refusal or a failed read or delete (one line on stderr).

flags:
`

func (o pruneOptions) validate(rest []string) error {
	switch {
	case len(rest) > 0:
		return fmt.Errorf("unexpected arguments %q", rest)
	case o.inventoryNamespace == "":
		return errors.New("--inventory-namespace must not be empty")
	case o.olderThan <= 0:
		return fmt.Errorf("--older-than must be positive, got %s", o.olderThan)
	case o.maxChunks < 1:
		return fmt.Errorf("--max-chunks must be at least 1, got %d", o.maxChunks)
	case o.output != "table" && o.output != "json":
		return fmt.Errorf("-o must be table or json, got %q", o.output)
	case o.controlPlaneID != "" && domain.ValidControlPlane(o.controlPlaneID) != nil:
		return fmt.Errorf("--control-plane-id: %w", domain.ValidControlPlane(o.controlPlaneID))
	}
	return nil
}

// pruner runs `prune`. Tests set wrap to observe requests, now to fix the clock, and between to
// act after the plan and before the deletes.
type pruner struct {
	now     func() time.Time
	wrap    func(http.RoundTripper) http.RoundTripper
	between func()
}

func (pr pruner) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parsePruneFlags(args, stderr)
	if err != nil {
		return unlessHelp(err)
	}
	uc, err := pr.wire(ctx, o, stderr)
	if err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	report, sel, err := uc.Plan(ctx)
	if err != nil {
		return fmt.Errorf("prune: reading the clusters, nothing was deleted: %w%s", err, forbiddenHint(err, o.inventoryNamespace))
	}
	var confirmErr error
	if o.confirm {
		if pr.between != nil {
			pr.between()
		}
		confirmErr = uc.Confirm(ctx, sel, report)
	}
	err = writeReport(stdout, o.output, report, writePruneTable)
	if confirmErr != nil {
		return fmt.Errorf("prune: %w%s", confirmErr, forbiddenHint(confirmErr, o.inventoryNamespace))
	}
	return err
}

// forbiddenHint says whose permission a forbidden delete lacked.
func forbiddenHint(err error, namespace string) string {
	if !errors.Is(err, ports.ErrForbidden) {
		return ""
	}
	return fmt.Sprintf(" (prune runs with your own credentials, never the controller's: they need list and delete on secrets in %s downstream, and get and list on Compositions in every namespace of the control plane, and get on its kube-system Namespace)", namespace)
}

// wire builds app.Pruner over the two clusters, each checked reachable first.
func (pr pruner) wire(ctx context.Context, o pruneOptions, stderr io.Writer) (*app.Pruner, error) {
	cp, remote, err := loadConfigs(o.kubeconfig, o.remoteKubeconfig, true, pruneUserAgent, pr.wrap)
	if err != nil {
		return nil, err
	}
	if err := checkReachable(ctx, "the control plane", cp); err != nil {
		return nil, err
	}
	if err := checkReachable(ctx, "the downstream cluster", remote); err != nil {
		return nil, err
	}
	warnMissingNamespace(ctx, stderr, remote, "the downstream cluster", "--inventory-namespace", o.inventoryNamespace)
	comps, err := liveCompositions(cp)
	if err != nil {
		return nil, err
	}
	core, err := corev1client.NewForConfig(remote)
	if err != nil {
		return nil, fmt.Errorf("downstream client: %w", err)
	}
	inventory, err1 := k8s.NewInventoryPruner(core, o.inventoryNamespace)
	id, err2 := controlPlaneID(ctx, cp, o.controlPlaneID)
	if err := cmp.Or(err1, err2); err != nil {
		return nil, err
	}
	return app.NewPruner(app.PruneConfig{InventoryNamespace: o.inventoryNamespace, ControlPlane: id, OlderThan: o.olderThan, MaxChunks: o.maxChunks, Now: pr.now},
		app.PruneDeps{Compositions: comps, Lister: comps, Inventory: inventory})
}

// writePruneTable renders the report for people; values read from the clusters pass through
// clean.
func writePruneTable(w io.Writer, r *app.PruneReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	mode := "DRY RUN: nothing is deleted; pass --confirm to delete"
	if r.Confirmed {
		mode = "CONFIRMED: each Secret checked again and deleted with UID and resourceVersion preconditions"
	}
	p("PRUNE of inventory namespace %s (downstream) at %s, gone lineages older than %s. %s", clean(r.InventoryNamespace), r.PrunedAt.Format(time.RFC3339), r.OlderThan, mode)
	if r.GoneRefused != "" {
		p("(b) REFUSED: %s", r.GoneRefused)
	}
	p("\nSECRETS (%d)", r.Total)
	p("SECRET\tLINEAGE\tREASON\tRESULT\tWHY")
	for _, s := range r.Secrets {
		result := s.Result
		if s.SkipReason != "" {
			result += ": " + clean(s.SkipReason)
		}
		p("%s\t%s\t%s\t%s\t%s", clean(s.Name), clean(s.Lineage), s.Reason, result, clean(s.Detail))
	}
	if len(r.Kept) > 0 {
		p("\nKEPT (%d)", len(r.Kept))
		for _, k := range r.Kept {
			p("%s\t%s", clean(k.Lineage), clean(k.Why))
		}
	}
	if r.Confirmed {
		p("\nTOTAL: %d selected, %d deleted, %d skipped", r.Total, r.Deleted, r.Skipped)
	} else {
		p("\nTOTAL: %d Secret(s) would be deleted", r.Total)
	}
	return wrapIf("prune: writing the report", tw.Flush())
}
