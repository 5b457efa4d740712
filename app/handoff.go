package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// handOff hands the plan's tombstones to Eno: it publishes and commits the recovery slices,
// writes the Recovered decision, checks the slices and asks Eno for a new synthesis. Each step
// follows a live recheck. A crash before the commit point leaves nothing committed and the next
// reconcile plans again; after it, the next reconcile resumes (design §6.2).
func (s *Service) handOff(ctx context.Context, comp domain.Composition, plan domain.RecoveryPlan) (RecoverResult, error) {
	h, err := domain.NewHandoff(plan)
	if err != nil {
		return RecoverResult{Plan: plan, Composition: comp}, err
	}
	slices, err := s.publishAndCommit(ctx, comp, h)
	if err != nil {
		return RecoverResult{Plan: plan, Composition: comp}, err
	}
	return s.writeRecovered(ctx, comp, plan, slices, h)
}

// publishAndCommit publishes every recovery slice (step 1), arms the Composition for the
// hand-off's digest, then appends them all to the synthesis in one write (step 2, the commit
// point). It returns the slices' names, the first
// one first (design §6.2).
func (s *Service) publishAndCommit(ctx context.Context, comp domain.Composition, h domain.Handoff) ([]string, error) {
	fail := func(step string, err error) ([]string, error) {
		if errors.Is(err, ports.ErrSynthesisMoved) {
			err = &StaleCompositionError{Ref: comp.Ref(), Detail: err.Error()}
		}
		return nil, fmt.Errorf("%s %d tombstones: %w", step, len(h.Resources), err)
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
	// Arm, then commit on the armed object: its resourceVersion guards the commit. A resume
	// never arms again, so a disarm by hand or by the pending check sticks.
	if live, err = s.deps.Sink.ArmTombstones(ctx, live, h.Digest); err != nil {
		return fail("arming", err)
	}
	if err := s.deps.Sink.CommitTombstones(ctx, live, h, slices); err != nil {
		return fail("committing", err)
	}
	fault(ctx, faultCommitted, comp.Ref())
	return slices, nil
}

// writeRecovered writes the Recovered decision (step 3), naming the first recovery slice and
// counting every tombstone, then checks the slices (step 4) and asks for a resynthesis (step 5).
// After the commit point the plan is fixed: the recheck asks only for the same incarnation,
// synthesis and run conditions (design §6.2).
func (s *Service) writeRecovered(ctx context.Context, comp domain.Composition, plan domain.RecoveryPlan, slices []string, h domain.Handoff) (RecoverResult, error) {
	d := h.DecisionFor(slices[0])
	res := RecoverResult{Plan: plan, Composition: comp}
	res.Plan.Decision = d
	live, err := s.recheck(ctx, comp, s.policy.CheckRecovery)
	if err != nil {
		return res, err
	}
	if err := s.decide(ctx, live, plan, d); err != nil {
		return res, err
	}
	res.Written = true
	res.Composition = withDecision(live, d)
	if err := s.ensureSlices(ctx, res.Composition, slices, h); err != nil {
		return res, err
	}
	return res, s.requestResynthesis(ctx, res.Composition, slices)
}

// ensureSlices re-reads every recovery slice of a synthesis decided Recovered and creates again
// each that is gone (step 4). A gone slice whose content is unknown (h is empty) is reported
// with a RecoverySliceLost event; Eno moves on without its tombstones. It runs whatever the force
// annotation says: Eno itself sets it to the current synthesis when a named slice goes missing,
// so "already forced" never means "step 4 done" (design §6.2).
func (s *Service) ensureSlices(ctx context.Context, comp domain.Composition, slices []string, h domain.Handoff) error {
	live, err := s.recheck(ctx, comp, s.policy.CheckHandoff)
	if err != nil {
		return fmt.Errorf("handing tombstones to Eno: %w", err)
	}
	if err := s.deps.Sink.EnsureTombstones(ctx, live, slices, h); err != nil {
		if !errors.Is(err, ports.ErrNotFound) {
			return fmt.Errorf("handing tombstones to Eno: %w", err)
		}
		lost := &ports.SlicesLostError{Slices: slices}
		errors.As(err, &lost)
		s.deps.Events.Warning(live, "RecoverySliceLost", fmt.Sprintf("%s; their tombstones are not handed to Eno", lost))
	}
	return nil
}

// requestResynthesis asks Eno for a new synthesis (step 5), which carries the tombstones into
// Eno's own state. Once the force annotation names this synthesis there is nothing to do
// (design §6.2).
func (s *Service) requestResynthesis(ctx context.Context, comp domain.Composition, slices []string) error {
	live, err := s.recheck(ctx, comp, s.policy.CheckHandoff)
	if err != nil {
		return fmt.Errorf("handing tombstones to Eno: %w", err)
	}
	if live.ResynthesisRequested() {
		return nil
	}
	if err := s.deps.Sink.RequestResynthesis(ctx, live); err != nil {
		return fmt.Errorf("handing tombstones to Eno: %w", err)
	}
	logr.FromContextOrDiscard(ctx).Info("asked Eno for a new synthesis carrying the tombstones", "slices", slices)
	return nil
}

// resumeCommitted finishes a hand-off whose recovery slices the synthesis already names: it
// reads every one, checks their tombstones again and writes Recovered from their content. One
// that is gone wraps ports.ErrNotFound with resumed false: recovery plans again. One that is not
// this controller's for this synthesis is never adopted: a RecoverySliceInvalid refusal
// (design §6.2).
func (s *Service) resumeCommitted(ctx context.Context, comp domain.Composition, slices []string) (res RecoverResult, resumed bool, err error) {
	read, err := s.readRecoverySlices(ctx, comp, slices)
	if err != nil {
		return res, false, err
	}
	h, err := domain.HandoffFromSlices(comp, read)
	if err != nil {
		// Never adopted, and never planned around: the synthesis Eno applies holds it.
		var invalid *domain.RecoverySliceInvalidError
		if errors.As(err, &invalid) {
			s.refuse(comp, "RecoverySliceInvalid", invalid)
		}
		return res, true, err
	}
	// Time may have passed since the commit (a crash, a lost Lease, a decision write that kept
	// failing): each tombstone checks itself when Eno acts, and the watch adds the rest.
	var pending []domain.Tombstone
	var sources []string
	for _, sl := range read {
		sources = append(sources, sl.Annotations[domain.AnnotationSourceUID])
		p, err := domain.PendingTombstones(sl)
		if err != nil {
			return res, true, err
		}
		pending = append(pending, p...)
	}
	if err := s.guardHandoff(ctx, comp, pending, sources); err != nil {
		return res, true, err
	}
	logr.FromContextOrDiscard(ctx).Info("resuming a committed hand-off", "slices", slices)
	plan := domain.RecoveryPlan{Decision: h.DecisionFor(slices[0])}
	res, err = s.writeRecovered(ctx, comp, plan, slices, h)
	return res, true, err
}

// resumeDecided runs steps 4 and 5 for a Composition already decided Recovered, for a pass that
// stopped after the decision. It knows the hand-off's content only when every recovery slice can
// be read: a gone one's tombstones are known to no one (design §6.2).
func (s *Service) resumeDecided(ctx context.Context, comp domain.Composition) error {
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
		return fmt.Errorf("handing tombstones to Eno: %w", err)
	}
	if err := s.ensureSlices(ctx, comp, slices, h); err != nil {
		return err
	}
	return s.requestResynthesis(ctx, comp, slices)
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
