package app

import (
	"context"
	"errors"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// readSynthesis reads every slice of the current synthesis before anything is prepared.
// Any missing, terminating, unreadable or malformed slice stops the pass with a *domain.SliceError.
func (s *Service) readSynthesis(ctx context.Context, comp domain.Composition) (domain.SynthesisContents, error) {
	if comp.Synthesis == nil {
		return domain.SynthesisContents{}, &domain.SliceError{Slice: "(none)", Problem: domain.SliceMissing, Detail: "composition has no current synthesis"}
	}
	slices := make([]domain.ResourceSlice, 0, len(comp.Synthesis.Slices))
	for _, name := range comp.Synthesis.Slices {
		sl, err := s.deps.Slices.GetSlice(ctx, comp.Namespace, name)
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
