package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// heldEventLimit is how many held tombstones an event lists.
const heldEventLimit = 20

// RecoverResult is the plan recovery acted on, and whether it wrote the decision.
type RecoverResult struct {
	Plan    domain.RecoveryPlan
	Written bool
	// Composition is the Composition as the decision left it (its annotation set).
	Composition domain.Composition
}

// recover decides a synthesis: past the commit point (HandoffNamed) it only resumes that hand-off;
// otherwise it plans, then hands off or decides after a live recheck, and returns its live reads.
func (s *Service) recover(ctx context.Context, comp domain.Composition, state domain.HandoffState, names []string) (RecoverResult, liveReads, error) {
	fault(ctx, faultRecover, comp.Ref())
	ctx = logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues("synthesisUUID", comp.SynthesisUUID()))
	if state == domain.HandoffNamed {
		res, err := s.resumeNamed(ctx, comp, names)
		return res, liveReads{}, err
	}
	plan, reads, err := s.planner.plan(ctx, comp)
	if err != nil {
		if domain.IsSliceError(err) {
			s.refuse(comp, "Slice"+problemOf(err), err)
		}
		return RecoverResult{}, reads, err
	}
	d := plan.Decision
	res := RecoverResult{Plan: plan, Composition: comp}
	s.announceIgnoredReview(comp, d)

	// A held decision already on record is not rewritten: only its time would change.
	if prev, ok := comp.Decision(); ok && d.Outcome == domain.OutcomeHeldForReview && prev.SynthesisUUID == d.SynthesisUUID && prev.SameAs(d) {
		return res, reads, nil
	}
	if len(plan.Tombstones) > 0 {
		res, err := s.handOff(ctx, comp, plan)
		return res, reads, err
	}
	live, err := s.recheck(ctx, comp, s.planStillHolds(comp))
	if err != nil {
		return res, reads, err
	}
	if err := s.decide(ctx, live, plan, d); err != nil {
		return res, reads, err
	}
	res.Plan.Decision, res.Written = d, true
	res.Composition = withDecision(live, d)
	return res, reads, nil
}

// announceIgnoredReview warns, once per value, when a held recovery's review annotation answers
// nothing: a held recovery is planned again on every reconcile, and one event is enough.
func (s *Service) announceIgnoredReview(comp domain.Composition, d domain.Decision) {
	ignored, ok := domain.IgnoredReviewOf(comp)
	if !ok || d.Outcome != domain.OutcomeHeldForReview { // the annotation is read only when the guard trips
		s.reviews.LoadAndDelete(comp.Ref()) // so the same bad value set later is announced again; not Delete: archtest reserves it
		return
	}
	if prev, seen := s.reviews.Swap(comp.Ref(), ignored); !seen || prev != ignored {
		s.deps.Events.Warning(comp, "ReviewIgnored", ignored.Message())
	}
}

// Plan is what recovery would decide now for comp as given, writing nothing (inspect's dry run).
func (s *Service) Plan(ctx context.Context, comp domain.Composition) (domain.RecoveryPlan, error) {
	plan, _, err := s.planner.plan(ctx, comp)
	return plan, err
}

// liveReads is what recovery read live, for recording in the same reconcile; each write still rechecks live.
type liveReads struct {
	contents domain.SynthesisContents
	secrets  []domain.ChunkSecret
	// unresolved are what the plan kept for a person to resolve; the recording carries them.
	unresolved []domain.Unresolved
}

// planner computes what recovery would decide from reader ports only, so the controller's
// recovery and inspect's dry run plan the same way and neither can write through it.
type planner struct {
	cfg        Config
	secrets    ports.SnapshotLister
	slices     ports.SliceReader
	fleet      ports.FleetIndex
	live       ports.LiveReader
	downstream ports.DownstreamReader
	// failures counts each object's consecutive failed reads; nil (a dry run) keeps a failure at once.
	failures *readFailures
}

// readFailuresToKeep is how many consecutive plans must fail to read an object before it is
// kept as unreadable: a blip is retried, a persistent error does not stall recovery (read outage).
const readFailuresToKeep = 3

type readFailures struct {
	mu sync.Mutex
	n  map[domain.ResourceID]int
}

// failed counts one more failed read of id and reports whether it is persistent now.
func (r *readFailures) failed(id domain.ResourceID) (int, bool) {
	if r == nil {
		return 1, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[id]++
	return r.n[id], r.n[id] >= readFailuresToKeep
}

func (r *readFailures) read(id domain.ResourceID) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.n, id)
}

// plan lists the lineage's Secrets live and plans from them.
func (p planner) plan(ctx context.Context, comp domain.Composition) (domain.RecoveryPlan, liveReads, error) {
	lineage, err := domain.LineageOf(comp)
	if err != nil {
		return domain.RecoveryPlan{}, liveReads{}, err
	}
	secrets, err := p.secrets.ListChunks(ctx, lineage)
	if err != nil {
		return domain.RecoveryPlan{}, liveReads{}, fmt.Errorf("listing inventory secrets of lineage %s: %w", lineage, err)
	}
	return p.planListed(ctx, comp, lineage, secrets)
}

