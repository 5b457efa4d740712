package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// heldEventLimit is how many held tombstones an event lists (SPEC §6.1).
const heldEventLimit = 20

// RecoverResult is the plan recovery acted on, and whether it wrote the decision.
type RecoverResult struct {
	Plan    domain.RecoveryPlan
	Written bool
	// Composition is the Composition as the decision left it (its annotation set).
	Composition domain.Composition
}

// Plan computes what recovery would decide now, without writing anything: the dry run used by
// inspect, and the in-process API eno-reconciler folds into its own reconciliation.
func (s *Service) Plan(ctx context.Context, comp domain.Composition) (domain.RecoveryPlan, error) {
	plan, _, err := s.plan(ctx, comp)
	return plan, err
}

// liveReads is what recovery read live; recording in the same reconcile reuses it rather than
// reading the slices and listing the lineage's Secrets a second time. Every write still follows
// its own live recheck, and creates and updates are guarded by the API server (AlreadyExists,
// resourceVersion), so a Secret that changed since the list aborts the pass as before.
type liveReads struct {
	contents domain.SynthesisContents
	secrets  []domain.ChunkSecret
}

func (s *Service) plan(ctx context.Context, comp domain.Composition) (domain.RecoveryPlan, liveReads, error) {
	lineage, err := domain.LineageOf(comp)
	if err != nil {
		return domain.RecoveryPlan{}, liveReads{}, err
	}
	secrets, err := s.deps.Store.ListChunks(ctx, lineage)
	if err != nil {
		return domain.RecoveryPlan{}, liveReads{}, fmt.Errorf("listing inventory secrets of lineage %s: %w", lineage, err)
	}
	now := s.cfg.Now()
	snap, snapErr := domain.ReadSnapshot(secrets, now, s.cfg.MaxChunks)
	contents, err := s.readSynthesis(ctx, comp)
	if err != nil {
		return domain.RecoveryPlan{}, liveReads{}, err
	}
	plan, err := domain.PlanRecovery(domain.RecoveryInput{
		Composition:          comp,
		Snapshot:             snap,
		SnapshotErr:          snapErr,
		Synthesis:            contents,
		MaxTombstoneFraction: s.cfg.MaxTombstoneFraction,
		Now:                  now,
	})
	return plan, liveReads{contents: contents, secrets: secrets}, err
}

// Recover decides recovery for the Composition's current synthesis (SPEC §6) and writes the
// decision. Tombstones are published before the decision, so a decision never points at
// nothing; both writes follow a live recheck of the Composition.
func (s *Service) Recover(ctx context.Context, comp domain.Composition) (RecoverResult, error) {
	res, _, err := s.recover(withComposition(ctx, comp.Ref()), comp)
	return res, err
}

func (s *Service) recover(ctx context.Context, comp domain.Composition) (RecoverResult, liveReads, error) {
	if err := s.policy.CheckRecovery(comp); err != nil {
		return RecoverResult{}, liveReads{}, err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("synthesisUUID", comp.SynthesisUUID())
	plan, reads, err := s.plan(ctx, comp)
	if err != nil {
		if domain.IsSliceError(err) {
			s.refuse(comp, "Slice"+problemOf(err), err)
		}
		return RecoverResult{}, reads, fmt.Errorf("recovering %s: %w", comp.Ref(), err)
	}
	d := plan.Decision
	res := RecoverResult{Plan: plan, Composition: comp}

	// A held decision already on record is not rewritten: only its time would change.
	if prev, ok := comp.Decision(); ok && d.Outcome == domain.OutcomeHeldForReview && prev.SynthesisUUID == d.SynthesisUUID && prev.SameAs(d) {
		return res, reads, nil
	}
	if len(plan.Tombstones) > 0 {
		live, err := s.recheck(ctx, comp, s.policy.CheckRecovery)
		if err != nil {
			return res, reads, fmt.Errorf("recovering %s: %w", comp.Ref(), err)
		}
		where, err := s.deps.Sink.PublishTombstones(ctx, live, plan.Tombstones)
		if err != nil {
			return res, reads, fmt.Errorf("recovering %s: publishing %d tombstones: %w", comp.Ref(), len(plan.Tombstones), err)
		}
		d.TombstoneSlice = where
	}
	live, err := s.recheck(ctx, comp, s.policy.CheckRecovery)
	if err != nil {
		return res, reads, fmt.Errorf("recovering %s: %w", comp.Ref(), err)
	}
	if err := s.deps.Decisions.WriteDecision(ctx, live, d); err != nil {
		return res, reads, fmt.Errorf("recovering %s: writing decision %s: %w", comp.Ref(), d.Outcome, err)
	}
	res.Plan.Decision, res.Written = d, true
	res.Composition = withDecision(live, d)
	s.deps.Metrics.DecisionMade(d.Outcome)
	s.announce(comp, plan, d)
	log.Info("recovery decided", "outcome", d.Outcome.String(), "reason", d.Reason, "tombstones", d.Tombstones, "tombstoneSlice", d.TombstoneSlice)
	return res, reads, nil
}

func (s *Service) announce(comp domain.Composition, plan domain.RecoveryPlan, d domain.Decision) {
	reason := d.Outcome.String()
	switch d.Outcome {
	case domain.OutcomeInventoryInvalid:
		s.deps.Metrics.Refusal(d.Reason)
		s.deps.Events.Event(comp, true, reason, fmt.Sprintf("%s: %s", d.Reason, d.Message))
	case domain.OutcomeHeldForReview:
		s.deps.Metrics.Refusal(d.Reason)
		s.deps.Events.Event(comp, true, reason, fmt.Sprintf("%s; awaiting review: %s", d.Message, domain.FirstIDs(plan.Held, heldEventLimit)))
	default:
		s.deps.Events.Event(comp, false, reason, d.Message)
	}
}

func withDecision(c domain.Composition, d domain.Decision) domain.Composition {
	out := c
	out.Annotations = make(map[string]string, len(c.Annotations)+1)
	for k, v := range c.Annotations {
		out.Annotations[k] = v
	}
	out.Annotations[domain.AnnotationDecision] = d.Encode()
	return out
}

// isIneligible reports whether err only says the Composition is out of a use case's reach.
func isIneligible(err error) (*domain.IneligibleError, bool) {
	var ie *domain.IneligibleError
	ok := errors.As(err, &ie)
	return ie, ok
}
