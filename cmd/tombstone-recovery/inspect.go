package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// inspect is read-only by construction: it lists Secrets, gets Compositions and ResourceSlices,
// and hands app.Service only adapters whose write methods refuse (readOnlyStore, readOnlyWrites).

const (
	inspectUserAgent = "eno-tombstone-recovery-inspect"
	// inspectRequestTimeout bounds each API request so a hung server fails the command.
	inspectRequestTimeout = 30 * time.Second
)

// errInspectWrites is what the read-only adapters return if anything ever tried to write.
var errInspectWrites = errors.New("inspect never writes")

// inspectOptions are the flags of `inspect`.
type inspectOptions struct {
	clusterFlags
	composition, lineage string
	output               string

	ref        *domain.CompositionRef // set by --composition
	lineageArg domain.Lineage         // set by --lineage
}

// controlPlaneGiven: --composition needs it to resolve the lineage; --kubeconfig names it.
func (o inspectOptions) controlPlaneGiven() bool { return o.ref != nil || o.kubeconfig != "" }

func parseInspectFlags(args []string, stderr io.Writer) (inspectOptions, error) {
	var o inspectOptions
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	// Errors come back to main, which prints them as one line; only -h prints the flags.
	fs.SetOutput(io.Discard)
	usage := func() {
		fs.SetOutput(stderr)
		fmt.Fprint(stderr, `usage: tombstone-recovery inspect (--composition NAMESPACE/NAME | --lineage L) [flags]

Prints every inventory snapshot of the lineage, its chunk Secrets and sizes against the limit,
the verdict of SPEC §5 and, given the control plane, a dry run of recovery. It never writes.

flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.composition, "composition", "", "inspect this Composition's lineage (resolves its lineage override on the control plane) and dry-run its recovery")
	fs.StringVar(&o.lineage, "lineage", "", "inspect this lineage directly")
	o.clusterFlags.bind(fs, clusterFlagHelp{
		kubeconfig:           "kubeconfig of the control plane; used with --composition (default: in-cluster, then $KUBECONFIG) or when given",
		maxChunkBytes:        "the chunk size limit the sizes are compared against",
		maxChunks:            "most chunk Secrets one snapshot may use (§5 rejects more)",
		maxTombstoneFraction: "deletion guard of the dry run (1 disables)",
	})
	fs.StringVar(&o.output, "o", "table", "output format: table or json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return o, err
		}
		return o, fmt.Errorf("inspect: %w", err)
	}
	if err := o.validate(fs.Args()); err != nil {
		return o, fmt.Errorf("inspect: %w", err)
	}
	return o, nil
}

func (o *inspectOptions) validate(rest []string) error {
	switch {
	case len(rest) > 0:
		return fmt.Errorf("unexpected arguments %q", rest)
	case o.composition == "" && o.lineage == "":
		return errors.New("pass --composition NAMESPACE/NAME or --lineage L")
	case o.composition != "" && o.lineage != "":
		return errors.New("pass either --composition or --lineage, not both")
	case o.output != "table" && o.output != "json":
		return fmt.Errorf("-o must be table or json, got %q", o.output)
	}
	if err := o.clusterFlags.check(); err != nil {
		return err
	}
	if o.composition != "" {
		ref, err := domain.ParseCompositionRef(o.composition)
		if err != nil {
			return fmt.Errorf("--composition: %w", err)
		}
		o.ref = &ref
		return nil
	}
	l, err := domain.NewLineage(o.lineage)
	if err != nil {
		return fmt.Errorf("--lineage: %w", err)
	}
	o.lineageArg = l
	return nil
}

// inspector runs `inspect`. Tests set wrap to observe every request and now to fix the clock.
type inspector struct {
	now  func() time.Time
	wrap func(http.RoundTripper) http.RoundTripper
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return inspector{now: time.Now}.run(ctx, args, stdout, stderr)
}

func (in inspector) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseInspectFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	cp, remote, err := in.loadConfigs(o)
	if err != nil {
		return err
	}
	report, err := in.inspect(ctx, o, cp, remote)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeInspectJSON(stdout, report)
	}
	return writeInspectTable(stdout, report)
}

// loadConfigs returns the control plane's config (nil when not given) and the downstream's.
func (in inspector) loadConfigs(o inspectOptions) (cp, remote *rest.Config, err error) {
	if o.controlPlaneGiven() {
		if cp, err = loadRESTConfig(o.kubeconfig); err != nil {
			return nil, nil, fmt.Errorf("inspect: loading the control plane kubeconfig: %w", err)
		}
	}
	switch {
	case o.remoteKubeconfig != "":
		if remote, err = loadRESTConfig(o.remoteKubeconfig); err != nil {
			return nil, nil, fmt.Errorf("inspect: loading the downstream kubeconfig: %w", err)
		}
	case cp != nil:
		remote = rest.CopyConfig(cp)
	default:
		if remote, err = loadRESTConfig(""); err != nil {
			return nil, nil, fmt.Errorf("inspect: loading the downstream kubeconfig (pass --remote-kubeconfig): %w", err)
		}
	}
	for _, c := range []*rest.Config{cp, remote} {
		if c == nil {
			continue
		}
		c.UserAgent = inspectUserAgent
		if c.Timeout == 0 {
			c.Timeout = inspectRequestTimeout
		}
		if in.wrap != nil {
			c.Wrap(in.wrap)
		}
	}
	return cp, remote, nil
}

// inspect reads everything and builds the report. It fails only when it cannot read; what it
// reads, however broken, is reported.
func (in inspector) inspect(ctx context.Context, o inspectOptions, cpConfig, remoteConfig *rest.Config) (*inspectReport, error) {
	remoteKube, err := kubernetes.NewForConfig(remoteConfig)
	if err != nil {
		return nil, fmt.Errorf("inspect: downstream client: %w", err)
	}
	var comps *k8s.Compositions
	var sliceReader *k8s.Slices
	if cpConfig != nil {
		cpKube, err := kubernetes.NewForConfig(cpConfig)
		if err != nil {
			return nil, fmt.Errorf("inspect: control plane client: %w", err)
		}
		if err := checkReachable(ctx, "the control plane", cpKube); err != nil {
			return nil, fmt.Errorf("inspect: %w", err)
		}
		dyn, err := dynamic.NewForConfig(cpConfig)
		if err != nil {
			return nil, fmt.Errorf("inspect: control plane dynamic client: %w", err)
		}
		// No lister: every read goes to the API server.
		if comps, err = k8s.NewCompositions(dyn, nil); err != nil {
			return nil, err
		}
		if sliceReader, err = k8s.NewSlices(dyn); err != nil {
			return nil, err
		}
	}
	if cpConfig == nil || o.remoteKubeconfig != "" {
		if err := checkReachable(ctx, "the downstream cluster", remoteKube); err != nil {
			return nil, fmt.Errorf("inspect: %w", err)
		}
	}

	now := in.now().UTC()
	report := &inspectReport{
		InventoryNamespace: o.inventoryNamespace,
		InspectedAt:        now.Truncate(time.Second),
		Limits:             inspectLimits{MaxChunkBytes: o.maxChunkBytes, MaxChunks: o.maxChunks, MaxTombstoneFraction: o.maxTombstoneFraction},
		Snapshots:          []snapshotReport{},
		RejectedSecrets:    []rejectedSecret{},
	}
	lineage := o.lineageArg
	var comp *domain.Composition
	if o.ref != nil {
		c, err := comps.LiveComposition(ctx, *o.ref)
		if errors.Is(err, ports.ErrNotFound) {
			return nil, fmt.Errorf("inspect: composition %s does not exist on the control plane; without it its lineage override is unknown: "+
				"inspect the lineage with --lineage (without an override it is %s)", o.ref, domain.DefaultLineage(o.ref.Namespace, o.ref.Name))
		}
		if err != nil {
			return nil, fmt.Errorf("inspect: %w", err)
		}
		if lineage, err = domain.LineageOf(c); err != nil {
			return nil, fmt.Errorf("inspect: composition %s: %w; recording and recovery skip it", o.ref, err)
		}
		comp = &c
		report.Composition = compositionReportOf(c)
	}
	report.Lineage = lineage.String()

	store, err := k8s.NewSecretStore(remoteKube, o.inventoryNamespace)
	if err != nil {
		return nil, err
	}
	secrets, err := store.ListChunks(ctx, lineage)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	parsed := analyzeSecrets(report, secrets, now, o)
	snap, snapErr := domain.ReadSnapshot(secrets, now, o.maxChunks)
	report.Verdict = verdictOf(snap, snapErr)
	markRoles(report)

	if comps == nil {
		return report, nil
	}
	if comp == nil {
		c, why, err := findLineageComposition(ctx, comps, lineage, parsed)
		if err != nil {
			return nil, err
		}
		if c == nil {
			report.DryRun = &dryRunReport{Unavailable: why, Tombstones: []tombstoneReport{}, HeldForReview: []tombstoneReport{}}
			return report, nil
		}
		comp = c
	}
	meta, err := metadata.NewForConfig(remoteConfig)
	if err != nil {
		return nil, fmt.Errorf("inspect: downstream metadata client: %w", err)
	}
	downstream, err := k8s.NewDownstreamObjects(meta, remoteKube.Discovery())
	if err != nil {
		return nil, err
	}
	dry, err := dryRun(ctx, o, comps, sliceReader, downstream, readOnlyStore{lineage: lineage, secrets: secrets}, *comp, now)
	if err != nil {
		return nil, err
	}
	report.DryRun = dry
	return report, nil
}

// findLineageComposition picks, for --lineage, the Composition the newest snapshot names, if it
// still exists and still resolves to the lineage. It returns why not otherwise.
func findLineageComposition(ctx context.Context, comps *k8s.Compositions, lineage domain.Lineage, parsed []domain.StoredChunk) (*domain.Composition, string, error) {
	ordered := slices.Clone(parsed)
	slices.SortStableFunc(ordered, func(a, b domain.StoredChunk) int { return b.Meta.SynthesisTime.Compare(a.Meta.SynthesisTime) })
	var refs []domain.CompositionRef
	for _, c := range ordered {
		ref := domain.CompositionRef{Namespace: c.Meta.CompositionNamespace, Name: c.Meta.CompositionName}
		if !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	if len(refs) == 0 {
		return nil, "no snapshot names a Composition; pass --composition NAMESPACE/NAME for a dry run", nil
	}
	var why []string
	for _, ref := range refs {
		c, err := comps.LiveComposition(ctx, ref)
		if errors.Is(err, ports.ErrNotFound) {
			why = append(why, ref.String()+" does not exist")
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("inspect: %w", err)
		}
		l, err := domain.LineageOf(c)
		switch {
		case err != nil:
			why = append(why, fmt.Sprintf("%s has an invalid lineage override", ref))
		case l != lineage:
			why = append(why, fmt.Sprintf("%s now has lineage %s", ref, l))
		default:
			return &c, "", nil
		}
	}
	return nil, fmt.Sprintf("no Composition named by the snapshots has lineage %s (%s); pass --composition NAMESPACE/NAME for a dry run",
		lineage, strings.Join(why, "; ")), nil
}

// dryRun computes what recovery would decide now through app.Service.Plan, fed the Secrets
// already listed (so it judges what the report shows) and adapters that refuse every write.
func dryRun(ctx context.Context, o inspectOptions, comps *k8s.Compositions, sl *k8s.Slices, downstream ports.DownstreamReader, store readOnlyStore, comp domain.Composition, now time.Time) (*dryRunReport, error) {
	cfg := app.DefaultConfig()
	cfg.Enabled = true
	o.clusterFlags.configure(&cfg)
	cfg.Now = func() time.Time { return now }
	svc, err := app.New(cfg, app.Deps{
		Compositions: comps, Guard: comps, Slices: sl, Store: store, Downstream: downstream,
		Sink: readOnlyWrites{}, Decisions: readOnlyWrites{},
	})
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	r := &dryRunReport{
		Composition:    comp.Ref().String(),
		CompositionUID: comp.UID,
		SynthesisUUID:  comp.SynthesisUUID(),
		WouldRun:       true,
		Tombstones:     []tombstoneReport{},
		HeldForReview:  []tombstoneReport{},
	}
	// The controller's scope flags are unknown here: only the Composition's own state counts.
	policy := domain.Policy{Enabled: true, Scope: domain.Scope{Selector: domain.Everything}}
	var ie *domain.IneligibleError
	if err := policy.CheckRecovery(comp); errors.As(err, &ie) {
		r.WouldRun, r.NotRunReason, r.NotRunDetail = false, ie.Reason.String(), ie.Detail
	}
	if d, ok := comp.Decision(); ok {
		r.RecordedDecision = &d
	}
	if comp.Synthesis == nil || comp.Synthesis.UUID == "" {
		r.Unavailable = "the composition has no current synthesis yet"
		return r, nil
	}
	plan, err := svc.Plan(ctx, comp)
	if err != nil {
		r.Unavailable = "recovery would stop before deciding: " + err.Error()
		return r, nil
	}
	r.Decision = &plan.Decision
	r.Tombstones = tombstoneReports(plan.Tombstones)
	r.HeldForReview = tombstoneReports(plan.Held)
	return r, nil
}

// readOnlyStore serves the Secrets inspect already listed; it refuses writes.
type readOnlyStore struct {
	lineage domain.Lineage
	secrets []domain.ChunkSecret
}

var (
	_ ports.SnapshotStore  = readOnlyStore{}
	_ ports.TombstoneSink  = readOnlyWrites{}
	_ ports.DecisionWriter = readOnlyWrites{}
)

func (s readOnlyStore) ListChunks(_ context.Context, l domain.Lineage) ([]domain.ChunkSecret, error) {
	if l != s.lineage {
		return nil, fmt.Errorf("inspect listed lineage %s, not %s", s.lineage, l)
	}
	return slices.Clone(s.secrets), nil
}

func (s readOnlyStore) ListCachedChunks(ctx context.Context, l domain.Lineage) ([]domain.ChunkSecret, error) {
	return s.ListChunks(ctx, l)
}

func (readOnlyStore) CreateChunk(context.Context, domain.ChunkSecret) (domain.ChunkSecret, error) {
	return domain.ChunkSecret{}, errInspectWrites
}

func (readOnlyStore) UpdateChunk(context.Context, domain.ChunkSecret) (domain.ChunkSecret, error) {
	return domain.ChunkSecret{}, errInspectWrites
}

// readOnlyWrites stands in for the tombstone sink and the decision writer.
type readOnlyWrites struct{}

func (readOnlyWrites) PublishTombstones(context.Context, domain.Composition, domain.Handoff) (string, error) {
	return "", errInspectWrites
}

func (readOnlyWrites) CommitTombstones(context.Context, domain.Composition, string) error {
	return errInspectWrites
}

func (readOnlyWrites) EnsureTombstones(context.Context, domain.Composition, string, domain.Handoff) error {
	return errInspectWrites
}

func (readOnlyWrites) RequestResynthesis(context.Context, domain.Composition) error {
	return errInspectWrites
}

func (readOnlyWrites) WriteDecision(context.Context, domain.Composition, domain.Decision) error {
	return errInspectWrites
}

// inspectReport is the document `inspect -o json` prints; the table shows the same. Fields are
// added over time, never renamed or removed. Lists are [] when empty, never null.
type inspectReport struct {
	// Lineage is the lineage inspected: --lineage, or the Composition's.
	Lineage            string `json:"lineage"`
	InventoryNamespace string `json:"inventoryNamespace"`
	// InspectedAt is the reader's clock used for §5's future-timestamp check.
	InspectedAt time.Time     `json:"inspectedAt"`
	Limits      inspectLimits `json:"limits"`
	// Composition is set for --composition.
	Composition *compositionReport `json:"composition,omitempty"`
	// Snapshots groups the Secrets that pass §5 step 1 by source synthesis UUID, newest first.
	Snapshots []snapshotReport `json:"snapshots"`
	// RejectedSecrets fail §5 step 1 (each makes the verdict Malformed).
	RejectedSecrets []rejectedSecret `json:"rejectedSecrets"`
	Verdict         verdictReport    `json:"verdict"`
	// DryRun is set when the control plane was given (--composition, or --kubeconfig).
	DryRun *dryRunReport `json:"dryRun,omitempty"`
}

type inspectLimits struct {
	MaxChunkBytes        int     `json:"maxChunkBytes"`
	MaxChunks            int     `json:"maxChunks"`
	MaxTombstoneFraction float64 `json:"maxTombstoneFraction"`
}

type compositionReport struct {
	Namespace     string `json:"namespace"`
	Name          string `json:"name"`
	UID           string `json:"uid"`
	SynthesisUUID string `json:"synthesisUUID,omitempty"`
	// LineageSource is "override" (the annotation) or "default" (hash of namespace/name).
	LineageSource string `json:"lineageSource"`
}

func compositionReportOf(c domain.Composition) *compositionReport {
	source := "default"
	if _, ok := c.Annotations[domain.AnnotationLineageOverride]; ok {
		source = "override"
	}
	return &compositionReport{Namespace: c.Namespace, Name: c.Name, UID: c.UID, SynthesisUUID: c.SynthesisUUID(), LineageSource: source}
}

type snapshotReport struct {
	SynthesisUUID        string    `json:"synthesisUUID"`
	SynthesisTimestamp   time.Time `json:"synthesisTimestamp"`
	CompositionNamespace string    `json:"compositionNamespace"`
	CompositionName      string    `json:"compositionName"`
	CompositionUID       string    `json:"compositionUID"`
	// ChunksExpected is the chunk count the chunks claim; ChunksPresent counts distinct valid indexes.
	ChunksExpected int `json:"chunksExpected"`
	ChunksPresent  int `json:"chunksPresent"`
	// Complete: every index 0..count-1 once, and all chunks agree on their metadata.
	Complete      bool `json:"complete"`
	MixedMetadata bool `json:"mixedMetadata"`
	// TotalBytes and LargestChunkBytes are data sizes, compared against limits.maxChunkBytes.
	TotalBytes        int          `json:"totalBytes"`
	LargestChunkBytes int          `json:"largestChunkBytes"`
	Digest            digestReport `json:"digest"`
	// Entries is the number of inventory entries, when the chunks decoded.
	Entries int `json:"entries"`
	// Role is "selected" (§5's choice), "newest" (newest, but the verdict is not a selection),
	// "newest-tied" or "older" (ignored by §5).
	Role     string        `json:"role"`
	Problems []string      `json:"problems"`
	Chunks   []chunkReport `json:"chunks"`
}

type digestReport struct {
	Claimed string `json:"claimed"`
	// Check is "ok", "mismatch", "undecodable" or "unchecked" (the snapshot is incomplete).
	Check    string `json:"check"`
	Computed string `json:"computed,omitempty"`
}

type chunkReport struct {
	Secret string `json:"secret"`
	Index  int    `json:"index"`
	Bytes  int    `json:"bytes"`
}

type rejectedSecret struct {
	Secret string `json:"secret"`
	Bytes  int    `json:"bytes"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

type verdictReport struct {
	// Outcome is "Selected", "NoInventory" or "InventoryInvalid".
	Outcome string `json:"outcome"`
	// Reason is the InventoryInvalid reason: Malformed, MixedMetadata, AmbiguousTimestamp,
	// MissingChunk or DigestMismatch.
	Reason string `json:"reason,omitempty"`
	Secret string `json:"secret,omitempty"`
	Detail string `json:"detail,omitempty"`
	// The selected snapshot, for Selected.
	SynthesisUUID      string     `json:"synthesisUUID,omitempty"`
	SynthesisTimestamp *time.Time `json:"synthesisTimestamp,omitempty"`
	CompositionUID     string     `json:"compositionUID,omitempty"`
	Entries            int        `json:"entries,omitempty"`
	Digest             string     `json:"digest,omitempty"`
}

const (
	verdictSelected = "Selected"
	checkOK         = "ok"
	checkMismatch   = "mismatch"
	checkUndecoded  = "undecodable"
	checkUnchecked  = "unchecked"
	roleSelected    = "selected"
	roleNewest      = "newest"
	roleNewestTied  = "newest-tied"
	roleOlder       = "older"
)

type dryRunReport struct {
	Composition    string `json:"composition,omitempty"`
	CompositionUID string `json:"compositionUID,omitempty"`
	SynthesisUUID  string `json:"synthesisUUID,omitempty"`
	// WouldRun: recovery evaluates this synthesis now (opted in, synthesized, not deleting,
	// no finished decision). The controller's --composition-namespace and selector are not known.
	WouldRun     bool   `json:"wouldRun"`
	NotRunReason string `json:"notRunReason,omitempty"`
	NotRunDetail string `json:"notRunDetail,omitempty"`
	// RecordedDecision is the decision annotation already on the Composition.
	RecordedDecision *domain.Decision `json:"recordedDecision,omitempty"`
	// Decision is what recovery would write now, in the annotation's format.
	Decision *domain.Decision `json:"decision,omitempty"`
	// Unavailable says why no decision could be computed.
	Unavailable   string            `json:"unavailable,omitempty"`
	Tombstones    []tombstoneReport `json:"tombstones"`
	HeldForReview []tombstoneReport `json:"heldForReview"`
}

type tombstoneReport struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Manifest is the Eno manifest the ResourceSlice would carry with deleted: true.
	Manifest string `json:"manifest"`
}

func tombstoneReports(ts []domain.Tombstone) []tombstoneReport {
	out := make([]tombstoneReport, 0, len(ts))
	for _, t := range ts {
		e := t.Entry
		out = append(out, tombstoneReport{Group: e.Group, Version: e.Version, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name, Manifest: t.Manifest()})
	}
	return out
}

// analyzeSecrets fills the snapshot and rejected-Secret parts of the report. Unlike §5, which
// stops at the first problem, it describes every Secret. It returns the chunks that parsed.
func analyzeSecrets(r *inspectReport, secrets []domain.ChunkSecret, now time.Time, o inspectOptions) []domain.StoredChunk {
	groups := map[string][]domain.StoredChunk{}
	var parsed []domain.StoredChunk
	for _, s := range secrets {
		c, err := domain.ParseStoredChunk(s, now, o.maxChunks)
		if err != nil {
			rej := rejectedSecret{Secret: s.Name, Bytes: s.DataSize(), Reason: domain.ReasonMalformed.String(), Detail: err.Error()}
			var inv *domain.InventoryInvalidError
			if errors.As(err, &inv) {
				rej.Reason, rej.Detail = inv.Reason.String(), inv.Detail
			}
			r.RejectedSecrets = append(r.RejectedSecrets, rej)
			continue
		}
		parsed = append(parsed, c)
		groups[c.Meta.SynthesisUUID] = append(groups[c.Meta.SynthesisUUID], c)
	}
	slices.SortFunc(r.RejectedSecrets, func(a, b rejectedSecret) int { return strings.Compare(a.Secret, b.Secret) })
	for _, g := range groups {
		r.Snapshots = append(r.Snapshots, analyzeSnapshot(g, o.maxChunkBytes))
	}
	slices.SortFunc(r.Snapshots, func(a, b snapshotReport) int {
		if c := b.SynthesisTimestamp.Compare(a.SynthesisTimestamp); c != 0 {
			return c
		}
		return strings.Compare(a.SynthesisUUID, b.SynthesisUUID)
	})
	return parsed
}

func analyzeSnapshot(chunks []domain.StoredChunk, limit int) snapshotReport {
	slices.SortFunc(chunks, func(a, b domain.StoredChunk) int {
		if a.Index != b.Index {
			return a.Index - b.Index
		}
		return strings.Compare(a.Secret.Name, b.Secret.Name)
	})
	meta := chunks[0].Meta
	s := snapshotReport{
		SynthesisUUID:        meta.SynthesisUUID,
		SynthesisTimestamp:   meta.SynthesisTime,
		CompositionNamespace: meta.CompositionNamespace,
		CompositionName:      meta.CompositionName,
		CompositionUID:       meta.CompositionUID,
		ChunksExpected:       meta.ChunkCount,
		Digest:               digestReport{Claimed: meta.Digest, Check: checkUnchecked},
		Problems:             []string{},
		Chunks:               make([]chunkReport, 0, len(chunks)),
	}
	byIndex := map[int]domain.StoredChunk{}
	largest := ""
	for _, c := range chunks {
		size := c.Secret.DataSize()
		s.Chunks = append(s.Chunks, chunkReport{Secret: c.Secret.Name, Index: c.Index, Bytes: size})
		s.TotalBytes += size
		if size > s.LargestChunkBytes || largest == "" {
			s.LargestChunkBytes, largest = size, c.Secret.Name
		}
		if diff := metaDiff(meta, c.Meta); len(diff) > 0 {
			s.MixedMetadata = true
			s.Problems = append(s.Problems, fmt.Sprintf("secret %s disagrees with %s on %s", c.Secret.Name, chunks[0].Secret.Name, strings.Join(diff, ", ")))
		}
		switch prev, dup := byIndex[c.Index]; {
		case c.Index >= meta.ChunkCount:
			s.Problems = append(s.Problems, fmt.Sprintf("secret %s has index %d, out of range for %d chunks", c.Secret.Name, c.Index, meta.ChunkCount))
		case dup:
			s.Problems = append(s.Problems, fmt.Sprintf("secrets %s and %s both hold index %d", prev.Secret.Name, c.Secret.Name, c.Index))
		default:
			byIndex[c.Index] = c
		}
	}
	s.ChunksPresent = len(byIndex)
	if missing := missingIndexes(byIndex, meta.ChunkCount); len(missing) > 0 {
		s.Problems = append(s.Problems, "missing chunk index "+missing)
	}
	if s.LargestChunkBytes > limit {
		s.Problems = append(s.Problems, fmt.Sprintf("secret %s holds %d bytes, over --max-chunk-bytes %d", largest, s.LargestChunkBytes, limit))
	}
	s.Complete = !s.MixedMetadata && len(byIndex) == meta.ChunkCount && len(chunks) == meta.ChunkCount
	if !s.Complete {
		return s
	}
	var entries []domain.Entry
	for i := range meta.ChunkCount {
		c := byIndex[i]
		part, err := domain.DecodeEntries(c.Secret.Data[domain.SecretDataKey])
		if err != nil {
			s.Digest.Check = checkUndecoded
			s.Problems = append(s.Problems, fmt.Sprintf("secret %s: %v", c.Secret.Name, err))
			return s
		}
		entries = append(entries, part...)
	}
	inv, err := domain.NewInventory(entries)
	if err != nil {
		s.Digest.Check = checkUndecoded
		s.Problems = append(s.Problems, err.Error())
		return s
	}
	s.Entries, s.Digest.Computed = inv.Len(), inv.Digest()
	s.Digest.Check = checkOK
	if inv.Digest() != meta.Digest {
		s.Digest.Check = checkMismatch
		s.Problems = append(s.Problems, fmt.Sprintf("entries hash to %s, the chunks claim %s", inv.Digest(), meta.Digest))
	}
	return s
}

// missingIndexes lists the absent indexes below count, at most ten of them.
func missingIndexes(have map[int]domain.StoredChunk, count int) string {
	var out []string
	n := 0
	for i := range count {
		if _, ok := have[i]; ok {
			continue
		}
		if n++; n <= 10 {
			out = append(out, strconv.Itoa(i))
		}
	}
	if n > 10 {
		out = append(out, fmt.Sprintf("and %d more", n-10))
	}
	return strings.Join(out, ", ")
}

func metaDiff(a, b domain.SnapshotMeta) []string {
	var out []string
	add := func(differs bool, field string, x, y any) {
		if differs {
			out = append(out, fmt.Sprintf("%s (%v vs %v)", field, x, y))
		}
	}
	add(a.CompositionNamespace != b.CompositionNamespace || a.CompositionName != b.CompositionName, "composition",
		a.CompositionNamespace+"/"+a.CompositionName, b.CompositionNamespace+"/"+b.CompositionName)
	add(a.CompositionUID != b.CompositionUID, "composition UID", a.CompositionUID, b.CompositionUID)
	add(!a.SynthesisTime.Equal(b.SynthesisTime), "timestamp", a.SynthesisTime.Format(time.RFC3339), b.SynthesisTime.Format(time.RFC3339))
	add(a.ChunkCount != b.ChunkCount, "chunk count", a.ChunkCount, b.ChunkCount)
	add(a.Digest != b.Digest, "digest", a.Digest, b.Digest)
	add(a.Lineage != b.Lineage, "lineage", a.Lineage, b.Lineage)
	return out
}

func verdictOf(snap domain.Snapshot, err error) verdictReport {
	var inv *domain.InventoryInvalidError
	switch {
	case err == nil:
		m := snap.Meta()
		ts := m.SynthesisTime
		return verdictReport{Outcome: verdictSelected, SynthesisUUID: m.SynthesisUUID, SynthesisTimestamp: &ts,
			CompositionUID: m.CompositionUID, Entries: snap.Inventory().Len(), Digest: m.Digest}
	case errors.Is(err, domain.ErrNoInventory):
		return verdictReport{Outcome: domain.OutcomeNoInventory.String(), Detail: err.Error()}
	case errors.As(err, &inv):
		return verdictReport{Outcome: domain.OutcomeInventoryInvalid.String(), Reason: inv.Reason.String(), Secret: inv.Secret, Detail: inv.Detail}
	}
	// ReadSnapshot returns nothing else; say so rather than guess.
	return verdictReport{Outcome: domain.OutcomeInventoryInvalid.String(), Detail: err.Error()}
}

// markRoles labels each snapshot by §5 step 3: the selected one, or the newest, and older ones.
func markRoles(r *inspectReport) {
	if len(r.Snapshots) == 0 {
		return
	}
	newest := r.Snapshots[0].SynthesisTimestamp
	tied := len(r.Snapshots) > 1 && r.Snapshots[1].SynthesisTimestamp.Equal(newest)
	for i := range r.Snapshots {
		s := &r.Snapshots[i]
		switch {
		case r.Verdict.Outcome == verdictSelected && s.SynthesisUUID == r.Verdict.SynthesisUUID:
			s.Role = roleSelected
		case s.SynthesisTimestamp.Equal(newest) && tied:
			s.Role = roleNewestTied
		case s.SynthesisTimestamp.Equal(newest):
			s.Role = roleNewest
		default:
			s.Role = roleOlder
		}
	}
}

func writeInspectJSON(w io.Writer, r *inspectReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("inspect: writing the report: %w", err)
	}
	return nil
}

// writeInspectTable renders the report for people. Every value read from the clusters passes
// through clean, so annotations cannot break the layout or send terminal escapes.
func writeInspectTable(w io.Writer, r *inspectReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }

	p("Lineage %s in namespace %s (downstream), inspected at %s", clean(r.Lineage), clean(r.InventoryNamespace), r.InspectedAt.Format(time.RFC3339))
	if c := r.Composition; c != nil {
		from := "default: sha256 of " + strconv.Quote(c.Namespace+"/"+c.Name)
		if c.LineageSource == "override" {
			from = "override: annotation " + domain.AnnotationLineageOverride
		}
		p("Composition %s/%s  uid %s  current synthesis %s  (lineage from %s)", clean(c.Namespace), clean(c.Name), clean(c.UID), orDash(clean(c.SynthesisUUID)), clean(from))
	}
	p("Limits: %s per chunk, %d chunks per snapshot, deletion guard %g", sizeOf(r.Limits.MaxChunkBytes), r.Limits.MaxChunks, r.Limits.MaxTombstoneFraction)

	p("")
	p("SNAPSHOTS (%d)", len(r.Snapshots))
	if len(r.Snapshots) > 0 {
		p("SYNTHESIS\tSOURCE TIMESTAMP\tCOMPOSITION\tCOMPOSITION UID\tCHUNKS\tTOTAL\tLARGEST CHUNK / LIMIT\tDIGEST\tSTATE")
		for _, s := range r.Snapshots {
			p("%s\t%s\t%s/%s\t%s\t%d/%d\t%s\t%s / %s (%s)\t%s\t%s",
				clean(s.SynthesisUUID), s.SynthesisTimestamp.Format(time.RFC3339), clean(s.CompositionNamespace), clean(s.CompositionName),
				clean(s.CompositionUID), s.ChunksPresent, s.ChunksExpected, sizeOf(s.TotalBytes),
				sizeOf(s.LargestChunkBytes), sizeOf(r.Limits.MaxChunkBytes), percent(s.LargestChunkBytes, r.Limits.MaxChunkBytes),
				s.Digest.Check, snapshotState(s))
		}
	}

	p("")
	secretCount := len(r.RejectedSecrets)
	for _, s := range r.Snapshots {
		secretCount += len(s.Chunks)
	}
	p("SECRETS (%d)", secretCount)
	if secretCount > 0 {
		p("NAME\tSYNTHESIS\tINDEX\tBYTES\tNOTE")
		for _, s := range r.Snapshots {
			for _, c := range s.Chunks {
				p("%s\t%s\t%d\t%s\t", clean(c.Secret), clean(s.SynthesisUUID), c.Index, sizeOf(c.Bytes))
			}
		}
		for _, s := range r.RejectedSecrets {
			p("%s\t-\t-\t%s\trejected by §5 step 1 (%s): %s", clean(s.Secret), sizeOf(s.Bytes), clean(s.Reason), clean(s.Detail))
		}
	}

	var problems []string
	for _, s := range r.Snapshots {
		for _, pr := range s.Problems {
			problems = append(problems, fmt.Sprintf("snapshot %s: %s", s.SynthesisUUID, pr))
		}
	}
	if len(problems) > 0 {
		p("")
		p("PROBLEMS")
		for _, pr := range problems {
			p("  %s", clean(pr))
		}
	}

	p("")
	v := r.Verdict
	switch v.Outcome {
	case verdictSelected:
		p("VERDICT (§5): snapshot %s selected: %s, %d entries, digest %s verified", clean(v.SynthesisUUID), v.SynthesisTimestamp.Format(time.RFC3339), v.Entries, clean(v.Digest))
	case domain.OutcomeNoInventory.String():
		p("VERDICT (§5): NoInventory: no Secret in %s carries %s=%s", clean(r.InventoryNamespace), domain.LabelLineage, clean(r.Lineage))
	default:
		p("VERDICT (§5): InventoryInvalid (%s): %s", clean(v.Reason), clean(v.Detail))
		if v.Secret != "" {
			p("  secret: %s", clean(v.Secret))
		}
		p("  recovery generates no tombstones from this history")
	}

	p("")
	writeDryRun(p, r.DryRun)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("inspect: writing the report: %w", err)
	}
	return nil
}

