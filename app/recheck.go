package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// recheck reads the Composition live and aborts unless it is the same incarnation and synthesis
// and still passes check. It returns the live object, whose resourceVersion guards the next write.
func (s *Service) recheck(ctx context.Context, read domain.Composition, check func(domain.Composition) error) (domain.Composition, error) {
	live, err := s.deps.Live.LiveComposition(ctx, read.Ref())
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
// Before a retried append, read is the Composition as this pass wrote it, and the arming
// annotation must still be digest.
func (s *Service) readyToCommit(read domain.Composition, digest string) func(domain.Composition) error {
	holds := s.planStillHolds(read)
	return func(live domain.Composition) error {
		if a := live.Annotations[domain.AnnotationArmed]; digest != "" && a != digest {
			return fmt.Errorf("its arming annotation is now %q, not this hand-off's %s", a, digest)
		}
		if live.HandoffDisarmed() {
			return fmt.Errorf("its hand-off is disarmed (%s=%s): recovery hands Eno nothing until an operator removes the annotation", domain.AnnotationArmed, domain.ArmedOff)
		}
		if why := domain.CommitPreconditionOf(live).MovedOn(live); why != "" {
			return fmt.Errorf("%s: %w", why, ports.ErrSynthesisMoved)
		}
		return holds(live)
	}
}
