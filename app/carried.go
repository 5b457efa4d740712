package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// orphansEventLimit is how many remaining orphans one event names.
const orphansEventLimit = 20

// verifyCarried checks, before the first synthesis after a hand-off is recorded, that Eno deleted
// what the previous synthesis's recovery slices handed it: an object still present is
// OrphansRemain, a gone slice RecoverySliceLost. Recording proceeds whatever it finds (a
// Composition must not stay without history); a failed read is logged (design §6.2, "Did Eno do
// it?"). It returns what the recording lists as unresolved (design §3): the orphans that
// remain, and what the Recovered plan kept for a person.
func (s *Service) verifyCarried(ctx context.Context, comp domain.Composition) []domain.Unresolved {
	log := logr.FromContextOrDiscard(ctx)
	check, err := checkCarried(ctx, s.deps.Slices, s.planner, comp)
	if err != nil {
		log.Error(err, "could not check that Eno deleted the tombstones it was handed")
		return check.kept
	}
	s.orphans.set(comp.Ref(), len(check.remaining))
	if len(check.gone) > 0 {
		// A recovery slice is never written again: one gone before Eno carried it took its
		// tombstones with it (Eno resynthesizes without a missing slice), and what they named
		// may remain. A skipped cleanup, said out loud.
		s.deps.Metrics.TombstoneAlert("RecoverySliceLost", len(check.gone))
		s.deps.Events.Warning(comp, "RecoverySliceLost", fmt.Sprintf(
			"recovery slice %s of the previous synthesis is gone, so Eno may not have been handed its tombstones and whether it deleted them is not checked; the orphans it named may remain: check them by hand (recording proceeds)",
			strings.Join(check.gone, ", ")))
	}
	if len(check.tombstones) == 0 {
		return check.kept
	}
	if len(check.remaining) == 0 {
		log.V(1).Info("Eno deleted every object it was handed", "tombstones", len(check.tombstones))
		return check.kept
	}
	s.deps.Metrics.TombstoneAlert("OrphansRemain", len(check.remaining))
	s.deps.Events.Warning(comp, "OrphansRemain", fmt.Sprintf(
		"%d of the %d objects handed to Eno as tombstones still exist after its carrying synthesis %s became Ready: %s; check them by hand (recording proceeds, and inspect lists them until they are gone)",
		len(check.remaining), len(check.tombstones), comp.SynthesisUUID(), domain.FirstIDs(check.remaining, orphansEventLimit)))
	log.Info("objects handed to Eno as tombstones remain", "remaining", len(check.remaining), "tombstones", len(check.tombstones))
	since := s.cfg.Now().UTC().Truncate(time.Second)
	for _, t := range check.remaining {
		check.kept = append(check.kept, domain.NewUnresolved(t, "OrphansRemain", "handed to Eno, not deleted", comp.PreviousSynthesis.UUID, since))
	}
	return check.kept
}

// carriedCheck is what the "did Eno do it?" check found.
type carriedCheck struct {
	tombstones, remaining []domain.Tombstone
	gone                  []string
	// kept is what the Recovered plan kept for a person, as its recovery slices list it.
	kept []domain.Unresolved
}

// checkCarried reads the hand-off comp's previous synthesis carried, and the objects its
// tombstones name, through p: the controller's check and inspect's.
func checkCarried(ctx context.Context, slices ports.SliceReader, p planner, comp domain.Composition) (check carriedCheck, err error) {
	var kerr error
	read, tombstones, gone, err := readCarried(ctx, slices, comp, domain.CarriedRecoverySlices(comp))
	check.tombstones, check.gone = tombstones, gone
	check.kept, kerr = domain.KeptIn(read)
	if err = errors.Join(err, kerr); err != nil || len(check.tombstones) == 0 {
		return check, err
	}
	observed, err := p.observe(ctx, check.tombstones)
	if err != nil {
		return check, fmt.Errorf("reading the objects Eno was handed: %w", err)
	}
	check.remaining = domain.RemainingOrphans(check.tombstones, observed)
	return check, nil
}

// readCarried reads the carried recovery slices names with their pending tombstones, and the
// names of those gone. One that is not this incarnation's hand-off is left out (logged).
func readCarried(ctx context.Context, slices ports.SliceReader, comp domain.Composition, names []string) (read []domain.ResourceSlice, pending []domain.Tombstone, gone []string, err error) {
	all, gone, err := readRecoverySlices(ctx, slices, comp, names)
	for _, sl := range all {
		p, err := domain.CarriedTombstones(comp, sl)
		if err != nil {
			logr.FromContextOrDiscard(ctx).Info("a slice with a recovery slice's name in the previous synthesis is not this controller's hand-off; not checked", "slice", sl.Name, "reason", err.Error())
			continue
		}
		read, pending = append(read, sl), append(pending, p...)
	}
	return read, pending, gone, err
}

// readRecoverySlices reads the recovery slices names of comp, in order, and the names of those
// that are gone.
func readRecoverySlices(ctx context.Context, slices ports.SliceReader, comp domain.Composition, names []string) (read []domain.ResourceSlice, gone []string, err error) {
	for _, name := range names {
		sl, err := slices.GetSlice(ctx, comp.Namespace, name)
		switch {
		case errors.Is(err, ports.ErrNotFound):
			gone = append(gone, name)
		case err != nil:
			return nil, nil, fmt.Errorf("reading recovery slice %s: %w", name, err)
		default:
			read = append(read, sl)
		}
	}
	return read, gone, nil
}
