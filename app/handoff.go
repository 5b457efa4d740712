package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// step is what one step of the hand-off leaves to the rest of the reconcile.
type step struct {
	comp     domain.Composition // as the step left it
	observed *ports.CompositionState
	skipped  *domain.IneligibleError
	recovery *RecoverResult
	reads    *liveReads
	requeue  time.Duration
	record   bool // recording may run next
}

// advance moves comp's hand-off on by one step from its state (domain.HandoffStateOf): plan and
// hand off, resume, watch or retire; a plan that decides goes on from the state it leaves.
func (s *Service) advance(ctx context.Context, comp domain.Composition) (step, error) {
	st := step{comp: comp, observed: &ports.CompositionState{}}
	for {
		ie := s.policy.Ineligible(st.comp)
		state, slices := domain.HandoffStateOf(st.comp, ie)
		switch state {
		case domain.HandoffAbandoned:
			if err := s.retire(ctx, st.comp, state, ie); err != nil {
				return step{}, err
			}
			fallthrough
		case domain.HandoffLeftAlone:
			s.skipped(ctx, st.comp, ie)
			st.skipped = ie
			return st, nil
		case domain.HandoffUnplanned, domain.HandoffNamed:
			if st.recovery != nil {
				return st, nil // a decision leaves neither: never plan twice
			}
			rec, reads, err := s.recover(ctx, st.comp, state, slices)
			if err != nil {
				return step{}, fmt.Errorf("recovering: %w", err)
			}
			st.recovery, st.reads, st.comp = &rec, &reads, rec.Composition
			if !rec.Plan.Decision.Outcome.Finished() {
				if rec.Plan.Decision.Reason == domain.ReasonFirstSynthesisPending {
					st.requeue = s.cfg.PendingRecheckInterval // a first synthesis may end the hold
				}
				st.observed.HeldForReview = true
				return st, nil // held for review: recording waits (CheckRecording refuses it too)
			}
			reads.unresolved = domain.UnresolvedOf(rec.Plan)
			continue
		case domain.HandoffDecided:
			st.observed.HandoffPending, st.requeue = true, s.cfg.PendingRecheckInterval
			if st.recovery != nil {
				break // handed off just now: watched from the next reconcile
			}
			// Watch first, whatever the resynthesis request then meets: the watch must not wait
			// for the hand-off to complete.
			err := s.watch(ctx, st.comp, state, slices)
			if rerr := s.requestResynthesis(ctx, st.comp, slices); rerr != nil {
				return st, errors.Join(rerr, err)
			}
			if err != nil {
				st.requeue, err = s.watchFailed(ctx, st.comp, err)
				return st, err
			}
		case domain.HandoffCarried:
			st.requeue = s.cfg.PendingRecheckInterval
			if err := s.watch(ctx, st.comp, state, slices); err != nil {
				if st.requeue, err = s.watchFailed(ctx, st.comp, err); err != nil {
					return st, err
				}
			}
		case domain.HandoffDone:
			if err := s.retire(ctx, st.comp, state, nil); err != nil {
				return st, err
			}
		}
		st.record = true
		return st, nil
	}
}

