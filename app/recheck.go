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
// input of the plan computed from read.
func (s *Service) planStillHolds(read domain.Composition) func(domain.Composition) error {
	return stillHolds(read, s.policy.CheckRecovery, domain.ChangedPlanInput)
}

// readyToCommit adds to planStillHolds what arming requires of the live object itself: not
// disarmed, and no synthesis in flight (domain.CommitPrecondition). A recovery slice named since
// the read changes the slice list, a plan input: a hand-off there is finished, never joined.
func (s *Service) readyToCommit(read domain.Composition) func(domain.Composition) error {
	holds := s.planStillHolds(read)
	return func(live domain.Composition) error {
		if live.HandoffDisarmed() {
			return fmt.Errorf("its hand-off is disarmed (%s=%s): recovery hands Eno nothing until an operator removes the annotation", domain.AnnotationArmed, domain.ArmedOff)
		}
		if why := domain.CommitPreconditionOf(live).MovedOn(live); why != "" {
			return fmt.Errorf("%s: %w", why, ports.ErrSynthesisMoved)
		}
		return holds(live)
	}
}

// disarmedEventLimit is how many tombstones one HandoffDisarmed event names.
const disarmedEventLimit = 20

// pendingHandoff reports whether comp's current synthesis is decided Recovered: its tombstones
// sit in a synthesis that eno-reconciler applies whenever it loads it, until Eno's executor
// carries them into a later one.
func pendingHandoff(comp domain.Composition) (domain.Decision, bool) {
	d, ok := comp.FinishedDecision()
	// FinishedDecision is the current synthesis's: a later synthesis ends the check.
	if !ok || d.Outcome != domain.OutcomeRecovered || d.TombstoneSlice == "" {
		return domain.Decision{}, false
	}
	return d, true
}

// recheckPending watches the tombstones of a pending hand-off for what their precondition
// cannot see (guardHandoff). It returns when to look again; zero when nothing is pending. A gone
// slice has nothing left to watch; one that is not this controller's hand-off is refused as
// RecoverySliceInvalid.
func (s *Service) recheckPending(ctx context.Context, comp domain.Composition) (time.Duration, error) {
	d, ok := pendingHandoff(comp)
	if !ok || s.policy.CheckHandoff(comp) != nil {
		return 0, nil
	}
	var read []domain.ResourceSlice
	for _, slice := range comp.DecidedRecoverySlices(d) {
		sl, err := s.deps.Slices.GetSlice(ctx, comp.Namespace, slice)
		switch {
		case errors.Is(err, ports.ErrNotFound):
			continue
		case err != nil:
			return 0, fmt.Errorf("watching the hand-off: reading recovery slice %s: %w", slice, err)
		}
		if _, err := domain.HandoffFromSlice(comp, sl); err != nil {
			invalid := &domain.RecoverySliceInvalidError{Slice: slice, Detail: err.Error()}
			s.refuse(comp, "RecoverySliceInvalid", invalid)
			return 0, invalid
		}
		read = append(read, sl)
	}
	if err := s.guardSlices(ctx, comp, read); err != nil {
		return 0, err
	}
	return s.cfg.PendingRecheckInterval, nil
}

// watchFailed is how a failed watch of a pending hand-off is retried (N4): a conflict is
// returned, for the controller's quick backoff, and so is a refused slice (RecoverySliceInvalid,
// an operator's to remove); a failed read (the slice list, a slice) is reported, not returned,
// and looked at again after --pending-recheck-interval: returned, the controller's backoff would
// grow past the interval (to minutes) while the hand-off waits armed (design §6.2, "A hand-off
// stays watched").
func (s *Service) watchFailed(ctx context.Context, comp domain.Composition, err error) (time.Duration, error) {
	var invalid *domain.RecoverySliceInvalidError
	if errors.Is(err, ports.ErrConflict) || errors.As(err, &invalid) {
		return 0, err
	}
	logr.FromContextOrDiscard(ctx).Error(err, "watching the hand-off failed; looking again after the recheck interval")
	s.deps.Events.Warning(comp, "HandoffWatchFailed", fmt.Sprintf("%v; the hand-off stays armed and is looked at again in %s", err, s.cfg.PendingRecheckInterval))
	return s.cfg.PendingRecheckInterval, nil
}

// guardSlices is guardHandoff over the tombstones the recovery slices read hold, not counting
// the slices of the incarnations they name as their source.
func (s *Service) guardSlices(ctx context.Context, comp domain.Composition, read []domain.ResourceSlice) error {
	var tombstones []domain.Tombstone
	var sources []string
	for _, sl := range read {
		pending, err := domain.PendingTombstones(sl)
		if err != nil {
			return err
		}
		tombstones = append(tombstones, pending...)
		sources = append(sources, sl.Annotations[domain.AnnotationSourceUID])
	}
	return s.guardHandoff(ctx, comp, tombstones, sources)
}