// planListed reads the snapshot from the listed secrets and the synthesis's slices, then
// decides; the lineage's other owners are read live first, downstream objects only if asked.
func (p planner) planListed(ctx context.Context, comp domain.Composition, lineage domain.Lineage, secrets []domain.ChunkSecret) (domain.RecoveryPlan, liveReads, error) {
	now := p.cfg.Now()
	own, snapErr := domain.OwnHistory(secrets, p.cfg.ControlPlane)
	var snap domain.Snapshot
	if snapErr == nil {
		snap, snapErr = domain.ReadSnapshotFor(comp, own, now, p.cfg.MaxChunks, p.cfg.adoption())
	}
	contents, err := p.readSynthesis(ctx, comp)
	if err != nil {
		return domain.RecoveryPlan{}, liveReads{}, err
	}
	reads := liveReads{contents: contents, secrets: secrets}
	in := domain.RecoveryInput{
		Composition:          comp,
		Snapshot:             snap,
		SnapshotErr:          snapErr,
		Synthesis:            contents,
		MaxTombstoneFraction: p.cfg.MaxTombstoneFraction,
		EnoManagers:          p.cfg.EnoManagers,
		ResourceFilter:       p.cfg.ResourceFilter,
		Now:                  now,
	}
	if snapErr == nil {
		// Across every shard: the cache holds this shard's Compositions only (lineage in another shard).
		if in.LineageMembers, err = p.fleet.LineageMembers(ctx, comp.Ref(), lineage); err != nil {
			return domain.RecoveryPlan{}, reads, fmt.Errorf("finding compositions that share lineage %s: %w", lineage, err)
		}
		if in.LiveOwners, err = p.liveOwners(ctx, domain.SharedLineageOwners(comp, snap, in.LineageMembers...)); err != nil {
			return domain.RecoveryPlan{}, reads, err
		}
	}
	plan, err := domain.PlanRecovery(in)
	if err != nil || plan.Decided() {
		return plan, reads, err
	}
	if in.Observed, err = p.observe(ctx, plan.Verify); err != nil {
		return domain.RecoveryPlan{}, reads, err
	}
	if err = p.markProducedElsewhere(ctx, in.Observed, comp.UID, snap.CompositionUID()); err != nil {
		return domain.RecoveryPlan{}, reads, err
	}
	if in.Unsynthesized, err = p.fleet.Unsynthesized(ctx); err != nil {
		return domain.RecoveryPlan{}, reads, fmt.Errorf("reading the fleet index: %w", err)
	}
	in.FirstSynthesisWait = p.cfg.firstSynthesisWait()
	plan, err = domain.PlanRecovery(in)
	return plan, reads, err
}

// readSynthesis reads every slice of the current synthesis before anything is prepared.
// Any missing, terminating, unreadable or malformed slice stops the pass with a *domain.SliceError.
func (p planner) readSynthesis(ctx context.Context, comp domain.Composition) (domain.SynthesisContents, error) {
	if comp.Synthesis == nil {
		return domain.SynthesisContents{}, &domain.SliceError{Slice: "(none)", Problem: domain.SliceMissing, Detail: "composition has no current synthesis"}
	}
	slices := make([]domain.ResourceSlice, 0, len(comp.Synthesis.Slices))
	for _, name := range comp.Synthesis.Slices {
		sl, err := p.slices.GetSlice(ctx, comp.Namespace, name)
		switch {
		case errors.Is(err, ports.ErrNotFound):
			return domain.SynthesisContents{}, &domain.SliceError{Slice: name, Problem: domain.SliceMissing, Err: err}
		case err != nil:
			return domain.SynthesisContents{}, &domain.SliceError{Slice: name, Problem: domain.SliceUnreadable, Err: err}
		}
		slices = append(slices, sl)
	}
	return domain.ReadSynthesis(comp, slices)
}

// liveOwners reads live the other Compositions that recorded snapshots of the lineage and
// returns those that exist (not deleting, any UID), Forbidden counting as existing; NotFound is
// a predecessor. When none exists, one deleting or any failure decides nothing (retried); one
// that exists decides whatever the others are, SharedLineage being then the first rule.
func (p planner) liveOwners(ctx context.Context, refs []domain.CompositionRef) ([]domain.LiveOwner, error) {
	var live []domain.LiveOwner
	var undecided []error
	for _, ref := range refs {
		owner, err := p.live.LiveComposition(ctx, ref)
		switch {
		case errors.Is(err, ports.ErrNotFound):
			continue
		case errors.Is(err, ports.ErrForbidden):
			live = append(live, domain.LiveOwner{Ref: ref, Forbidden: true})
		case err != nil:
			undecided = append(undecided, fmt.Errorf("reading composition %s, which recorded snapshots of this lineage: %w", ref, err))
		case owner.Deleting:
			undecided = append(undecided, &SourceDeletingError{Ref: ref})
		default:
			live = append(live, domain.LiveOwner{Ref: ref})
		}
	}
	if len(live) > 0 || len(undecided) == 0 {
		return live, nil
	}
	return nil, undecided[0]
}