// handOff hands the plan's tombstones to Eno: it arms the Composition for the hand-off's digest,
// then creates each recovery slice and names it in the synthesis at once, and finishes. Every
// tombstone checks itself when Eno acts, so any named prefix is a whole hand-off: a crash leaves
// either nothing named, and the next reconcile plans again, or a prefix it finishes (design §6.2).
func (s *Service) handOff(ctx context.Context, comp domain.Composition, plan domain.RecoveryPlan) (RecoverResult, error) {
	res := RecoverResult{Plan: plan, Composition: comp}
	h, err := domain.NewHandoff(plan)
	if err != nil {
		return res, err
	}
	parts, err := h.Parts()
	if err != nil {
		return res, err
	}
	fail := func(step string, err error) (RecoverResult, error) {
		if errors.Is(err, ports.ErrSynthesisMoved) {
			err = &StaleCompositionError{Ref: comp.Ref(), Detail: err.Error()}
		}
		return res, fmt.Errorf("%s %d tombstones: %w", step, len(h.Resources), err)
	}
	live, err := s.recheck(ctx, comp, s.readyToCommit(comp, ""))
	if err != nil {
		return fail("handing over", err)
	}
	// Arm, then name on the armed object: its resourceVersion guards the first append, and each
	// append's result the next. A resume never arms again, so a disarm sticks.
	if live, err = s.deps.Sink.ArmTombstones(ctx, live, h.Digest); err != nil {
		return fail("arming", err)
	}
	names := make([]string, len(parts))
	for i := range parts {
		if err := s.awaitFirstSyntheses(ctx, comp); err != nil {
			return fail("naming the recovery slice of", err)
		}
		if names[i], err = s.deps.Sink.CreateRecoverySlice(ctx, live, h, i); err != nil {
			return fail("creating the recovery slice of", err)
		}
		if err := s.fence(ctx, comp, names[i], plan); err != nil {
			return fail("naming the recovery slice of", err)
		}
		if live, err = s.nameRecoverySlice(ctx, live, names[i], h.Digest); err != nil {
			return fail("naming the recovery slice of", err)
		}
		fault(ctx, faultCommitted, comp.Ref())
	}
	return s.finish(ctx, live, plan, h, names)
}

// awaitFirstSyntheses asks the fleet index again, before each recovery slice is created and once
// the fence holds it, for Compositions Eno has not synthesized: any, approved or not, ends the
// pass before the append. Asked before the create, a Composition the index already shows
// synthesized wrote its slices before it, so the fence sees them; asked after, one that appeared
// meanwhile stops the pass (design §6.3, first syntheses).
func (s *Service) awaitFirstSyntheses(ctx context.Context, comp domain.Composition) error {
	unsynthesized, err := s.deps.Fleet.Unsynthesized(ctx)
	if err != nil {
		return fmt.Errorf("reading the fleet index: %w", err)
	}
	if waiting, overdue := domain.AwaitFirstSyntheses(comp.Ref(), unsynthesized, s.cfg.Now(), s.cfg.firstSynthesisWait()); len(waiting) > 0 || len(overdue) > 0 {
		return &domain.FirstSynthesisPendingError{Compositions: append(waiting, overdue...)}
	}
	return nil
}

// fence asks the fleet index again, once it holds the slice just created, whether another
// Composition now produces a tombstone's identity or deploys into its Namespace; if so the pass
// ends before the append, and the next plan decides again. A watch delivers one resource's events
// in order, so an index that holds this create has seen every slice written before it: as strong
// as a fresh list of every slice taken now (design §6.3).
func (s *Service) fence(ctx context.Context, comp domain.Composition, slice string, plan domain.RecoveryPlan) error {
	if err := s.deps.Fleet.WaitForSlice(ctx, comp.Namespace, slice); err != nil {
		return fmt.Errorf("waiting for the fleet index to see recovery slice %s: %w", slice, err)
	}
	if err := s.awaitFirstSyntheses(ctx, comp); err != nil {
		return err
	}
	taken, where, err := s.producedElsewhere(ctx, plan.Tombstones, comp.UID, plan.SourceUID)
	if err != nil || len(taken) == 0 {
		return err
	}
	return &StaleCompositionError{Ref: comp.Ref(), Detail: fmt.Sprintf("since the plan, another composition produces %s (%s)", domain.FirstIDs(taken, disarmedEventLimit), where[0])}
}

// nameAttempts bounds how often one part's append meets a Composition written since.
const nameAttempts = 5

