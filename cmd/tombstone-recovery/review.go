package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"

	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// approve and reject answer a recovery held for review (design §6.1) with the operator's own
// credentials: they show the plan, ask, and write the review annotation for the current
// synthesis, guarded by the resourceVersion of the Composition read before the plan was shown.

type reviewOptions struct {
	clusterFlags
	ref domain.CompositionRef
	yes bool
}

func parseReviewFlags(verb string, args []string, stderr io.Writer) (reviewOptions, error) {
	var o reviewOptions
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.BoolVar(&o.yes, "yes", false, "write without asking")
	o.clusterFlags.bind(fs, clusterFlagHelp{
		kubeconfig:           "kubeconfig of the control plane, with your own credentials (default: in-cluster, then $KUBECONFIG)",
		maxChunkBytes:        "the chunk size limit, as the controller's",
		maxChunks:            "most chunk Secrets one snapshot may use, as the controller's",
		maxTombstoneFraction: "deletion guard of the plan shown, as the controller's",
	})
	// NAMESPACE/NAME may stand before, between or after the flags.
	help := reviewHelp
	if verb == "dismiss" {
		help = dismissHelp
	}
	help = fmt.Sprintf(help, verb, domain.AnnotationReview, domain.AnnotationUnresolvedDismissed)
	var names []string
	for {
		if err := parseFlags(fs, args, stderr, help); err != nil {
			return o, wrapIf(verb, err)
		}
		if fs.NArg() == 0 {
			break
		}
		names, args = append(names, fs.Arg(0)), fs.Args()[1:]
	}
	if len(names) != 1 {
		return o, fmt.Errorf("%s: pass one NAMESPACE/NAME, got %q", verb, names)
	}
	ref, err := domain.ParseCompositionRef(names[0])
	o.ref = ref
	return o, wrapIf(verb, errors.Join(err, o.clusterFlags.check()))
}

const reviewHelp = `usage: tombstone-recovery %[1]s NAMESPACE/NAME [--yes] [flags]

Answers the recovery held for review on the Composition's current synthesis: shows the plan
(what approval would delete, and why each other object is kept), asks unless --yes, then sets
%[2]s to %[1]s:<synthesisUUID>, refused if the Composition changed since it was read. Run it with
your own credentials: the controller cannot write this annotation.

Exit codes: 0 written; 1 nothing written (nothing held, the synthesis moved on, already reviewed,
not confirmed, the Composition changed, bad flags or an unreachable cluster).

flags:
`

const dismissHelp = `usage: tombstone-recovery dismiss NAMESPACE/NAME [--yes] [flags]

Dismisses what recoveries kept for a person on the Composition's lineage (inspect lists them under
UNRESOLVED) once you have dealt with each object: shows the entries, asks unless --yes, then adds
them to %[3]s on the snapshot's chunk 0, refused if the Secret changed since it was read. The next
recording no longer carries them. Run it with your own credentials: they need get on the Composition
(its lineage), and get and update on secrets in the inventory namespace downstream.

Exit codes: 0 written; 1 nothing written (nothing unresolved, not confirmed, the Secret changed,
bad flags or an unreachable cluster).

flags:
`

// reviewer runs approve, reject and dismiss; in answers the question.
type reviewer struct {
	inspector
	in io.Reader
}

func (r reviewer) run(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) error {
	o, err := parseReviewFlags(verb, args, stderr)
	if err != nil {
		return unlessHelp(err)
	}
	cp, remote, err := loadConfigs(o.kubeconfig, o.remoteKubeconfig, true, inspectUserAgent, r.wrap)
	if err != nil {
		return fmt.Errorf("%s: inspect: %w", verb, err)
	}
	comps, err := liveCompositions(cp)
	if err == nil && verb == "dismiss" {
		err = r.dismiss(ctx, o, cp, remote, comps, stdout)
	} else if err == nil {
		err = r.review(ctx, verb, o, cp, remote, comps, stdout)
	}
	return wrapIf(verb, err)
}

// asInspect is inspect --composition with o's cluster flags.
func (o reviewOptions) asInspect() inspectOptions {
	return inspectOptions{clusterFlags: o.clusterFlags, target: app.InspectTarget{Composition: &o.ref}}
}

