package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// orphansEventLimit is how many remaining orphans one event names.
const orphansEventLimit = 20

// verifyCarried checks, once, before the first synthesis after a hand-off is recorded, that Eno
// did delete what it was handed (design §6.2, "Did Eno do it?"): the tombstones come from the
// recovery slices that the previous synthesis names, and any tombstoned object still present
// (and not withdrawn) is reported as OrphansRemain. Recording proceeds whatever it finds: a
// Composition must not stay without history, and nothing is retried automatically. A read that
// fails is logged and skips the report.
func (s *Service) verifyCarried(ctx context.Context, comp domain.Composition) {
	names := domain.CarriedRecoverySlices(comp)
	if len(names) == 0 {
		return
	}
	log := logr.FromContextOrDiscard(ctx)
	var tombstones []domain.Tombstone
	var gone []string
	for _, name := range names {
		sl, err := s.deps.Slices.GetSlice(ctx, comp.Namespace, name)
		if errors.Is(err, ports.ErrNotFound) {
			gone = append(gone, name)
			continue
		}
		if err != nil {
			log.Error(err, "could not read a carried recovery slice; not checking that Eno deleted its tombstones", "slice", name)
			return
		}
		ts, err := domain.CarriedTombstones(comp, sl)
		if err != nil {
			log.Info("a slice with a recovery slice's name in the previous synthesis is not this controller's hand-off; not checked", "slice", name, "reason", err.Error())
			continue
		}
		tombstones = append(tombstones, ts...)
	}
	if len(gone) > 0 {
		s.deps.Events.Event(comp, false, "VerificationSkipped", fmt.Sprintf(
			"recovery slice %s of the previous synthesis is gone, so whether Eno deleted its tombstones is not checked; recording proceeds",
			strings.Join(gone, ", ")))
	}
	if len(tombstones) == 0 {
		return
	}
	observed, err := s.observe(ctx, tombstones)
	if err != nil {
		log.Error(err, "could not read the objects Eno was handed; not checking that it deleted them")
		return
	}
	remaining := domain.RemainingOrphans(tombstones, observed)
	if len(remaining) == 0 {
		log.V(1).Info("Eno deleted every object it was handed", "tombstones", len(tombstones))
		return
	}
	s.deps.Metrics.TombstoneAlert("OrphansRemain", len(remaining))
	s.deps.Events.Event(comp, true, "OrphansRemain", fmt.Sprintf(
		"%d of the %d objects handed to Eno as tombstones still exist after its carrying synthesis %s became Ready: %s; check them by hand (recording proceeds, and they leave the history)",
		len(remaining), len(tombstones), comp.SynthesisUUID(), domain.FirstIDs(remaining, orphansEventLimit)))
	log.Info("objects handed to Eno as tombstones remain", "remaining", len(remaining), "tombstones", len(tombstones))
}