func writeDryRun(p func(string, ...any), d *dryRunReport) {
	if d == nil {
		p("DRY RUN: not run; the control plane was not given (pass --composition, or --kubeconfig)")
		return
	}
	if d.Composition == "" {
		p("DRY RUN: not run; %s", clean(d.Unavailable))
		return
	}
	p("DRY RUN of recovery for %s (nothing is written)", clean(d.Composition))
	p("  composition uid\t%s", clean(d.CompositionUID))
	p("  current synthesis\t%s", orDash(clean(d.SynthesisUUID)))
	if d.WouldRun {
		p("  recovery runs now\tyes")
	} else {
		detail := d.NotRunReason
		if d.NotRunDetail != "" {
			detail += ": " + d.NotRunDetail
		}
		p("  recovery runs now\tno (%s); the plan below is what it would decide", clean(detail))
	}
	if rd := d.RecordedDecision; rd != nil {
		p("  recorded decision\t%s%s for synthesis %s, %d tombstones%s", rd.Outcome, parens(rd.Reason), clean(rd.SynthesisUUID), rd.Tombstones, sliceNote(rd.TombstoneSlice))
	}
	if d.Decision == nil {
		p("  decision\tnone: %s", clean(d.Unavailable))
		return
	}
	p("  decision\t%s%s", d.Decision.Outcome, parens(d.Decision.Reason))
	p("  message\t%s", clean(d.Decision.Message))
	if d.Decision.SourceSynthesisUUID != "" {
		p("  from snapshot\t%s (%s)", clean(d.Decision.SourceSynthesisUUID), d.Decision.SourceSynthesisTimestamp.Format(time.RFC3339))
	}
	list := func(title string, ts []tombstoneReport) {
		p("")
		p("%s (%d)", title, len(ts))
		if len(ts) == 0 {
			return
		}
		p("KIND\tAPI VERSION\tNAMESPACE\tNAME")
		for _, t := range ts {
			apiVersion := t.Version
			if t.Group != "" {
				apiVersion = t.Group + "/" + t.Version
			}
			p("%s\t%s\t%s\t%s", clean(t.Kind), clean(apiVersion), orDash(clean(t.Namespace)), clean(t.Name))
		}
	}
	if d.Decision.Outcome == domain.OutcomeHeldForReview {
		list("HELD FOR REVIEW", d.HeldForReview)
		return
	}
	list("TOMBSTONES", d.Tombstones)
}

func snapshotState(s snapshotReport) string {
	health := "complete"
	switch {
	case s.MixedMetadata:
		health = "mixed metadata"
	case !s.Complete:
		health = "incomplete"
	case s.Digest.Check == checkMismatch:
		health = "digest mismatch"
	case s.Digest.Check == checkUndecoded:
		health = "undecodable"
	}
	return health + ", " + s.Role
}

// sizeOf renders bytes the way the limit reads: "206 B", "3.5 KiB", "812 KiB", "1024 KiB".
func sizeOf(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 10*1024:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%d KiB", int(math.Round(float64(n)/1024)))
}

func percent(n, limit int) string {
	return fmt.Sprintf("%d%%", n*100/limit)
}

func parens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + clean(s) + ")"
}

func sliceNote(name string) string {
	if name == "" {
		return ""
	}
	return " in ResourceSlice " + clean(name)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clean makes a value read from a cluster safe for one table cell: no tabs, line breaks or
// other control characters.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}
