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

// disarmedEventLimit is how many tombstones one HandoffDisarmed event names.
const disarmedEventLimit = 20

// watch looks at the pending tombstones of a decided or carried hand-off (watchTakeovers), every
// --pending-recheck-interval and when the fleet index sees a slice threaten it. A decided slice
// not this controller's is refused (readNamed); a carried one is left out (readCarried).
func (s *Service) watch(ctx context.Context, comp domain.Composition, state domain.HandoffState, names []string) error {
	var read []domain.ResourceSlice
	var err error
	if state == domain.HandoffCarried {
		read, _, _, err = readCarried(ctx, s.deps.Slices, comp, names)
	} else {
		_, read, _, err = s.readNamed(ctx, comp, names)
	}
	if err != nil {
		return fmt.Errorf("watching the hand-off: %w", err)
	}
	return s.watchTakeovers(ctx, comp, read)
}

// watchFailed is how a failed watch is retried: a conflict is returned, for the controller's
// quick backoff, and so is a refused slice (RecoverySliceInvalid, an operator's to remove); a
// failed read (the slice list, a slice) is reported, not returned, and looked at again after
// --pending-recheck-interval: returned, the controller's backoff would grow past the interval (to minutes)
// while the hand-off waits armed (design §6.2, "A hand-off stays watched").
func (s *Service) watchFailed(ctx context.Context, comp domain.Composition, err error) (requeue time.Duration, _ error) {
	var invalid *domain.RecoverySliceInvalidError
	if errors.Is(err, ports.ErrConflict) || errors.As(err, &invalid) {
		return 0, err
	}
	logr.FromContextOrDiscard(ctx).Error(err, "watching the hand-off failed; looking again after the watch interval")
	s.deps.Events.Warning(comp, "HandoffWatchFailed", fmt.Sprintf("%v; the hand-off stays armed and is looked at again in %s", err, s.cfg.PendingRecheckInterval))
	return s.cfg.PendingRecheckInterval, nil
}

// watchTakeovers looks, while comp is armed, for what the pending tombstones' precondition cannot
// see: an identity a slice of another Composition (not a source incarnation) applies or patches,
// as Eno applies every Composition with one field manager, so an identical takeover writes
// nothing. Finding any, it disarms the whole hand-off, its only write: Eno deletes none of them.
func (s *Service) watchTakeovers(ctx context.Context, comp domain.Composition, read []domain.ResourceSlice) error {
	var tombstones []domain.Tombstone
	excluded := []string{comp.UID}
	for _, sl := range read {
		pending, err := domain.PendingTombstones(sl)
		if err != nil {
			return err
		}
		tombstones = append(tombstones, pending...)
		excluded = append(excluded, sl.Annotations[domain.AnnotationSourceUID])
	}
	if !comp.Armed() || len(tombstones) == 0 {
		return nil
	}
	taken, where, err := s.producedElsewhere(ctx, tombstones, excluded...)
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
	return s.disarm(ctx, comp, live, len(taken), fmt.Sprintf("%d tombstones of the hand-off name objects another composition now produces (%s, in %s)",
		len(taken), domain.FirstIDs(taken, disarmedEventLimit), where[0]))
}

// producedElsewhere asks the fleet index which tombstones another Composition than the excluded
// applies or patches, and where.
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

// retire disarms a done or abandoned hand-off (domain.HandoffStateOf), after a live recheck that
// the live Composition is in the same state: ArmedDone once Eno has acted on every tombstone,
// ArmedOff once nothing watches it any more. ie is why recovery leaves comp alone, or nil.
func (s *Service) retire(ctx context.Context, comp domain.Composition, state domain.HandoffState, ie *domain.IneligibleError) error {
	live, err := s.recheck(ctx, comp, func(live domain.Composition) error {
		if again, _ := domain.HandoffStateOf(live, s.policy.Ineligible(live)); again != state {
			return errors.New("its hand-off no longer needs disarming")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("disarming the hand-off: %w", err)
	}
	if state == domain.HandoffDone {
		if _, err := s.deps.Sink.ArmTombstones(ctx, live, domain.ArmedDone); err != nil {
			return fmt.Errorf("disarming the hand-off: %w", err)
		}
		logr.FromContextOrDiscard(ctx).Info("disarmed a hand-off", "value", domain.ArmedDone, "why", "synthesis "+comp.SynthesisUUID()+" is Ready, so Eno has acted on every tombstone it was handed")
		return nil
	}
	return s.disarm(ctx, comp, live, 0, "the composition left recovery ("+ie.Reason.String()+") while its hand-off was armed, and nothing watches it any more")
}

// disarm writes ArmedOff on live, for good, and says why: a HandoffDisarmed warning and metric
// (n tombstones taken over, or 0).
func (s *Service) disarm(ctx context.Context, comp, live domain.Composition, n int, why string) error {
	if err := s.deps.Sink.DisarmTombstones(ctx, live); err != nil {
		return fmt.Errorf("disarming the hand-off: %w", err)
	}
	s.deps.Metrics.TombstoneAlert("HandoffDisarmed", n)
	s.deps.Events.Warning(comp, "HandoffDisarmed", fmt.Sprintf("%s; %s is now %q, so Eno deletes none of the hand-off's tombstones: check the remaining orphans by hand",
		why, domain.AnnotationArmed, domain.ArmedOff))
	logr.FromContextOrDiscard(ctx).Info("disarmed a hand-off", "value", domain.ArmedOff, "why", why)
	return nil
}
