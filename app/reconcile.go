package app

import (
	"context"
	"errors"
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

// Reconcile moves the Composition's hand-off on by one step (advance), then records it: the
// entry point eno-reconciler and the controller loop call. A Composition gone is no error.
func (s *Service) Reconcile(ctx context.Context, ref domain.CompositionRef) (res Result, err error) {
	start := time.Now()
	var st step // its state is reported unless the reconcile stopped before it knew it
	defer func() {
		if st.observed != nil {
			s.observed(ref, st.comp, *st.observed)
		}
		s.deps.Metrics.ReconcileDone(time.Since(start), err)
	}()
	ctx = withComposition(ctx, ref)
	comp, err := s.deps.Compositions.GetComposition(ctx, ref)
	if errors.Is(err, ports.ErrNotFound) {
		st.observed = &ports.CompositionState{}
		return res, nil
	}
	if err != nil {
		return res, err // the reader names the Composition and what it tried
	}
	st, err = s.advance(ctx, comp)
	res.Recovery, res.RequeueAfter = st.recovery, st.requeue
	if err != nil || !st.record {
		return res, s.skip(ctx, st.comp, st.skipped, &res, err)
	}
	recRes, err := s.record(ctx, st.comp, st.reads)
	if ie, ok := isIneligible(err); ok {
		return res, s.skip(ctx, st.comp, ie, &res, nil)
	}
	if err != nil {
		st.observed.RecordingFailing = true
		return res, err
	}
	res.Recording = &recRes
	return res, nil
}

// skip reports that the reconcile skipped comp for ie, and marks the entries disabled since the
// history when ie asks for it. err, or no ie, is returned as it is.
func (s *Service) skip(ctx context.Context, comp domain.Composition, ie *domain.IneligibleError, res *Result, err error) error {
	if err != nil || ie == nil {
		return err
	}
	res.Skipped = ie
	if marksWhenIneligible(ie) {
		return s.markDisabledLater(ctx, comp)
	}
	return nil
}

// observed reports what the reconcile found; a Composition gone or ineligible is forgotten, with
// its counts.
func (s *Service) observed(ref domain.CompositionRef, comp domain.Composition, state ports.CompositionState) {
	if s.policy.Ineligible(comp) != nil {
		s.orphans.last.LoadAndDelete(ref) // not Delete: internal/archtest reserves that name
		s.kept.last.LoadAndDelete(ref)
		s.deps.Metrics.CompositionObserved(ref, ports.CompositionState{})
		return
	}
	state.Lineage, _ = domain.LineageOf(comp) // eligible, so valid
	state.OrphansRemaining, _ = s.orphans.get(ref)
	state.Unresolved, _ = s.kept.get(ref)
	s.deps.Metrics.CompositionObserved(ref, state)
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

// withComposition adds the Composition to the context's logger once, at the entry point.
func withComposition(ctx context.Context, ref domain.CompositionRef) context.Context {
	return logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues("composition", ref.String()))
}
