package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// InspectDeps are the ports inspect reads through; none of them can write. Compositions and
// Slices are the control plane: without them there is no Composition to read and no dry run.
type InspectDeps struct {
	Secrets      ports.SnapshotLister
	Downstream   ports.DownstreamReader
	Compositions ports.LiveReader
	Slices       ports.SliceReader
	Fleet        ports.FleetIndex
	// Lister lists the Compositions on the control plane, for InspectAll.
	Lister ports.CompositionLister
}

// Inspector is the inspect use case: a lineage's history as recovery reads it, and a dry run; only readers.
type Inspector struct {
	cfg  Config
	deps InspectDeps
}

// InspectTarget is what to inspect: a Composition (its lineage, candidates and dry run), or a lineage.
type InspectTarget struct {
	Composition *domain.CompositionRef
	Lineage     domain.Lineage
	// Entries: the verdict lists the entries of the snapshot it selects.
	Entries bool
}

// NewInspector validates the configuration (not Enabled and Scope: the dry run judges the Composition) and readers.
func NewInspector(cfg Config, deps InspectDeps) (*Inspector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	switch {
	case deps.Secrets == nil:
		return nil, errors.New("app: inspect needs a Secrets reader")
	case deps.Downstream == nil:
		return nil, errors.New("app: inspect needs a Downstream reader")
	case (deps.Compositions == nil) != (deps.Slices == nil) || (deps.Slices == nil) != (deps.Fleet == nil):
		return nil, errors.New("app: inspect reads the control plane through Compositions, Slices and Fleet, or none")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Inspector{cfg: cfg, deps: deps}, nil
}

// Inspect reports what it reads, however broken; it fails only when it cannot read (ErrNotFound: no Composition).
func (in *Inspector) Inspect(ctx context.Context, target InspectTarget) (*InspectReport, error) {
	now := in.cfg.Now().UTC()
	report := &InspectReport{
		InventoryNamespace: in.cfg.InventoryNamespace,
		InspectedAt:        now.Truncate(time.Second),
		Limits:             in.limits(),
		Snapshots:          []SnapshotReport{},
		RejectedSecrets:    []RejectedSecret{},
	}
	lineage := target.Lineage
	var comp *domain.Composition
	if ref := target.Composition; ref != nil {
		if in.deps.Compositions == nil {
			return nil, fmt.Errorf("reading composition %s needs the control plane", ref)
		}
		c, err := in.deps.Compositions.LiveComposition(ctx, *ref)
		if err != nil {
			return nil, err // the reader names the Composition
		}
		if lineage, err = domain.LineageOf(c); err != nil {
			return nil, fmt.Errorf("composition %s: %w; recording and recovery skip it", ref, err)
		}
		comp = &c
		report.Composition = &CompositionReport{Namespace: c.Namespace, Name: c.Name, UID: c.UID, SynthesisUUID: c.SynthesisUUID(), LineageSource: "default"}
		if _, ok := c.Annotations[domain.AnnotationLineageOverride]; ok {
			report.Composition.LineageSource = "override"
		}
	}
	report.Lineage = lineage.String()
	secrets, err := in.deps.Secrets.ListChunks(ctx, lineage)
	if err != nil {
		return nil, err
	}
	// Only this control plane's history, as recovery reads it (design §3); every Secret when
	// inspect is given no control plane.
	mine, refused := secrets, error(nil)
	if in.cfg.ControlPlane != "" {
		mine, refused = domain.OwnHistory(secrets, in.cfg.ControlPlane)
	}
	h := domain.ReadHistory(mine, now, in.cfg.MaxChunks)
	if comp != nil {
		h = domain.ReadHistoryFor(*comp, mine, now, in.cfg.MaxChunks, in.cfg.adoption())
	}
	for _, s := range h.Snapshots {
		report.Snapshots = append(report.Snapshots, snapshotReportOf(s, in.cfg.MaxChunkBytes))
	}
	sizes := make(map[string]int, len(mine))
	for _, s := range mine {
		sizes[s.Name] = s.DataSize()
	}
	for _, f := range h.Rejected() {
		report.RejectedSecrets = append(report.RejectedSecrets, RejectedSecret{Secret: f.Secret, Bytes: sizes[f.Secret], Reason: f.Reason.String(), Detail: f.Detail})
	}
	report.Verdict = verdictReportOf(h.Verdict())
	if inv, ok := refused.(*domain.InventoryInvalidError); ok {
		report.Verdict = VerdictReport{Outcome: domain.OutcomeInventoryInvalid.String(), Reason: inv.Reason.String(), Secret: inv.Secret, Detail: inv.Detail}
	}
	if snap, err := h.Verdict(); target.Entries && err == nil && refused == nil {
		report.Verdict.RecordedEntries = snap.Inventory().Entries()
	}

	if in.deps.Compositions == nil {
		return report, nil
	}
	if comp == nil {
		c, why, err := in.lineageComposition(ctx, lineage, h)
		if err != nil {
			return nil, err
		}
		if c == nil {
			report.DryRun = &DryRunReport{Unavailable: why, Tombstones: []TombstoneReport{}, HeldForReview: []TombstoneReport{}, Dropped: []DroppedReport{}}
			return report, nil
		}
		comp = c
	}
	report.DryRun = in.dryRun(ctx, *comp, lineage, secrets, now)
	return report, nil
}

func (in *Inspector) limits() InspectLimits {
	c := in.cfg
	return InspectLimits{MaxChunkBytes: c.MaxChunkBytes, MaxChunks: c.MaxChunks, MaxTombstoneFraction: c.MaxTombstoneFraction, AllowCrossNamespaceLineage: c.AllowCrossNamespaceLineage}
}

// lineageComposition picks the Composition the newest snapshot names that exists with the lineage, or says why none.
func (in *Inspector) lineageComposition(ctx context.Context, lineage domain.Lineage, h domain.History) (*domain.Composition, string, error) {
	var refs []domain.CompositionRef
	for _, s := range h.Snapshots {
		ref := domain.CompositionRef{Namespace: s.Meta.CompositionNamespace, Name: s.Meta.CompositionName}
		if !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	if len(refs) == 0 {
		return nil, "no snapshot names a Composition; pass --composition NAMESPACE/NAME for a dry run", nil
	}
	var why []string
	for _, ref := range refs {
		c, err := in.deps.Compositions.LiveComposition(ctx, ref)
		if errors.Is(err, ports.ErrNotFound) {
			why = append(why, ref.String()+" does not exist")
			continue
		}
		if err != nil {
			return nil, "", err
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

// dryRun is what recovery's planner would decide now from the Secrets already listed, which the report shows.
func (in *Inspector) dryRun(ctx context.Context, comp domain.Composition, lineage domain.Lineage, secrets []domain.ChunkSecret, now time.Time) *DryRunReport {
	cfg := in.cfg
	cfg.Now = func() time.Time { return now }
	p := planner{cfg: cfg, secrets: in.deps.Secrets, slices: in.deps.Slices, fleet: in.deps.Fleet, live: in.deps.Compositions, downstream: in.deps.Downstream}
	mine, _ := domain.OwnHistory(secrets, cfg.ControlPlane)
	h := domain.ReadHistoryFor(comp, mine, now, cfg.MaxChunks, cfg.adoption())
	r := &DryRunReport{
		Composition:    comp.Ref().String(),
		CompositionUID: comp.UID,
		SynthesisUUID:  comp.SynthesisUUID(),
		WouldRun:       true,
		Tombstones:     []TombstoneReport{},
		HeldForReview:  []TombstoneReport{},
		Candidates: &CandidatesReport{Own: h.OwnCandidates, SynthesisUUIDs: append([]string{}, h.Candidates...),
			AcrossNamespaces: h.Adoption == domain.AdoptAcrossNamespaces, OtherNamespaces: append([]string{}, h.OtherNamespaces...)},
		Dropped: []DroppedReport{},
	}
	// The controller's scope is unknown here: only the Composition's own state counts.
	policy := domain.Policy{Enabled: true, Scope: domain.Scope{Selector: domain.Everything}}
	if ie, ok := isIneligible(policy.CheckRecovery(comp)); ok {
		r.WouldRun, r.NotRunReason, r.NotRunDetail = false, ie.Reason.String(), ie.Detail
	}
	if d, ok := comp.Decision(); ok {
		r.RecordedDecision = &d
	}
	if comp.SynthesisUUID() == "" {
		r.Unavailable = "the composition has no current synthesis yet"
		return r
	}
	plan, _, err := p.planListed(ctx, comp, lineage, slices.Clone(secrets))
	if err != nil {
		r.Unavailable = "recovery would stop before deciding: " + err.Error()
		return r
	}
	r.Decision = &plan.Decision
	r.Tombstones = tombstoneReports(plan.Tombstones)
	r.HeldForReview = tombstoneReports(plan.Held)
	for _, d := range plan.Dropped {
		r.Dropped = append(r.Dropped, DroppedReport{TombstoneReport: tombstoneReportOf(d.Tombstone), Reason: d.Reason.String(), Detail: d.Detail})
	}
	return r
}

func snapshotReportOf(s domain.SnapshotReading, maxChunkBytes int) SnapshotReport {
	m := s.Meta
	r := SnapshotReport{
		SynthesisUUID:        m.SynthesisUUID,
		SynthesisTimestamp:   m.SynthesisTime,
		CompositionNamespace: m.CompositionNamespace,
		CompositionName:      m.CompositionName,
		CompositionUID:       m.CompositionUID,
		ControlPlane:         m.ControlPlane,
		ChunksExpected:       m.ChunkCount,
		ChunksPresent:        s.Present,
		Complete:             s.Complete,
		MixedMetadata:        s.MixedMetadata,
		Digest:               DigestReport{Claimed: m.Digest, Check: s.Digest.String(), Computed: s.Computed},
		Entries:              s.Entries,
		Role:                 s.Role.String(),
		Problems:             []string{},
		Chunks:               make([]ChunkReport, 0, len(s.Chunks)),
	}
	largest := ""
	for _, c := range s.Chunks {
		size := c.Secret.DataSize()
		r.Chunks = append(r.Chunks, ChunkReport{Secret: c.Secret.Name, Index: c.Index, Bytes: size})
		if c.Index == 0 {
			r.Unresolved, _ = domain.UnresolvedIn([]domain.ChunkSecret{c.Secret}, m.RecordedFor())
		}
		r.TotalBytes += size
		if size > r.LargestChunkBytes || largest == "" {
			r.LargestChunkBytes, largest = size, c.Secret.Name
		}
	}
	// A chunk over the configured size is no finding of reading: it still reads, but recording would not write it so today.
	oversize := r.LargestChunkBytes > maxChunkBytes
	tooBig := fmt.Sprintf("secret %s holds %d bytes, over --max-chunk-bytes %d", largest, r.LargestChunkBytes, maxChunkBytes)
	for _, f := range s.Findings {
		if f.Step == 5 && oversize {
			r.Problems, oversize = append(r.Problems, tooBig), false
		}
		r.Problems = append(r.Problems, findingText(f, m.ChunkCount))
	}
	if oversize {
		r.Problems = append(r.Problems, tooBig)
	}
	return r
}

// findingText words a finding about a snapshot of chunkCount chunks; the verdict keeps domain's detail.
func findingText(f domain.Finding, chunkCount int) string {
	switch {
	case f.HeldBy != "":
		return fmt.Sprintf("secrets %s and %s both hold index %d", f.HeldBy, f.Secret, f.Index)
	case f.Step == 4 && f.Secret != "":
		return fmt.Sprintf("secret %s has index %d, out of range for %d chunks", f.Secret, f.Index, chunkCount)
	case f.Step == 2:
		return "secret " + f.Secret + " " + f.Detail
	case len(f.Missing) > 0:
		idx := make([]string, 0, len(f.Missing)+1)
		for _, i := range f.Missing {
			idx = append(idx, strconv.Itoa(i))
		}
		if more := f.MissingCount - len(f.Missing); more > 0 {
			idx = append(idx, fmt.Sprintf("and %d more", more))
		}
		return "missing chunk index " + strings.Join(idx, ", ")
	case f.Secret != "":
		return "secret " + f.Secret + ": " + f.Detail
	}
	return f.Detail
}

func verdictReportOf(snap domain.Snapshot, err error) VerdictReport {
	var inv *domain.InventoryInvalidError
	var other *domain.OtherNamespaceError
	m := snap.Meta()
	ts := m.SynthesisTime
	switch {
	case err == nil:
		return VerdictReport{Outcome: VerdictSelected, SynthesisUUID: m.SynthesisUUID, SynthesisTimestamp: &ts,
			CompositionUID: m.CompositionUID, Entries: snap.Inventory().Len(), Digest: m.Digest}
	case errors.Is(err, domain.ErrNoInventory):
		return VerdictReport{Outcome: domain.OutcomeNoInventory.String(), Detail: err.Error()}
	case errors.As(err, &other):
		return VerdictReport{Outcome: domain.OutcomeNothingToRecover.String(), Reason: domain.ReasonOtherNamespace, Detail: err.Error()}
	case errors.Is(err, domain.ErrSameIncarnation):
		return VerdictReport{Outcome: domain.OutcomeNothingToRecover.String(), Reason: domain.ReasonSameIncarnation,
			Detail:        fmt.Sprintf("snapshot %s carries this composition's UID; Eno's own synthesis diff owns cleanup", m.SynthesisUUID),
			SynthesisUUID: m.SynthesisUUID, SynthesisTimestamp: &ts, CompositionUID: m.CompositionUID}
	case errors.As(err, &inv):
		return VerdictReport{Outcome: domain.OutcomeInventoryInvalid.String(), Reason: inv.Reason.String(), Secret: inv.Secret, Detail: inv.Detail}
	}
	// Reading returns nothing else; say so rather than guess.
	return VerdictReport{Outcome: domain.OutcomeInventoryInvalid.String(), Detail: err.Error()}
}

func tombstoneReportOf(t domain.Tombstone) TombstoneReport {
	e := t.Entry
	return TombstoneReport{Group: e.Group, Version: e.Version, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name, Manifest: t.Manifest()}
}

func tombstoneReports(ts []domain.Tombstone) []TombstoneReport {
	out := make([]TombstoneReport, 0, len(ts))
	for _, t := range ts {
		out = append(out, tombstoneReportOf(t))
	}
	return out
}
