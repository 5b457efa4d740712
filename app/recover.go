package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// heldEventLimit is how many held tombstones an event lists (design §6.1).
const heldEventLimit = 20

// RecoverResult is the plan recovery acted on, and whether it wrote the decision.
type RecoverResult struct {
	Plan    domain.RecoveryPlan
	Written bool
	// Composition is the Composition as the decision left it (its annotation set).
	Composition domain.Composition
}

// Plan computes what recovery would decide now, without writing anything: the dry run that
// inspect shows. Stock Eno has no hook that could consume it; tombstones reach Eno only
// through the hand-off (design §6.2).
func (s *Service) Plan(ctx context.Context, comp domain.Composition) (domain.RecoveryPlan, error) {
	plan, _, err := s.plan(ctx, comp)
	return plan, err
}

// liveReads is what recovery read live; recording in the same reconcile reuses it rather than
// reading the slices and listing the lineage's Secrets a second time. Every write still follows
// its own live recheck, and creates and updates are guarded by the API server (AlreadyExists,
// resourceVersion), so a Secret that changed since the list aborts the pass as before.
type liveReads struct {
	contents domain.SynthesisContents
	secrets  []domain.ChunkSecret
}

func (s *Service) plan(ctx context.Context, comp domain.Composition) (domain.RecoveryPlan, liveReads, error) {
	lineage, err := domain.LineageOf(comp)
	if err != nil {
		return domain.RecoveryPlan{}, liveReads{}, err
	}
	secrets, err := s.deps.Store.ListChunks(ctx, lineage)
	if err != nil {
		return domain.RecoveryPlan{}, liveReads{}, fmt.Errorf("listing inventory secrets of lineage %s: %w", lineage, err)
	}
	now := s.cfg.Now()
	snap, snapErr := domain.ReadSnapshotFor(comp, secrets, now, s.cfg.MaxChunks, s.cfg.adoption())
	contents, err := s.readSynthesis(ctx, comp)
	if err != nil {
		return domain.RecoveryPlan{}, liveReads{}, err
	}
	reads := liveReads{contents: contents, secrets: secrets}
	in := domain.RecoveryInput{
		Composition:          comp,
		Snapshot:             snap,
		SnapshotErr:          snapErr,
		Synthesis:            contents,
		MaxTombstoneFraction: s.cfg.MaxTombstoneFraction,
		Now:                  now,
	}
	if snapErr == nil {
		if s.deps.Lister != nil {
			all, err := s.deps.Lister.ListCompositions(ctx)
			if err != nil {
				return domain.RecoveryPlan{}, reads, fmt.Errorf("listing compositions that may share lineage %s: %w", lineage, err)
			}
			in.LineageMembers = domain.LineageMembers(comp, lineage, all)
		}
		if in.LiveOwners, err = s.liveOwners(ctx, domain.SharedLineageOwners(comp, snap, in.LineageMembers...)); err != nil {
			return domain.RecoveryPlan{}, reads, err
		}
	}
	plan, err := domain.PlanRecovery(in)
	if err != nil || plan.Decided() {
		return plan, reads, err
	}
	if in.Observed, err = s.observe(ctx, plan.Verify); err != nil {
		return domain.RecoveryPlan{}, reads, err
	}
	plan, err = domain.PlanRecovery(in)
	return plan, reads, err
}