func (r reviewer) review(ctx context.Context, verb string, o reviewOptions, cp, remote *rest.Config, comps *k8s.Compositions, stdout io.Writer) error {
	// Read before the plan: its resourceVersion guards the write, so a change after it refuses.
	comp, err := comps.LiveComposition(ctx, o.ref)
	if err != nil {
		return err
	}
	value, err := domain.ReviewValue(comp, verb == "approve")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup // the fleet index
	defer func() { cancel(); running.Wait() }()
	ins, err := r.inspector.inspector(ctx, o.asInspect(), cp, remote, &running)
	if err != nil {
		return err
	}
	report, err := r.inspect(ctx, o.asInspect(), ins)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	writeDryRun(func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }, report.DryRun)
	if err := tw.Flush(); err != nil {
		return err
	}
	held, _ := comp.Decision()
	then := "re-plans from live reads and hands Eno what still passes the checks"
	if verb == "reject" {
		then = "decides NothingToRecover (Rejected): nothing is deleted"
	}
	fmt.Fprintf(stdout, "\nHeld: %s\nSetting %s=%s on %s; the controller then %s.\n", clean(held.Message), domain.AnnotationReview, value, o.ref, then)
	if err := r.confirmWrite(o.yes, stdout, func() error { return comps.WriteReview(ctx, comp, value) },
		fmt.Errorf("composition %s changed since it was read (resourceVersion %s); nothing written: run the command again to see the plan as it is now", o.ref, comp.ResourceVersion)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Written. Follow the decision: kubectl get composition %s -n %s -o jsonpath='{.metadata.annotations.%s}'\n",
		o.ref.Name, o.ref.Namespace, strings.ReplaceAll(domain.AnnotationDecision, ".", `\.`))
	return nil
}

// confirmWrite asks on stdout, unless yes, and reads the answer from in: only "yes" goes on to
// write. A write refused because the object changed since it was read, or is gone, is changed.
func (r reviewer) confirmWrite(yes bool, stdout io.Writer, write func() error, changed error) error {
	if !yes {
		fmt.Fprint(stdout, "Type yes to go on: ")
		line, _ := bufio.NewReader(r.in).ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			return errors.New("not confirmed; nothing written")
		}
	}
	err := write()
	if errors.Is(err, ports.ErrConflict) || errors.Is(err, ports.ErrNotFound) {
		return changed
	}
	return err
}

// dismiss adds the unresolved entries of the Composition's lineage to the dismissal of each
// chunk 0 listing them, guarded by the resourceVersion read (design §3).
func (r reviewer) dismiss(ctx context.Context, o reviewOptions, cp, remote *rest.Config, comps *k8s.Compositions, stdout io.Writer) error {
	// The Composition's lineage; once it is gone, the default one of its name.
	lineage := domain.DefaultLineage(o.ref.Namespace, o.ref.Name)
	if comp, err := comps.LiveComposition(ctx, o.ref); err == nil {
		if lineage, err = domain.LineageOf(comp); err != nil {
			return err
		}
	} else if !errors.Is(err, ports.ErrNotFound) {
		return err
	}
	core, err := corev1client.NewForConfig(remote)
	if err != nil {
		return fmt.Errorf("downstream client: %w", err)
	}
	store, err1 := k8s.NewSecretStore(core, nil, o.inventoryNamespace)
	id, err2 := controlPlaneID(ctx, cp, o.controlPlaneID)
	if err := cmp.Or(err1, err2); err != nil {
		return err
	}
	// Chunk 0 of the Composition's snapshot in the lineage, if this control plane's.
	chunk, err := store.GetChunk(ctx, domain.ChunkName(o.ref.Name, lineage, 0))
	if err != nil && !errors.Is(err, ports.ErrNotFound) {
		return err
	}
	var us []domain.Unresolved
	if by := chunk.WrittenBy(); err == nil && (by == "" || by == id) {
		var unreadable []string
		if us, unreadable = domain.UnresolvedIn([]domain.ChunkSecret{chunk}, o.ref); len(unreadable) > 0 {
			return fmt.Errorf("the unresolved entries of secret %s/%s cannot be read; nothing written", o.inventoryNamespace, chunk.Name)
		}
	}
	if len(us) == 0 {
		return fmt.Errorf("composition %s has no unresolved entries in lineage %s of %s downstream; nothing to dismiss", o.ref, lineage, o.inventoryNamespace)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "UNRESOLVED in secret %s/%s (%d)\n%s\n", o.inventoryNamespace, clean(chunk.Name), len(us), unresolvedHeader)
	for _, u := range us {
		fmt.Fprintln(tw, strings.Join(unresolvedRow(u), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nDismissing these: inspect no longer lists them and the next recording does not carry them; check each object is dealt with.\n")
	mark := func() error {
		_, err := store.MarkChunk(ctx, domain.Dismiss(chunk, us))
		return err
	}
	if err := r.confirmWrite(o.yes, stdout, mark,
		fmt.Errorf("secret %s/%s changed since it was read (resourceVersion %s); not written: run the command again to see the entries as they are now", o.inventoryNamespace, chunk.Name, chunk.ResourceVersion)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Dismissed %d entries on secret %s/%s.\n", len(us), o.inventoryNamespace, chunk.Name)
	return nil
}

// liveCompositions reads the control plane's Compositions live, through no cache.
func liveCompositions(cp *rest.Config) (*k8s.Compositions, error) {
	dyn, err := dynamic.NewForConfig(cp)
	if err != nil {
		return nil, fmt.Errorf("control plane dynamic client: %w", err)
	}
	return k8s.NewCompositions(dyn, nil)
}
