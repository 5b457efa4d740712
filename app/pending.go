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
	observed, err := s.observe(ctx, pending)
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
	s.deps.Events.Event(comp, true, "TombstoneWithdrawn", fmt.Sprintf(
		"%d tombstones of recovery slice %s no longer pass the checks before deletion and were withdrawn (Eno skips them): %s; %s",
		len(w.Withdrawn), sl.Name, domain.FirstIDs(withdrawn, withdrawnEventLimit), domain.DroppedSummary(w.Withdrawn)))
	logr.FromContextOrDiscard(ctx).Info("withdrew tombstones of a pending hand-off", "slice", sl.Name, "withdrawn", len(w.Withdrawn))
	return rewritten, nil
}