// liveOwners reads live, once each, the other Compositions that recorded snapshots of the
// lineage (design §6, SharedLineage) and returns those that exist: found without a
// deletionTimestamp (any UID), or Forbidden, which counts as existing. NotFound is a
// predecessor (a rename). When none exists, one being deleted, or any other failure, decides
// nothing and is retried with backoff; one that exists decides whatever the others are, since
// SharedLineage is then the first rule that decides.
func (s *Service) liveOwners(ctx context.Context, refs []domain.CompositionRef) ([]domain.LiveOwner, error) {
	var live []domain.LiveOwner
	var undecided []error
	for _, ref := range refs {
		owner, err := s.deps.Guard.LiveComposition(ctx, ref)
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

// observe reads each tombstone's object downstream (design §6.3).
func (s *Service) observe(ctx context.Context, tombstones []domain.Tombstone) (map[domain.ResourceID]domain.Observation, error) {
	observed := make(map[domain.ResourceID]domain.Observation, len(tombstones))
	for _, t := range tombstones {
		o, err := s.deps.Downstream.ObserveObject(ctx, t.Entry)
		if err != nil {
			return nil, fmt.Errorf("reading %s downstream before tombstoning it: %w", t.Entry.ID(), err)
		}
		observed[t.Entry.ID()] = o
	}
	return observed, nil
}

// Recover decides recovery for the Composition's current synthesis (design §6) and writes the
// decision. Tombstones are published before the decision, so a decision never points at
// nothing; both writes follow a live recheck of the Composition.
func (s *Service) Recover(ctx context.Context, comp domain.Composition) (RecoverResult, error) {
	res, _, err := s.recover(withComposition(ctx, comp.Ref()), comp)
	return res, err
}

func (s *Service) recover(ctx context.Context, comp domain.Composition) (RecoverResult, liveReads, error) {
	if err := s.policy.CheckRecovery(comp); err != nil {
		return RecoverResult{}, liveReads{}, err
	}
	fault(ctx, faultRecover, comp.Ref())
	ctx = logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues("synthesisUUID", comp.SynthesisUUID()))
	// Past the commit point of an earlier pass: finish that hand-off, never plan again.
	planFrom := comp
	if committed, ok := comp.CommittedRecoverySlices(); ok {
		res, resumed, err := s.resume(ctx, comp, committed)
		switch {
		case resumed:
			return res, liveReads{}, err
		case errors.Is(err, ports.ErrNotFound):
			// Named but gone before its decision: plan again without them; the hand-off creates
			// the gone ones again under the names the synthesis already holds.
			logr.FromContextOrDiscard(ctx).Info("a committed recovery slice is gone; planning again", "slices", committed)
			planFrom = comp.WithoutSlices(committed...)
		case err != nil:
			return res, liveReads{}, err
		}
	}
	plan, reads, err := s.plan(ctx, planFrom)
	if err != nil {
		if domain.IsSliceError(err) {
			s.refuse(comp, "Slice"+problemOf(err), err)
		}
		return RecoverResult{}, reads, fmt.Errorf("recovering %s: %w", comp.Ref(), err)
	}
	d := plan.Decision
	res := RecoverResult{Plan: plan, Composition: comp}

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
		return res, reads, fmt.Errorf("recovering %s: %w", comp.Ref(), err)
	}
	if err := s.decide(ctx, live, plan, d); err != nil {
		return res, reads, err
	}
	res.Plan.Decision, res.Written = d, true
	res.Composition = withDecision(live, d)
	return res, reads, nil
}

// planStillHolds is the recheck before each write of a recovery: the run conditions, and every
// input of the plan computed from read (design §6, "Decide from what is live").
func (s *Service) planStillHolds(read domain.Composition) func(domain.Composition) error {
	return stillHolds(read, s.policy.CheckRecovery, domain.ChangedPlanInput)
}

// decide writes the decision on the live Composition and tells operators about it.
func (s *Service) decide(ctx context.Context, live domain.Composition, plan domain.RecoveryPlan, d domain.Decision) error {
	if err := s.deps.Decisions.WriteDecision(ctx, live, d); err != nil {
		return fmt.Errorf("recovering %s: writing decision %s: %w", live.Ref(), d.Outcome, err)
	}
	s.deps.Metrics.DecisionMade(d.Outcome, d.Reason)
	s.announce(live, plan, d)
	logr.FromContextOrDiscard(ctx).Info("recovery decided", "outcome", d.Outcome.String(), "reason", d.Reason,
		"tombstones", d.Tombstones, "tombstoneSlice", d.TombstoneSlice, "recoveredFrom", d.RecoveredFrom)
	return nil
}

