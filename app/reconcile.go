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
	// pending hand-off is checked again on an interval (design §6.2). Zero asks for none.
	RequeueAfter time.Duration
}

// Reconcile runs recovery, then recording, for one Composition: the entry point eno-reconciler
// and the controller loop call. A Composition that no longer exists is not an error.
func (s *Service) Reconcile(ctx context.Context, ref domain.CompositionRef) (res Result, err error) {
	start := time.Now()
	// observed is reported unless the reconcile stopped before it knew the state.
	var observed *ports.CompositionState
	defer func() {
		if observed != nil {
			s.deps.Metrics.CompositionObserved(ref, *observed)
		}
		s.deps.Metrics.ReconcileDone(time.Since(start), err)
	}()
	ctx = withComposition(ctx, ref)

	comp, err := s.deps.Compositions.GetComposition(ctx, ref)
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
		s.skipped(ctx, comp, ie)
		observed = &ports.CompositionState{}
		res.Skipped = ie
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
		comp, reads = rec.Composition, &r
	}

	// A carried hand-off waits for Eno while its synthesis is not Ready: keep watching it.
	wait, err := s.watchCarried(ctx, comp)
	if err != nil {
		res.RequeueAfter, err = s.watchFailed(ctx, comp, err)
		return res, err
	}
	if wait > 0 && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
		res.RequeueAfter = wait
	}

	recRes, err := s.record(ctx, comp, reads)
	if ie, ok := isIneligible(err); ok {
		res.Skipped = ie
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

// skipped logs why a Composition is left alone; an unusable lineage override also gets an event.
func (s *Service) skipped(ctx context.Context, comp domain.Composition, ie *domain.IneligibleError) {
	log := logr.FromContextOrDiscard(ctx)
	if ie.Reason == domain.IneligibleInvalidLineage {
		log.Info("skipping composition: invalid lineage override", "reason", ie.Detail)
		s.deps.Metrics.Refusal(ie.Reason.String())
		s.deps.Events.Warning(comp, ie.Reason.String(), ie.Detail+"; no inventory is recorded or recovered")
		return
	}
	log.V(2).Info("skipping composition", "reason", ie.Reason.String())
}

// withComposition adds the Composition to the context's logger once, at the entry point, so
// that every line below carries it exactly once.
func withComposition(ctx context.Context, ref domain.CompositionRef) context.Context {
	return logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues("composition", ref.String()))
}
