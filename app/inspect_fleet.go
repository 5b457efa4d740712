package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// DefaultHandoffPendingLong is how long a hand-off may stay pending before the fleet view lists
// its Composition among those that need a person.
const DefaultHandoffPendingLong = time.Hour

// Why a fleet row needs a person (FleetRow.Attention).
const (
	AttentionHeldForReview  = "HeldForReview"
	AttentionRefused        = "Refused"
	AttentionIneligible     = "Ineligible"
	AttentionHandoffPending = "HandoffPendingLong"
	AttentionOrphansRemain  = "OrphansRemain"
	AttentionUnreadable     = "Unreadable"
)

// FleetReport is what Inspector.InspectAll found, the document `inspect --all -o json` prints.
// Fields are added over time, never renamed or removed; lists are [] when empty.
type FleetReport struct {
	InventoryNamespace string        `json:"inventoryNamespace"`
	InspectedAt        time.Time     `json:"inspectedAt"`
	Limits             InspectLimits `json:"limits"`
	// HandoffPendingLong is how long a pending hand-off waits before its row needs a person.
	HandoffPendingLong string     `json:"handoffPendingLong"`
	Rows               []FleetRow `json:"rows"`
}

// FleetRow is one Composition of the fleet view.
type FleetRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Lineage   string `json:"lineage,omitempty"`
	// Attention lists why the row needs a person (Attention* constants); empty when it does not.
	Attention []string `json:"attention"`
	// AttentionDetail words the first reason for an operator.
	AttentionDetail string `json:"attentionDetail,omitempty"`
	// LastDecision is the decision recorded on the Composition, whatever synthesis it is for.
	LastDecision *FleetDecision `json:"lastDecision,omitempty"`
	// HeldForReviewSince is when the current synthesis's recovery was held by the deletion guard.
	HeldForReviewSince *time.Time `json:"heldForReviewSince,omitempty"`
	// HandoffPendingSince is when the current synthesis was decided Recovered, not yet carried.
	HandoffPendingSince *time.Time `json:"handoffPendingSince,omitempty"`
	// OrphansRemaining is the "did Eno do it?" check, read now, of the hand-off the current
	// synthesis carried; nil when it carried none, or is not Ready yet.
	OrphansRemaining *int `json:"orphansRemaining,omitempty"`
	// LastRecorded is the newest snapshot of this incarnation (its UID) in the lineage.
	LastRecorded *FleetRecorded `json:"lastRecorded,omitempty"`
	// NotRunReason is why recovery does not evaluate the current synthesis now, if it does not.
	NotRunReason string `json:"notRunReason,omitempty"`
	// Error is set when the row could not be read; the other fields may be missing.
	Error string `json:"error,omitempty"`
}

type FleetDecision struct {
	SynthesisUUID string    `json:"synthesisUUID"`
	Outcome       string    `json:"outcome"`
	Reason        string    `json:"reason,omitempty"`
	DecidedAt     time.Time `json:"decidedAt"`
	// Current: the decision is for the current synthesis.
	Current bool `json:"current"`
}

type FleetRecorded struct {
	SynthesisUUID      string    `json:"synthesisUUID"`
	SynthesisTimestamp time.Time `json:"synthesisTimestamp"`
	// AgeSeconds is InspectedAt minus SynthesisTimestamp.
	AgeSeconds int64 `json:"ageSeconds"`
	// Chunks is how many chunk Secrets the snapshot uses, against limits.maxChunks.
	Chunks int `json:"chunks"`
}

// InspectAll inspects each Composition in scope as Inspect does, keeping one row of what an
// operator of many looks for: those that need a person first, then by namespace/name. One gone
// since the list is left out, one that cannot be read is a row with its error.
func (in *Inspector) InspectAll(ctx context.Context, pendingLong time.Duration) (*FleetReport, error) {
	if in.deps.Lister == nil || in.deps.Compositions == nil {
		return nil, errors.New("inspecting every composition needs the control plane")
	}
	now := in.cfg.Now().UTC()
	comps, err := in.deps.Lister.ListCompositions(ctx)
	if err != nil {
		return nil, err
	}
	fleet := &FleetReport{
		InventoryNamespace: in.cfg.InventoryNamespace,
		InspectedAt:        now.Truncate(time.Second),
		Limits:             in.limits(),
		HandoffPendingLong: pendingLong.String(),
		Rows:               []FleetRow{},
	}
	for _, c := range comps {
		if !in.cfg.Scope.Contains(c) {
			continue
		}
		row := FleetRow{Namespace: c.Namespace, Name: c.Name, Attention: []string{}}
		if _, err := domain.LineageOf(c); err != nil {
			row.NotRunReason = domain.IneligibleInvalidLineage.String()
			row.attend(AttentionIneligible, fmt.Sprintf("recording and recovery skip it (%s): %v", row.NotRunReason, err))
			fleet.Rows = append(fleet.Rows, row)
			continue
		}
		ref := c.Ref()
		report, err := in.Inspect(ctx, InspectTarget{Composition: &ref})
		if errors.Is(err, ports.ErrNotFound) {
			continue // deleted since the list
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			row.Error = err.Error()
			row.attend(AttentionUnreadable, err.Error())
			fleet.Rows = append(fleet.Rows, row)
			continue
		}
		// The "did Eno do it?" check, read-only, once the carrying synthesis is Ready: a carried
		// slice that is gone or not this controller's counts nothing, as the controller's check
		// skips it. The list is read live unless the lister is a cache; inspect is given a live one.
		var orphans *int
		if len(domain.CarriedRecoverySlices(c)) > 0 && c.Synthesis != nil && c.Synthesis.Ready {
			check, err := checkCarried(ctx, in.deps.Slices, planner{cfg: in.cfg, downstream: in.deps.Downstream}, c)
			if n := len(check.remaining); err == nil {
				orphans = &n
			} else {
				row.Error = "checking the carried hand-off: " + err.Error()
				row.attend(AttentionUnreadable, row.Error)
			}
		}
		row.fill(c, report, orphans, now, pendingLong)
		fleet.Rows = append(fleet.Rows, row)
	}
	// The rows that need a person first (a reversed compare of min(len, 1)), then by name.
	slices.SortStableFunc(fleet.Rows, func(a, b FleetRow) int {
		return cmp.Or(cmp.Compare(min(len(b.Attention), 1), min(len(a.Attention), 1)),
			domain.CompositionRef{Namespace: a.Namespace, Name: a.Name}.Compare(domain.CompositionRef{Namespace: b.Namespace, Name: b.Name}))
	})
	return fleet, nil
}