// handOff hands the plan's tombstones to Eno (design §6.2): publish every recovery slice, append
// them all to the synthesis (the commit point), then finish. Each step follows a live recheck; a
// crash before the commit point leaves nothing committed, and the next reconcile plans again.
func (s *Service) handOff(ctx context.Context, comp domain.Composition, plan domain.RecoveryPlan) (RecoverResult, error) {
	res := RecoverResult{Plan: plan, Composition: comp}
	h, err := domain.NewHandoff(plan)
	if err != nil {
		return res, fmt.Errorf("recovering %s: %w", comp.Ref(), err)
	}
	fail := func(step string, err error) (RecoverResult, error) {
		if errors.Is(err, ports.ErrSynthesisMoved) {
			err = &StaleCompositionError{Ref: comp.Ref(), Detail: err.Error()}
		}
		return res, fmt.Errorf("recovering %s: %s %d tombstones: %w", comp.Ref(), step, len(h.Resources), err)
	}
	live, err := s.recheck(ctx, comp, s.readyToCommit(comp))
	if err != nil {
		return fail("publishing", err)
	}
	slices, err := s.deps.Sink.PublishTombstones(ctx, live, h)
	if err != nil {
		return fail("publishing", err)
	}
	if live, err = s.recheck(ctx, comp, s.readyToCommit(comp)); err != nil {
		return fail("committing", err)
	}
	if err := s.deps.Sink.CommitTombstones(ctx, live, h, slices); err != nil {
		return fail("committing", err)
	}
	fault(ctx, faultCommitted, comp.Ref())
	return s.finishHandoff(ctx, comp, plan, slices, h)
}

// readyToCommit adds to planStillHolds what the commit point requires of the live object
// itself (domain.CommitPrecondition): no synthesis in flight.
func (s *Service) readyToCommit(read domain.Composition) func(domain.Composition) error {
	holds := s.planStillHolds(read)
	return func(live domain.Composition) error {
		if why := domain.CommitPreconditionOf(live).MovedOn(live); why != "" {
			return fmt.Errorf("%s: %w", why, ports.ErrSynthesisMoved)
		}
		return holds(live)
	}
}

// finishHandoff runs the steps after the commit point: the Recovered decision (step 3), naming
// the first recovery slice and counting every tombstone, then the slice check and the forced
// resynthesis (steps 4 and 5).
func (s *Service) finishHandoff(ctx context.Context, comp domain.Composition, plan domain.RecoveryPlan, slices []string, h domain.Handoff) (RecoverResult, error) {
	d := h.DecisionFor(slices[0])
	res := RecoverResult{Plan: plan, Composition: comp}
	res.Plan.Decision = d
	// After the commit point the plan is fixed: only the incarnation and synthesis matter.
	live, err := s.recheck(ctx, comp, s.policy.CheckRecovery)
	if err != nil {
		return res, fmt.Errorf("recovering %s: %w", comp.Ref(), err)
	}
	if err := s.decide(ctx, live, plan, d); err != nil {
		return res, err
	}
	res.Written = true
	res.Composition = withDecision(live, d)
	if err := s.completeHandoff(ctx, res.Composition, slices, h); err != nil {
		return res, err
	}
	return res, nil
}

