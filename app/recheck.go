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

// recheck reads the Composition live and aborts unless it is the same incarnation and synthesis
// and still passes check. It returns the live object, whose resourceVersion guards the next write.
func (s *Service) recheck(ctx context.Context, read domain.Composition, check func(domain.Composition) error) (domain.Composition, error) {
	live, err := s.deps.Guard.LiveComposition(ctx, read.Ref())
	if errors.Is(err, ports.ErrNotFound) {
		return domain.Composition{}, &StaleCompositionError{Ref: read.Ref(), Detail: "it was deleted"}
	}
	if err != nil {
		return domain.Composition{}, err
	}
	if live.UID != read.UID {
		return domain.Composition{}, &StaleCompositionError{Ref: read.Ref(), Detail: "it was recreated with UID " + live.UID}
	}
	if live.SynthesisUUID() != read.SynthesisUUID() {
		return domain.Composition{}, &StaleCompositionError{Ref: read.Ref(), Detail: "its current synthesis is now " + live.SynthesisUUID()}
	}
	if err := check(live); err != nil {
		return domain.Composition{}, &StaleCompositionError{Ref: read.Ref(), Detail: err.Error()}
	}
	return live, nil
}

// stillHolds is a recheck before a write: the use case's conditions on the live Composition,
// then changed, which names the first input of the pass that differs between read and live.
func stillHolds(read domain.Composition, conditions func(domain.Composition) error, changed func(read, live domain.Composition) string) func(domain.Composition) error {
	return func(live domain.Composition) error {
		if err := conditions(live); err != nil {
			return err
		}
		if why := changed(read, live); why != "" {
			return errors.New(why)
		}
		return nil
	}
}

// planStillHolds is the recheck before each write of a recovery: the run conditions, and every
// input of the plan computed from read (design §6, "Decide from what is live").
func (s *Service) planStillHolds(read domain.Composition) func(domain.Composition) error {
	return stillHolds(read, s.policy.CheckRecovery, domain.ChangedPlanInput)
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

// withdrawnEventLimit is how many withdrawn tombstones one event names.
const withdrawnEventLimit = 20

// pendingHandoff reports whether comp's current synthesis is decided Recovered: its tombstones
// sit in a synthesis that eno-reconciler applies whenever it loads it, until Eno's executor
// carries them into a later one (design §6.2, "A pending hand-off stays checked").
func pendingHandoff(comp domain.Composition) (domain.Decision, bool) {
	d, ok := comp.FinishedDecision()
	// FinishedDecision is the current synthesis's: a later synthesis ends the recheck.
	if !ok || d.Outcome != domain.OutcomeRecovered || d.TombstoneSlice == "" {
		return domain.Decision{}, false
	}
	return d, true
}

// recheckPending re-runs the checks at the moment of deletion on the tombstones of a pending
// hand-off, and withdraws in place each that no longer passes: an object re-created since the
// history was written must not be deleted by an eno-reconciler that loads the synthesis days
// later. It returns when to look again; zero when nothing is pending. The decision is not
// rewritten.
func (s *Service) recheckPending(ctx context.Context, comp domain.Composition) (time.Duration, error) {
	d, ok := pendingHandoff(comp)
	if !ok || s.policy.CheckHandoff(comp) != nil {
		return 0, nil
	}
	for _, slice := range comp.DecidedRecoverySlices(d) {
		if err := s.recheckSlice(ctx, comp, slice); err != nil {
			return 0, err
		}
	}
	return s.cfg.PendingRecheckInterval, nil
}

// recheckSlice re-runs the checks on the tombstones of one committed recovery slice and
// withdraws in place each that no longer passes. A gone slice is left to step 4 (which creates
// it again, or reports it lost); one that is not this controller's hand-off is never written,
// and refused as RecoverySliceInvalid.
func (s *Service) recheckSlice(ctx context.Context, comp domain.Composition, slice string) error {
	sl, err := s.deps.Slices.GetSlice(ctx, comp.Namespace, slice)
	switch {
	case errors.Is(err, ports.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("rechecking the hand-off: reading recovery slice %s: %w", slice, err)
	}
	if _, err := domain.HandoffFromSlice(comp, sl); err != nil {
		invalid := &domain.RecoverySliceInvalidError{Slice: slice, Detail: err.Error()}
		s.refuse(comp, "RecoverySliceInvalid", invalid)
		return invalid
	}
	_, err = s.withdrawFailing(ctx, comp, sl)
	return err
}

// withdrawFailing re-runs the checks at the moment of deletion on the tombstones of sl not yet
// withdrawn, and withdraws in place each that fails, with a TombstoneWithdrawn event and metric.
// It returns the slice as it now stands.
func (s *Service) withdrawFailing(ctx context.Context, comp domain.Composition, sl domain.ResourceSlice) (domain.ResourceSlice, error) {
	pending, err := domain.PendingTombstones(sl)
	if err != nil || len(pending) == 0 {
		return sl, err
	}
	observed, err := s.planner.observe(ctx, pending)
	if err != nil {
		return sl, fmt.Errorf("rechecking the hand-off: %w", err)
	}
	w, err := domain.PlanWithdrawal(sl, observed)
	if err != nil || len(w.Withdrawn) == 0 {
		return sl, err
	}
	rewritten := sl
	rewritten.Resources = w.Resources
	if err := s.deps.Sink.WithdrawTombstones(ctx, comp, rewritten); err != nil {
		return sl, fmt.Errorf("rechecking the hand-off: withdrawing %d tombstones from %s: %w", len(w.Withdrawn), sl.Name, err)
	}
	withdrawn := make([]domain.Tombstone, len(w.Withdrawn))
	for i, dt := range w.Withdrawn {
		withdrawn[i] = dt.Tombstone
	}
	s.deps.Metrics.TombstoneAlert("TombstoneWithdrawn", len(w.Withdrawn))
	s.deps.Events.Warning(comp, "TombstoneWithdrawn", fmt.Sprintf(
		"%d tombstones of recovery slice %s no longer pass the checks before deletion and were withdrawn (Eno skips them): %s; %s",
		len(w.Withdrawn), sl.Name, domain.FirstIDs(withdrawn, withdrawnEventLimit), domain.DroppedSummary(w.Withdrawn)))
	logr.FromContextOrDiscard(ctx).Info("withdrew tombstones of a pending hand-off", "slice", sl.Name, "withdrawn", len(w.Withdrawn))
	return rewritten, nil
}