// guardHandoff looks, while comp is armed, for the evidence that the tombstones' own
// precondition cannot see: an identity that a slice of another Composition applies or patches
// (K4: Eno applies every Composition with one field manager, so a takeover with an identical
// manifest writes nothing). Finding any, it disarms the whole hand-off, its only write, with a
// HandoffDisarmed warning and metric: Eno then deletes none of its tombstones, wherever it holds
// them.
func (s *Service) guardHandoff(ctx context.Context, comp domain.Composition, tombstones []domain.Tombstone, sourceUIDs []string) error {
	if !comp.Armed() || len(tombstones) == 0 {
		return nil
	}
	taken, where, err := s.producedElsewhere(ctx, tombstones, append([]string{comp.UID}, sourceUIDs...)...)
	if err != nil {
		return fmt.Errorf("watching the hand-off: %w", err)
	}
	if len(taken) == 0 {
		return nil
	}
	live, err := s.recheck(ctx, comp, func(domain.Composition) error { return nil })
	if err != nil {
		return err
	}
	if err := s.deps.Sink.DisarmTombstones(ctx, live); err != nil {
		return fmt.Errorf("disarming the hand-off: %w", err)
	}
	s.deps.Metrics.TombstoneAlert("HandoffDisarmed", len(taken))
	s.deps.Events.Warning(comp, "HandoffDisarmed", fmt.Sprintf(
		"%d tombstones of the hand-off name objects another composition now produces (%s, in %s); %s is now %q, so Eno deletes none of the hand-off's tombstones: check the remaining orphans by hand",
		len(taken), domain.FirstIDs(taken, disarmedEventLimit), where[0], domain.AnnotationArmed, domain.ArmedOff))
	logr.FromContextOrDiscard(ctx).Info("disarmed a hand-off: another composition produces some of its tombstones", "tombstones", len(taken))
	return nil
}

// producedElsewhere asks the fleet index which tombstones name an identity a slice of another
// Composition than the excluded applies or patches (K4), and where.
func (s *Service) producedElsewhere(ctx context.Context, tombstones []domain.Tombstone, excluded ...string) (taken []domain.Tombstone, where []string, err error) {
	ids := make([]domain.ResourceID, len(tombstones))
	for i, t := range tombstones {
		ids[i] = t.Entry.ID()
	}
	elsewhere, err := s.deps.Fleet.ProducedElsewhere(ctx, ids, excluded...)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the fleet index: %w", err)
	}
	for _, t := range tombstones {
		if slice, ok := elsewhere[t.Entry.ID()]; ok {
			taken, where = append(taken, t), append(where, slice)
		}
	}
	return taken, where, nil
}

// retireHandoff disarms comp's armed hand-off once Eno has acted on it, or once nothing watches
// it any more (domain.RetirementOf), after a live recheck that the live Composition says the
// same. ie is why recovery leaves comp alone, or nil.
func (s *Service) retireHandoff(ctx context.Context, comp domain.Composition, ie *domain.IneligibleError) error {
	r, ok := domain.RetirementOf(comp, ie)
	if !ok {
		return nil
	}
	live, err := s.recheck(ctx, comp, func(live domain.Composition) error {
		_, liveIE := s.policy.RecoveryStageOf(live)
		if again, ok := domain.RetirementOf(live, liveIE); !ok || again != r {
			return errors.New("its hand-off no longer needs disarming")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("disarming the hand-off: %w", err)
	}
	if r.Value == domain.ArmedOff {
		err = s.deps.Sink.DisarmTombstones(ctx, live)
	} else {
		_, err = s.deps.Sink.ArmTombstones(ctx, live, r.Value)
	}
	if err != nil {
		return fmt.Errorf("disarming the hand-off: %w", err)
	}
	if r.Value == domain.ArmedOff {
		s.deps.Metrics.TombstoneAlert("HandoffDisarmed", 0)
		s.deps.Events.Warning(comp, "HandoffDisarmed", fmt.Sprintf("%s; %s is now %q, so Eno deletes none of the hand-off's tombstones: check the remaining orphans by hand",
			r.Why, domain.AnnotationArmed, r.Value))
	}
	logr.FromContextOrDiscard(ctx).Info("disarmed a hand-off", "value", r.Value, "why", r.Why)
	return nil
}