// resume finishes a hand-off whose recovery slices the synthesis already names (design §6.2): it
// reads every one and writes Recovered from their content. One that is gone wraps
// ports.ErrNotFound with resumed false: recovery plans again. One that is not this controller's
// for this synthesis is never adopted: a RecoverySliceInvalid refusal.
func (s *Service) resume(ctx context.Context, comp domain.Composition, slices []string) (res RecoverResult, resumed bool, err error) {
	read, err := s.readRecoverySlices(ctx, comp, slices)
	if err != nil {
		if errors.Is(err, ports.ErrNotFound) {
			// A part is gone, yet Eno's executor carries the others as they are: check them
			// before recovery plans again around the gap.
			for _, name := range slices {
				if werr := s.recheckSlice(ctx, comp, name); werr != nil {
					return res, true, fmt.Errorf("recovering %s: %w", comp.Ref(), werr)
				}
			}
		}
		return res, false, fmt.Errorf("recovering %s: %w", comp.Ref(), err)
	}
	h, err := domain.HandoffFromSlices(comp, read)
	if err != nil {
		// Never adopted, and never planned around: the synthesis Eno applies holds it.
		var invalid *domain.RecoverySliceInvalidError
		if errors.As(err, &invalid) {
			s.refuse(comp, "RecoverySliceInvalid", invalid)
		}
		return res, true, fmt.Errorf("recovering %s: %w", comp.Ref(), err)
	}
	// Time may have passed since the commit (a crash, a lost Lease, a decision write that kept
	// failing): check the tombstones again before anything asks Eno to carry them.
	for i := range read {
		if read[i], err = s.withdrawFailing(ctx, comp, read[i]); err != nil {
			return res, true, fmt.Errorf("recovering %s: %w", comp.Ref(), err)
		}
	}
	if h, err = domain.HandoffFromSlices(comp, read); err != nil {
		return res, true, fmt.Errorf("recovering %s: %w", comp.Ref(), err)
	}
	logr.FromContextOrDiscard(ctx).Info("resuming a committed hand-off", "slices", slices)
	plan := domain.RecoveryPlan{Decision: h.DecisionFor(slices[0])}
	res, err = s.finishHandoff(ctx, comp, plan, slices, h)
	return res, true, err
}

// readRecoverySlices reads each recovery slice, in order; the first that is gone wraps
// ports.ErrNotFound.
func (s *Service) readRecoverySlices(ctx context.Context, comp domain.Composition, slices []string) ([]domain.ResourceSlice, error) {
	read := make([]domain.ResourceSlice, len(slices))
	for i, name := range slices {
		sl, err := s.deps.Slices.GetSlice(ctx, comp.Namespace, name)
		if err != nil {
			return nil, fmt.Errorf("reading recovery slice %s of synthesis %s: %w", name, comp.SynthesisUUID(), err)
		}
		read[i] = sl
	}
	return read, nil
}

// completeHandoff runs steps 4 and 5 of design §6.2 for a Composition whose current synthesis is
// decided Recovered: re-read every recovery slice and create again each that is gone, then ask
// Eno for a new synthesis, which carries the tombstones into Eno's own state. Once the
// annotation names this synthesis both steps are done.
func (s *Service) completeHandoff(ctx context.Context, comp domain.Composition, slices []string, h domain.Handoff) error {
	// Step 4 runs whatever the force annotation says: Eno itself sets it to the current
	// synthesis when a named slice goes missing, so "already forced" never means "step 4 done".
	live, err := s.recheck(ctx, comp, s.policy.CheckHandoff)
	if err != nil {
		return fmt.Errorf("handing tombstones to Eno for %s: %w", comp.Ref(), err)
	}
	if err := s.deps.Sink.EnsureTombstones(ctx, live, slices, h); err != nil {
		if !errors.Is(err, ports.ErrNotFound) {
			return fmt.Errorf("handing tombstones to Eno for %s: checking slices %v: %w", comp.Ref(), slices, err)
		}
		// Their content is known only to a pass that read it; Eno moves on without them.
		lost := &ports.SlicesLostError{Slices: slices}
		errors.As(err, &lost)
		s.deps.Events.Event(live, true, "RecoverySliceLost", fmt.Sprintf("%s; their tombstones are not handed to Eno", lost))
	}
	if live, err = s.recheck(ctx, comp, s.policy.CheckHandoff); err != nil {
		return fmt.Errorf("handing tombstones to Eno for %s: %w", comp.Ref(), err)
	}
	if live.ResynthesisRequested() {
		return nil
	}
	if err := s.deps.Sink.RequestResynthesis(ctx, live); err != nil {
		return fmt.Errorf("handing tombstones to Eno for %s: requesting a resynthesis: %w", comp.Ref(), err)
	}
	logr.FromContextOrDiscard(ctx).Info("asked Eno for a new synthesis carrying the tombstones", "slices", slices)
	return nil
}