func (r *FleetRow) attend(why, detail string) {
	if len(r.Attention) == 0 {
		r.AttentionDetail = detail
	}
	r.Attention = append(r.Attention, why)
}

// fill sets the row from the Composition read live and its inspect report.
func (r *FleetRow) fill(comp domain.Composition, report *InspectReport, orphans *int, now time.Time, pendingLong time.Duration) {
	r.Lineage = report.Lineage
	r.OrphansRemaining = orphans
	if d, ok := comp.Decision(); ok {
		current := d.SynthesisUUID == comp.SynthesisUUID()
		r.LastDecision = &FleetDecision{SynthesisUUID: d.SynthesisUUID, Outcome: d.Outcome.String(), Reason: d.Reason, DecidedAt: d.DecidedAt, Current: current}
		switch {
		case current && d.Outcome == domain.OutcomeHeldForReview:
			at := d.DecidedAt
			r.HeldForReviewSince = &at
			r.attend(AttentionHeldForReview, fmt.Sprintf("recovery of synthesis %s is held for review: tombstone-recovery approve %s (or reject)", d.SynthesisUUID, comp.Ref()))
		// Refused for a reason only an operator can clear: a history that cannot be trusted, or
		// one recorded in another namespace while adoption across namespaces is off. NoInventory
		// and the other NothingToRecover reasons are recovery working as designed.
		case current && (d.Outcome == domain.OutcomeInventoryInvalid || d.Outcome == domain.OutcomeNothingToRecover &&
			(d.Reason == domain.ReasonOtherNamespace || d.Reason == domain.ReasonUnverified)):
			r.attend(AttentionRefused, fmt.Sprintf("recovery refused %s (%s): %s", d.Outcome, d.Reason, d.Message))
		}
	}
	if state, _ := domain.HandoffStateOf(comp, nil); state == domain.HandoffDecided {
		d, _ := comp.FinishedDecision()
		at := d.DecidedAt
		r.HandoffPendingSince = &at
		if now.Sub(at) >= pendingLong {
			r.attend(AttentionHandoffPending, fmt.Sprintf("the hand-off of synthesis %s has waited %s for Eno to carry it", d.SynthesisUUID, now.Sub(at).Truncate(time.Second)))
		}
	}
	if orphans != nil && *orphans > 0 {
		r.attend(AttentionOrphansRemain, fmt.Sprintf("%d objects handed to Eno as tombstones still exist: check them by hand", *orphans))
	}
	if dr := report.DryRun; dr != nil && !dr.WouldRun {
		r.NotRunReason = dr.NotRunReason
		// An operator must act on a lineage override that does not parse; the other reasons (not
		// opted in, not synthesized or Ready yet, deleting, decided) are states, not faults.
		if dr.NotRunReason == domain.IneligibleInvalidLineage.String() {
			r.attend(AttentionIneligible, fmt.Sprintf("recovery skips it (%s): %s", dr.NotRunReason, dr.NotRunDetail))
		}
	}
	for _, s := range report.Snapshots {
		if s.CompositionUID != comp.UID {
			continue
		}
		if r.LastRecorded == nil || s.SynthesisTimestamp.After(r.LastRecorded.SynthesisTimestamp) {
			r.LastRecorded = &FleetRecorded{SynthesisUUID: s.SynthesisUUID, SynthesisTimestamp: s.SynthesisTimestamp,
				AgeSeconds: int64(report.InspectedAt.Sub(s.SynthesisTimestamp) / time.Second), Chunks: s.ChunksExpected}
		}
	}
}
