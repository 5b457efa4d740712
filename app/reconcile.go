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

// Result summarizes one reconcile.
type Result struct {
	// Skipped says why nothing ran, when nothing did.
	Skipped *domain.IneligibleError
	// Recovery is set when a recovery decision was evaluated.
	Recovery *RecoverResult
	// Recording is set when recording ran.
	Recording *RecordResult
	// RequeueAfter asks for another reconcile after this long even if nothing changes: a
	// pending hand-off is checked again on an interval. Zero asks for none.
	RequeueAfter time.Duration
}

// Reconcile runs recovery, then recording, for one Composition: the entry point eno-reconciler
// and the controller loop call. A Composition that no longer exists is not an error.
func (s *Service) Reconcile(ctx context.Context, ref domain.CompositionRef) (res Result, err error) {
	start := time.Now()
	// observed is reported unless the reconcile stopped before it knew the state.
	var observed *ports.CompositionState
	var comp domain.Composition
	defer func() {
		if observed != nil {
			s.observed(ref, comp, *observed)
		}
		s.deps.Metrics.ReconcileDone(time.Since(start), err)
	}()
	ctx = withComposition(ctx, ref)

	comp, err = s.deps.Compositions.GetComposition(ctx, ref)
	if errors.Is(err, ports.ErrNotFound) {
		observed = &ports.CompositionState{}
		return res, nil
	}
	if err != nil {
		return res, err // the reader names the Composition and what it tried
	}

	var reads *liveReads
	switch stage, ie := s.policy.RecoveryStageOf(comp); stage {
	case domain.StageIneligible:
		if err := s.leaveAlone(ctx, comp, ie); err != nil {
			return res, err
		}
		observed, res.Skipped = &ports.CompositionState{}, ie
		if marksWhenIneligible(ie) {
			return res, s.markDisabledLater(ctx, comp)
		}
		return res, nil
	case domain.StageDecided:
		// Watch first, whatever the resynthesis request then meets: the watch must not wait
		// for the hand-off to complete.
		phase, names := domain.HandoffPhaseOf(comp)
		observed = &ports.CompositionState{HandoffPending: phase == domain.HandoffDecided}
		var recheckErr error
		res.RequeueAfter, recheckErr = s.recheckPending(ctx, comp)
		if phase == domain.HandoffDecided && s.policy.CheckHandoff(comp) == nil {
			if err := s.requestResynthesis(ctx, comp, names); err != nil {
				return res, errors.Join(err, recheckErr)
			}
		}
		if recheckErr != nil {
			res.RequeueAfter, err = s.watchFailed(ctx, comp, recheckErr)
			return res, err
		}
	default:
		rec, r, err := s.recover(ctx, comp)
		if err != nil {
			return res, fmt.Errorf("recovering: %w", err)
		}
		res.Recovery = &rec
		_, pending := pendingHandoff(rec.Composition)
		if pending && rec.Written {
			res.RequeueAfter = s.cfg.PendingRecheckInterval
		}
		if !rec.Plan.Decision.Outcome.Finished() {
			observed = &ports.CompositionState{HeldForReview: true}
			return res, nil // held for review: recording waits (CheckRecording refuses it too)
		}
		observed = &ports.CompositionState{HandoffPending: pending}
		r.unresolved = domain.UnresolvedOf(rec.Plan)
		comp, reads = rec.Composition, &r
	}

	if err := s.keepWatching(ctx, comp, &res); err != nil {
		return res, err
	}

	recRes, err := s.record(ctx, comp, reads)
	if ie, ok := isIneligible(err); ok {
		res.Skipped = ie
		if marksWhenIneligible(ie) {
			return res, s.markDisabledLater(ctx, comp)
		}
		return res, nil
	}
	if err != nil {
		if observed != nil {
			observed.RecordingFailing = true
		}
		return res, err
	}
	res.Recording = &recRes
	return res, nil
}

// keepWatching watches a carried hand-off that waits for Eno while its synthesis is not Ready,
// and asks to look again in time. Once it is Ready, Eno has acted on every tombstone: disarm them.
func (s *Service) keepWatching(ctx context.Context, comp domain.Composition, res *Result) error {
	if err := s.retireHandoff(ctx, comp, nil); err != nil {
		return err
	}
	wait, err := s.watchCarried(ctx, comp)
	if err != nil {
		res.RequeueAfter, err = s.watchFailed(ctx, comp, err)
		return err
	}
	if wait > 0 && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
		res.RequeueAfter = wait
	}
	return nil
}

// observed reports what the reconcile found. A Composition gone or ineligible (out of scope,
// opted out, deleting) is forgotten, with its orphan count; any other is reported with its
// lineage and its last orphan count.
func (s *Service) observed(ref domain.CompositionRef, comp domain.Composition, state ports.CompositionState) {
	if stage, _ := s.policy.RecoveryStageOf(comp); stage == domain.StageIneligible {
		s.orphans.forget(ref)
		s.deps.Metrics.CompositionObserved(ref, ports.CompositionState{})
		return
	}
	state.Lineage, _ = domain.LineageOf(comp) // eligible, so valid
	state.OrphansRemaining, _ = s.orphans.get(ref)
	s.deps.Metrics.CompositionObserved(ref, state)
}

// leaveAlone disarms an armed hand-off of a Composition recovery may no longer act on, and says
// why it is skipped.
func (s *Service) leaveAlone(ctx context.Context, comp domain.Composition, ie *domain.IneligibleError) error {
	if err := s.retireHandoff(ctx, comp, ie); err != nil {
		return err
	}
	s.skipped(ctx, comp, ie)
	return nil
}

// skipped logs why a Composition is left alone; an unusable lineage override, or an opt-in
// annotation with another value than the one that opts in, also gets a Warning event.
func (s *Service) skipped(ctx context.Context, comp domain.Composition, ie *domain.IneligibleError) {
	log := logr.FromContextOrDiscard(ctx)
	if ie.Reason == domain.IneligibleInvalidLineage {
		log.Info("skipping composition: invalid lineage override", "reason", ie.Detail)
		s.deps.Metrics.Refusal(ie.Reason.String())
		s.deps.Events.Warning(comp, ie.Reason.String(), ie.Detail+"; no inventory is recorded or recovered")
		return
	}
	if ie.Reason == domain.IneligibleNotOptedIn && ie.Detail != "" {
		s.deps.Events.Warning(comp, ie.Reason.String(), ie.Detail+"; nothing is recorded or recovered")
	}
	log.V(2).Info("skipping composition", "reason", ie.Reason.String())
}

// withComposition adds the Composition to the context's logger once, at the entry point, so
// that every line below carries it exactly once.
func withComposition(ctx context.Context, ref domain.CompositionRef) context.Context {
	return logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues("composition", ref.String()))
}