// nameRecoverySlice appends name to the synthesis of written, as this pass last wrote it. Eno's status write
// on an append (it clears Ready) fails the next append's resourceVersion test: it is retried from the live
// Composition, only while nothing the hand-off rests on has changed (readyToCommit with its digest).
func (s *Service) nameRecoverySlice(ctx context.Context, written domain.Composition, name, digest string) (domain.Composition, error) {
	for attempt := 1; ; attempt++ {
		named, err := s.deps.Sink.AppendRecoverySlice(ctx, written, name)
		if err == nil || attempt == nameAttempts || !errors.Is(err, ports.ErrSynthesisMoved) {
			return named, err
		}
		live, rerr := s.recheck(ctx, written, s.readyToCommit(written, digest))
		if rerr != nil {
			return domain.Composition{}, fmt.Errorf("%w; re-read: %w", err, rerr)
		}
		written = live
	}
}

// resumeNamed finishes a named hand-off never decided, never planning again, with the parts it reads;
// a part gone or never named is reported as RecoverySliceLost: its tombstones are not handed to Eno.
func (s *Service) resumeNamed(ctx context.Context, comp domain.Composition, names []string) (RecoverResult, error) {
	res := RecoverResult{Composition: comp}
	h, read, lost, err := s.readNamed(ctx, comp, names)
	if err != nil {
		return res, err
	}
	if len(read) == 0 {
		err := &domain.RecoverySliceInvalidError{Slice: names[0], Detail: "every recovery slice the synthesis names is gone, so the hand-off is unknown"}
		s.refuse(comp, "RecoverySliceLost", err)
		return res, err
	}
	if parts, ok := domain.PartsOf(read[0]); ok {
		for i := len(names); i < parts; i++ {
			lost = append(lost, h.SliceName(comp, i))
		}
	}
	// Time may have passed since the slices were named (a crash, a lost Lease): each tombstone
	// checks itself when Eno acts, and the watch adds the rest.
	if err := s.watchTakeovers(ctx, comp, read); err != nil {
		return res, err
	}
	if len(lost) > 0 {
		s.deps.Events.Warning(comp, "RecoverySliceLost", fmt.Sprintf("recovery slices %v of the hand-off are gone or were never named; their tombstones are not handed to Eno", lost))
	}
	logr.FromContextOrDiscard(ctx).Info("resuming a named hand-off", "slices", names, "lost", lost)
	return s.finish(ctx, comp, domain.RecoveryPlan{}, h, names)
}

// readNamed reads the named recovery slices, the names of those gone, and the hand-off the others carry;
// a slice not this controller's hand-off of the synthesis is never adopted: a RecoverySliceInvalid refusal.
func (s *Service) readNamed(ctx context.Context, comp domain.Composition, names []string) (h domain.Handoff, read []domain.ResourceSlice, gone []string, err error) {
	if read, gone, err = readRecoverySlices(ctx, s.deps.Slices, comp, names); err != nil || len(read) == 0 {
		return h, read, gone, err
	}
	h, err = domain.HandoffFromSlices(comp, read)
	var invalid *domain.RecoverySliceInvalidError
	if errors.As(err, &invalid) {
		s.refuse(comp, "RecoverySliceInvalid", invalid)
	}
	return h, read, gone, err
}

// finish writes the Recovered decision, then asks Eno for a new synthesis. The plan is fixed once a
// slice is named: the recheck asks only for the same incarnation, synthesis and run conditions.
func (s *Service) finish(ctx context.Context, comp domain.Composition, plan domain.RecoveryPlan, h domain.Handoff, names []string) (RecoverResult, error) {
	d := h.DecisionFor(names[0])
	res := RecoverResult{Plan: plan, Composition: comp}
	res.Plan.Decision = d
	live, err := s.recheck(ctx, comp, s.policy.CheckRecovery)
	if err != nil {
		return res, err
	}
	if err := s.decide(ctx, live, res.Plan, d); err != nil {
		return res, err
	}
	res.Written = true
	res.Composition = withDecision(live, d)
	return res, s.requestResynthesis(ctx, res.Composition, names)
}

// requestResynthesis asks Eno for a new synthesis carrying the tombstones, unless the force annotation names this one.
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
