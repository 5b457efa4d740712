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

// Confirm deletes what Plan selected, one Secret at a time: just before each delete it reads the
// lineage and its Compositions again and applies the rule again, and deletes with the UID and
// resourceVersion it listed as preconditions. Whatever changed since is skipped, with why. It
// stops at the first failure that is not such a change (design §7).
func (p *Pruner) Confirm(ctx context.Context, sel *PruneSelection, report *PruneReport) error {
	report.Confirmed = true
	log := logr.FromContextOrDiscard(ctx)
	for i := range report.Secrets {
		row := &report.Secrets[i]
		item, skip, err := p.recheck(ctx, sel, *row)
		if err != nil {
			return p.stopped(report, fmt.Errorf("checking inventory secret %s again before deleting it: %w", row.Name, err))
		}
		if skip == "" {
			err = p.deps.Inventory.DeleteChunk(ctx, item.Secret)
			switch {
			case errors.Is(err, ports.ErrConflict):
				skip = "changed since it was listed (its UID or resourceVersion precondition failed)"
			case errors.Is(err, ports.ErrNotFound):
				skip = "already gone"
			case err != nil:
				return p.stopped(report, err)
			}
		}
		if skip != "" {
			row.Result, row.SkipReason = PruneSkipped, skip
			report.Skipped++
			log.Info("skipped inventory secret", "secret", row.Name, "lineage", row.Lineage, "why", skip)
			continue
		}
		row.Result = PruneDeleted
		report.Deleted++
		log.Info("deleted inventory secret", "secret", row.Name, "lineage", row.Lineage, "reason", row.Reason)
	}
	return nil
}

// stopped says how far Confirm got before err.
func (p *Pruner) stopped(report *PruneReport, err error) error {
	return fmt.Errorf("%w; %d deleted and %d skipped before it; nothing else was deleted: fix the cause and run prune again", err, report.Deleted, report.Skipped)
}

// recheck applies the rule again to row's lineage as it is now. It returns the Secret to delete,
// or why it is skipped.
func (p *Pruner) recheck(ctx context.Context, sel *PruneSelection, row PruneSecret) (domain.PruneItem, string, error) {
	lineage, err := domain.NewLineage(row.Lineage)
	if err != nil {
		return domain.PruneItem{}, "", err
	}
	before := sel.lineages[lineage]
	all, err := p.deps.Inventory.ListChunks(ctx, lineage)
	if err != nil {
		return domain.PruneItem{}, "", err
	}
	secrets, _ := p.own(all)
	now := domain.PruneLineage{Lineage: lineage, Secrets: secrets, Recorded: map[domain.CompositionRef]domain.Presence{}}
	refs, _ := domain.RecordedCompositions(secrets)
	for _, ref := range refs {
		if now.Recorded[ref], err = p.presenceOf(ctx, ref); err != nil {
			return domain.PruneItem{}, "", err
		}
	}
	for _, c := range before.Claimants {
		// A claimant gone since no longer protects; one unreadable still does.
		if pr, err := p.presenceOf(ctx, c.Ref()); err != nil {
			return domain.PruneItem{}, "", err
		} else if pr.Kind != domain.PresenceGone {
			now.Claimants = append(now.Claimants, c)
			if pr.Kind == domain.PresenceLiving {
				now.Claimants[len(now.Claimants)-1] = pr.Composition
			}
		}
	}
	rules := sel.rules
	rules.Now = p.cfg.Now().UTC()
	plan := domain.SelectPrune(now, rules)
	item, ok := plan.Selects(row.Name)
	switch {
	case !ok && len(plan.Kept) > 0:
		return item, "no longer selected: " + strings.Join(plan.Kept, "; "), nil
	case !ok:
		return item, "no longer selected: the lineage changed since it was listed", nil
	case item.Secret.UID != row.UID || item.Secret.ResourceVersion != row.ResourceVersion:
		return item, "changed since it was listed (another UID or resourceVersion)", nil
	}
	return item, "", nil
}
