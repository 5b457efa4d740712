package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// DefaultPruneOlderThan is how long a gone lineage's newest write must be past before prune
// deletes it.
const DefaultPruneOlderThan = 720 * time.Hour

// PruneDeps are what prune reads (the control plane, live) and deletes through (the inventory).
type PruneDeps struct {
	Compositions ports.LiveReader
	Lister       ports.CompositionLister
	Inventory    ports.InventoryPruner
}

// PruneConfig are the operator's settings.
type PruneConfig struct {
	InventoryNamespace string
	// ControlPlane is the one given: prune selects only the Secrets it wrote (design §7).
	ControlPlane string
	OlderThan    time.Duration
	MaxChunks    int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Pruner is inventory retention, run by an operator with their own credentials and never by the
// controller: it selects by domain.SelectPrune and deletes only with --confirm (design §7).
type Pruner struct {
	cfg  PruneConfig
	deps PruneDeps
}

// NewPruner checks the settings and the dependencies.
func NewPruner(cfg PruneConfig, deps PruneDeps) (*Pruner, error) {
	switch {
	case deps.Compositions == nil || deps.Lister == nil || deps.Inventory == nil:
		return nil, errors.New("app: prune needs the control plane's Compositions, their lister and the inventory")
	case cfg.OlderThan <= 0:
		return nil, fmt.Errorf("app: prune: the age a gone lineage must reach must be positive, got %s", cfg.OlderThan)
	case domain.ValidControlPlane(cfg.ControlPlane) != nil:
		return nil, fmt.Errorf("app: prune: %w", domain.ValidControlPlane(cfg.ControlPlane))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Pruner{cfg: cfg, deps: deps}, nil
}

// PruneReport is what prune selected and, with --confirm, did.
type PruneReport struct {
	InventoryNamespace string    `json:"inventoryNamespace"`
	OlderThan          string    `json:"olderThan"`
	PrunedAt           time.Time `json:"prunedAt"`
	Confirmed          bool      `json:"confirmed"`
	// GoneRefused says why (b), gone lineages, was not applied at all.
	GoneRefused string        `json:"goneRefused,omitempty"`
	Secrets     []PruneSecret `json:"secrets"`
	Kept        []PruneKept   `json:"kept"`
	// Total counts Secrets selected; Deleted and Skipped what --confirm did with them.
	Total   int `json:"total"`
	Deleted int `json:"deleted"`
	Skipped int `json:"skipped"`
}

// PruneSecret is one Secret prune selected.
type PruneSecret struct {
	Name            string `json:"name"`
	Lineage         string `json:"lineage"`
	Reason          string `json:"reason"`
	Detail          string `json:"detail"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
	// Result is "would delete" on a dry run, "deleted", or "skipped".
	Result     string `json:"result"`
	SkipReason string `json:"skipReason,omitempty"`
}

// PruneKept says why prune left a lineage, or part of it, alone.
type PruneKept struct {
	Lineage string `json:"lineage"`
	Why     string `json:"why"`
}

const (
	PruneWouldDelete = "would delete"
	PruneDeleted     = "deleted"
	PruneSkipped     = "skipped"
)

// PruneSelection is what Plan read, for Confirm to check again.
type PruneSelection struct {
	rules    domain.PruneRules
	lineages map[domain.Lineage]domain.PruneLineage
}

// Plan reads both clusters and selects what to delete; it writes nothing.
func (p *Pruner) Plan(ctx context.Context) (*PruneReport, *PruneSelection, error) {
	now := p.cfg.Now().UTC()
	report := &PruneReport{InventoryNamespace: p.cfg.InventoryNamespace, OlderThan: p.cfg.OlderThan.String(),
		PrunedAt: now.Truncate(time.Second), Secrets: []PruneSecret{}, Kept: []PruneKept{}}
	lineages, err := p.readLineages(ctx, report)
	if err != nil {
		return nil, nil, err
	}
	rules := domain.PruneRules{Now: now, OlderThan: p.cfg.OlderThan, MaxChunks: p.cfg.MaxChunks, RefuseGone: !domain.PruneGoneAllowed(lineages)}
	if rules.RefuseGone && len(lineages) > 0 {
		report.GoneRefused = "no lineage of this cluster has a living Composition on the control plane given, which is more likely a rebuilt or wrong control plane than every Composition gone: no whole lineage is deleted; check --kubeconfig"
	}
	sel := &PruneSelection{rules: rules, lineages: map[domain.Lineage]domain.PruneLineage{}}
	for _, l := range lineages {
		sel.lineages[l.Lineage] = l
		plan := domain.SelectPrune(l, rules)
		for _, why := range plan.Kept {
			report.Kept = append(report.Kept, PruneKept{Lineage: l.Lineage.String(), Why: why})
		}
		for _, it := range plan.Selected {
			report.Secrets = append(report.Secrets, PruneSecret{Name: it.Secret.Name, Lineage: l.Lineage.String(), Reason: it.Reason.String(),
				Detail: it.Detail, UID: it.Secret.UID, ResourceVersion: it.Secret.ResourceVersion, Result: PruneWouldDelete})
		}
	}
	report.Total = len(report.Secrets)
	return report, sel, nil
}

// readLineages lists the inventory and the Compositions, and reads each recorded Composition
// live, once.
func (p *Pruner) readLineages(ctx context.Context, report *PruneReport) ([]domain.PruneLineage, error) {
	secrets, err := p.deps.Inventory.ListInventory(ctx)
	if err != nil {
		return nil, err
	}
	comps, err := p.deps.Lister.ListCompositions(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the Compositions of the control plane: %w", err)
	}
	byLineage := map[domain.Lineage][]domain.ChunkSecret{}
	for _, s := range secrets {
		l, err := domain.NewLineage(s.Labels[domain.LabelLineage])
		if err != nil {
			report.Kept = append(report.Kept, PruneKept{Lineage: s.Labels[domain.LabelLineage], Why: fmt.Sprintf("Secret %s: lineage label: %v: kept", s.Name, err)})
			continue
		}
		byLineage[l] = append(byLineage[l], s)
	}
	presence := map[domain.CompositionRef]domain.Presence{}
	var out []domain.PruneLineage
	for l, all := range byLineage {
		ls, kept := p.own(all)
		if kept != "" {
			report.Kept = append(report.Kept, PruneKept{Lineage: l.String(), Why: kept})
		}
		if len(ls) == 0 {
			continue // not this control plane's lineage: it protects nothing and is not pruned
		}
		pl := domain.PruneLineage{Lineage: l, Secrets: ls, Recorded: map[domain.CompositionRef]domain.Presence{}}
		for _, c := range comps { // the claimants: whose lineage is l, by name or by override
			if cl, err := domain.LineageOf(c); err == nil && cl == l {
				pl.Claimants = append(pl.Claimants, c)
			}
		}
		refs, _ := domain.RecordedCompositions(ls)
		for _, ref := range refs {
			if _, ok := presence[ref]; !ok {
				if presence[ref], err = p.presenceOf(ctx, ref); err != nil {
					return nil, err
				}
			}
			pl.Recorded[ref] = presence[ref]
		}
		out = append(out, pl)
	}
	slices.SortFunc(out, func(a, b domain.PruneLineage) int { return strings.Compare(a.Lineage.String(), b.Lineage.String()) })
	return out, nil
}

// own keeps the lineage's Secrets this control plane may prune (domain.OwnHistory), and says
// why it leaves the others.
func (p *Pruner) own(secrets []domain.ChunkSecret) ([]domain.ChunkSecret, string) {
	mine, _ := domain.OwnHistory(secrets, p.cfg.ControlPlane)
	if n := len(secrets) - len(mine); n > 0 {
		return mine, fmt.Sprintf("%d Secret(s) written by another control plane, or naming none next to one, are not control plane %s's: kept", n, p.cfg.ControlPlane)
	}
	return mine, ""
}

// presenceOf reads ref live: NotFound is gone, any other failure is unknown, which keeps the
// lineage. Only a cancelled context stops the run.
func (p *Pruner) presenceOf(ctx context.Context, ref domain.CompositionRef) (domain.Presence, error) {
	c, err := p.deps.Compositions.LiveComposition(ctx, ref)
	switch {
	case err == nil:
		return domain.Presence{Kind: domain.PresenceLiving, Composition: c}, nil
	case errors.Is(err, ports.ErrNotFound):
		return domain.Presence{Kind: domain.PresenceGone}, nil
	case ctx.Err() != nil:
		return domain.Presence{}, ctx.Err()
	}
	logr.FromContextOrDiscard(ctx).Info("could not read a recorded Composition; its lineage is kept", "composition", ref.String(), "error", err.Error())
	return domain.Presence{Detail: err.Error()}, nil
}