// resumeHandoff runs steps 4 and 5 for a Composition already decided Recovered, for a pass
// that stopped after the decision. It knows the hand-off's content only when every recovery
// slice can be read: a gone one's tombstones are known to no one.
func (s *Service) resumeHandoff(ctx context.Context, comp domain.Composition) error {
	d, ok := comp.FinishedDecision()
	if !ok || d.Outcome != domain.OutcomeRecovered || d.TombstoneSlice == "" {
		return nil
	}
	if s.policy.CheckHandoff(comp) != nil {
		return nil
	}
	slices := comp.DecidedRecoverySlices(d)
	var h domain.Handoff
	if read, err := s.readRecoverySlices(ctx, comp, slices); err == nil {
		h, _ = domain.HandoffFromSlices(comp, read)
	} else if !errors.Is(err, ports.ErrNotFound) {
		return fmt.Errorf("handing tombstones to Eno for %s: %w", comp.Ref(), err)
	}
	return s.completeHandoff(ctx, comp, slices, h)
}

func (s *Service) announce(comp domain.Composition, plan domain.RecoveryPlan, d domain.Decision) {
	reason := d.Outcome.String()
	switch d.Outcome {
	case domain.OutcomeInventoryInvalid:
		s.deps.Metrics.Refusal(d.Reason)
		s.deps.Events.Event(comp, true, reason, fmt.Sprintf("%s: %s", d.Reason, d.Message))
	case domain.OutcomeHeldForReview:
		s.deps.Metrics.Refusal(d.Reason)
		s.deps.Events.Event(comp, true, reason, fmt.Sprintf("%s; awaiting review: %s", d.Message, domain.FirstIDs(plan.Held, heldEventLimit)))
	case domain.OutcomeNothingToRecover:
		if d.Reason == domain.ReasonOtherNamespace {
			// Finished: the other namespace's history is never this Composition's, and an
			// operator who meant to move it across namespaces has to say so.
			s.deps.Metrics.Refusal(d.Reason)
			s.deps.Events.Event(comp, true, reason, fmt.Sprintf("%s: %s", d.Reason, d.Message))
			return
		}
		if d.Reason != domain.ReasonUnverified {
			s.deps.Events.Event(comp, false, reason, d.Message)
			return
		}
		// Unverified is finished: the next recorded snapshot replaces the only history naming
		// the kept objects, so an operator has to look now.
		s.deps.Metrics.Refusal(d.Reason)
		s.deps.Events.Event(comp, true, reason, fmt.Sprintf("%s: %s; these objects were kept and are no longer in any history once this synthesis is recorded: check them by hand",
			d.Reason, d.Message))
	default:
		s.deps.Events.Event(comp, false, reason, d.Message)
	}
}

func withDecision(c domain.Composition, d domain.Decision) domain.Composition {
	out := c
	out.Annotations = make(map[string]string, len(c.Annotations)+1)
	for k, v := range c.Annotations {
		out.Annotations[k] = v
	}
	out.Annotations[domain.AnnotationDecision] = d.Encode()
	return out
}

// isIneligible reports whether err only says the Composition is out of a use case's reach.
func isIneligible(err error) (*domain.IneligibleError, bool) {
	var ie *domain.IneligibleError
	ok := errors.As(err, &ie)
	return ie, ok
}