// markProducedElsewhere keeps each present object another Composition's slice applies or patches
// (ObjectProducedElsewhere); the slices of the owners excluded (this one, the recorded incarnation) do not count.
func (p planner) markProducedElsewhere(ctx context.Context, observed map[domain.ResourceID]domain.Observation, excluded ...string) error {
	elsewhere, err := p.fleet.ProducedElsewhere(ctx, slices.Collect(maps.Keys(observed)), excluded...)
	if err != nil {
		return fmt.Errorf("reading the fleet index for identities other compositions produce: %w", err)
	}
	for id, o := range observed {
		if slice, ok := elsewhere[id]; ok && o.State == domain.ObjectPresent {
			observed[id] = domain.Observation{State: domain.ObjectProducedElsewhere, Detail: "resource slice " + slice + " of another composition produces it"}
		}
	}
	return nil
}

// observe reads each tombstone's object downstream (design §6.3). A failed read is an error,
// retried, until it has failed readFailuresToKeep plans in a row; then it is ObjectReadFailed,
// for the plan to keep or retry (domain.ReadOutage).
func (p planner) observe(ctx context.Context, tombstones []domain.Tombstone) (map[domain.ResourceID]domain.Observation, error) {
	observed := make(map[domain.ResourceID]domain.Observation, len(tombstones))
	for _, t := range tombstones {
		o, err := p.downstream.ObserveObject(ctx, t.Entry)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reading %s downstream before tombstoning it: %w", t.Entry.ID(), context.Cause(ctx))
		}
		if err != nil {
			n, persistent := p.failures.failed(t.Entry.ID())
			if !persistent {
				return nil, fmt.Errorf("reading %s downstream before tombstoning it (failure %d of %d before it is kept as unreadable): %w", t.Entry.ID(), n, readFailuresToKeep, err)
			}
			o = domain.Observation{State: domain.ObjectReadFailed, Detail: fmt.Sprintf("reading it failed %d times in a row: %v", n, err)}
		} else {
			p.failures.read(t.Entry.ID())
		}
		observed[t.Entry.ID()] = o
	}
	return observed, nil
}

// decide writes the decision on the live Composition and tells operators about it.
func (s *Service) decide(ctx context.Context, live domain.Composition, plan domain.RecoveryPlan, d domain.Decision) error {
	if err := s.deps.Decisions.WriteDecision(ctx, live, d); err != nil {
		return fmt.Errorf("deciding %s: %w", d.Outcome, err)
	}
	s.deps.Metrics.DecisionMade(d.Outcome, d.Reason)
	s.announce(live, plan, d)
	s.announceCascading(live, plan)
	logr.FromContextOrDiscard(ctx).Info("recovery decided", "outcome", d.Outcome.String(), "reason", d.Reason,
		"tombstones", d.Tombstones, "tombstoneSlice", d.TombstoneSlice, "recoveredFrom", d.RecoveredFrom)
	return nil
}

func (s *Service) announce(comp domain.Composition, plan domain.RecoveryPlan, d domain.Decision) {
	var warning string
	switch {
	// OtherNamespace (NothingToRecover) is finished: the other namespace's history is never this
	// Composition's, and an operator who meant to move it across namespaces has to say so.
	case d.Outcome == domain.OutcomeInventoryInvalid, d.Reason == domain.ReasonOtherNamespace:
		warning = fmt.Sprintf("%s: %s", d.Reason, d.Message)
	case d.Outcome == domain.OutcomeHeldForReview:
		warning = fmt.Sprintf("%s; awaiting review: %s", d.Message, domain.FirstIDs(plan.Held, heldEventLimit))
	// Unverified (NothingToRecover) is finished: the kept objects leave the history with the next
	// recording, which lists them as unresolved until they are gone (design §3).
	case d.Reason == domain.ReasonUnverified:
		warning = fmt.Sprintf("%s: %s; these objects were kept, and inspect lists them until they are gone: check them by hand", d.Reason, d.Message)
	default:
		s.deps.Events.Normal(comp, d.Outcome.String(), d.Message)
		return
	}
	s.deps.Metrics.Refusal(d.Reason)
	s.deps.Events.Warning(comp, d.Outcome.String(), warning)
}

// announceCascading warns of and counts each orphan of a cascading kind, never handed to Eno (design §6.3).
func (s *Service) announceCascading(comp domain.Composition, plan domain.RecoveryPlan) {
	n := 0
	for _, dr := range plan.Dropped {
		if dr.Reason == domain.DropCascading {
			n++
			s.deps.Events.Warning(comp, dr.Reason.String(), fmt.Sprintf("%s is an orphan: %s", dr.Tombstone.Entry.ID(), dr.Detail))
		}
	}
	if n > 0 {
		s.deps.Metrics.TombstoneAlert(domain.DropCascading.String(), n)
	}
}

func withDecision(c domain.Composition, d domain.Decision) domain.Composition {
	c.Annotations = maps.Collect(maps.All(c.Annotations)) // never nil, never the caller's
	c.Annotations[domain.AnnotationDecision] = d.Encode()
	return c
}
