package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// inspect's renderings of app.InspectReport: JSON as it is, and a table for people.

func writeInspectJSON(w io.Writer, r *app.InspectReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("inspect: writing the report: %w", err)
	}
	return nil
}

// writeInspectTable renders the report for people. Every value read from the clusters passes
// through clean, so annotations cannot break the layout or send terminal escapes.
func writeInspectTable(w io.Writer, r *app.InspectReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }

	p("Lineage %s in namespace %s (downstream), inspected at %s", clean(r.Lineage), clean(r.InventoryNamespace), r.InspectedAt.Format(time.RFC3339))
	if c := r.Composition; c != nil {
		from := "default: sha256 of " + strconv.Quote(c.Namespace+"/"+c.Name)
		if c.LineageSource == "override" {
			from = "override: annotation " + domain.AnnotationLineageOverride
		}
		p("Composition %s/%s  uid %s  current synthesis %s  (lineage from %s)", clean(c.Namespace), clean(c.Name), clean(c.UID), orDash(clean(c.SynthesisUUID)), clean(from))
	}
	p("Limits: %s per chunk, %d chunks per snapshot, deletion guard %g", sizeOf(r.Limits.MaxChunkBytes), r.Limits.MaxChunks, r.Limits.MaxTombstoneFraction)

	p("")
	p("SNAPSHOTS (%d)", len(r.Snapshots))
	if len(r.Snapshots) > 0 {
		p("SYNTHESIS\tSOURCE TIMESTAMP\tCOMPOSITION\tCOMPOSITION UID\tCHUNKS\tTOTAL\tLARGEST CHUNK / LIMIT\tDIGEST\tSTATE")
		for _, s := range r.Snapshots {
			p("%s\t%s\t%s/%s\t%s\t%d/%d\t%s\t%s / %s (%s)\t%s\t%s",
				clean(s.SynthesisUUID), s.SynthesisTimestamp.Format(time.RFC3339), clean(s.CompositionNamespace), clean(s.CompositionName),
				clean(s.CompositionUID), s.ChunksPresent, s.ChunksExpected, sizeOf(s.TotalBytes),
				sizeOf(s.LargestChunkBytes), sizeOf(r.Limits.MaxChunkBytes), percent(s.LargestChunkBytes, r.Limits.MaxChunkBytes),
				s.Digest.Check, snapshotState(s))
		}
	}

	p("")
	secretCount := len(r.RejectedSecrets)
	for _, s := range r.Snapshots {
		secretCount += len(s.Chunks)
	}
	p("SECRETS (%d)", secretCount)
	if secretCount > 0 {
		p("NAME\tSYNTHESIS\tINDEX\tBYTES\tNOTE")
		for _, s := range r.Snapshots {
			for _, c := range s.Chunks {
				p("%s\t%s\t%d\t%s\t", clean(c.Secret), clean(s.SynthesisUUID), c.Index, sizeOf(c.Bytes))
			}
		}
		for _, s := range r.RejectedSecrets {
			p("%s\t-\t-\t%s\trejected by §5 step 1 (%s): %s", clean(s.Secret), sizeOf(s.Bytes), clean(s.Reason), clean(s.Detail))
		}
	}

	var problems []string
	for _, s := range r.Snapshots {
		for _, pr := range s.Problems {
			problems = append(problems, fmt.Sprintf("snapshot %s: %s", s.SynthesisUUID, pr))
		}
	}
	if len(problems) > 0 {
		p("")
		p("PROBLEMS")
		for _, pr := range problems {
			p("  %s", clean(pr))
		}
	}

	p("")
	v := r.Verdict
	switch v.Outcome {
	case app.VerdictSelected:
		p("VERDICT (§5): snapshot %s selected: %s, %d entries, digest %s verified", clean(v.SynthesisUUID), v.SynthesisTimestamp.Format(time.RFC3339), v.Entries, clean(v.Digest))
	case domain.OutcomeNoInventory.String():
		p("VERDICT (§5): NoInventory: no Secret in %s carries %s=%s", clean(r.InventoryNamespace), domain.LabelLineage, clean(r.Lineage))
	case domain.OutcomeNothingToRecover.String():
		p("VERDICT (§5): NothingToRecover (%s): %s", clean(v.Reason), clean(v.Detail))
	default:
		p("VERDICT (§5): InventoryInvalid (%s): %s", clean(v.Reason), clean(v.Detail))
		if v.Secret != "" {
			p("  secret: %s", clean(v.Secret))
		}
		p("  recovery generates no tombstones from this history")
	}

	p("")
	writeDryRun(p, r.DryRun)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("inspect: writing the report: %w", err)
	}
	return nil
}

func writeDryRun(p func(string, ...any), d *app.DryRunReport) {
	if d == nil {
		p("DRY RUN: not run; the control plane was not given (pass --composition, or --kubeconfig)")
		return
	}
	if d.Composition == "" {
		p("DRY RUN: not run; %s", clean(d.Unavailable))
		return
	}
	p("DRY RUN of recovery for %s (nothing is written)", clean(d.Composition))
	p("  composition uid\t%s", clean(d.CompositionUID))
	p("  current synthesis\t%s", orDash(clean(d.SynthesisUUID)))
	if d.WouldRun {
		p("  recovery runs now\tyes")
	} else {
		detail := d.NotRunReason
		if d.NotRunDetail != "" {
			detail += ": " + d.NotRunDetail
		}
		p("  recovery runs now\tno (%s); the plan below is what it would decide", clean(detail))
	}
	if c := d.Candidates; c != nil {
		p("  candidates (§5)\t%s", candidatesNote(c, d.Composition))
	}
	if rd := d.RecordedDecision; rd != nil {
		p("  recorded decision\t%s%s for synthesis %s, %d tombstones%s", rd.Outcome, parens(rd.Reason), clean(rd.SynthesisUUID), rd.Tombstones, sliceNote(rd.TombstoneSlice))
	}
	if d.Decision == nil {
		p("  decision\tnone: %s", clean(d.Unavailable))
		return
	}
	p("  decision\t%s%s", d.Decision.Outcome, parens(d.Decision.Reason))
	p("  message\t%s", clean(d.Decision.Message))
	if d.Decision.SourceSynthesisUUID != "" {
		p("  from snapshot\t%s (%s)", clean(d.Decision.SourceSynthesisUUID), d.Decision.SourceSynthesisTimestamp.Format(time.RFC3339))
	}
	list := func(title, extra string, ts []app.TombstoneReport, note func(int) string) {
		p("")
		p("%s (%d)", title, len(ts))
		if len(ts) == 0 {
			return
		}
		p("KIND\tAPI VERSION\tNAMESPACE\tNAME%s", extra)
		for i, t := range ts {
			apiVersion := t.Version
			if t.Group != "" {
				apiVersion = t.Group + "/" + t.Version
			}
			p("%s\t%s\t%s\t%s%s", clean(t.Kind), clean(apiVersion), orDash(clean(t.Namespace)), clean(t.Name), note(i))
		}
	}
	none := func(int) string { return "" }
	if d.Decision.Outcome == domain.OutcomeHeldForReview {
		list("HELD FOR REVIEW", "", d.HeldForReview, none)
	} else {
		list("TOMBSTONES", "", d.Tombstones, none)
	}
	if len(d.Dropped) > 0 {
		dropped := make([]app.TombstoneReport, len(d.Dropped))
		for i, t := range d.Dropped {
			dropped[i] = t.TombstoneReport
		}
		list("DROPPED AFTER READING THE OBJECTS DOWNSTREAM (§6.3)", "\tREASON", dropped, func(i int) string {
			return "\t" + clean(d.Dropped[i].Reason) + parens(d.Dropped[i].Detail)
		})
	}
}

// candidatesNote words §5 step 3's candidate set of the Composition comp.
func candidatesNote(c *app.CandidatesReport, comp string) string {
	ids := clean(strings.Join(c.SynthesisUUIDs, ", "))
	switch {
	case len(c.SynthesisUUIDs) == 0:
		return "none: no snapshot passed §5 step 1"
	case c.Own:
		return fmt.Sprintf("%d recorded for %s: %s", len(c.SynthesisUUIDs), clean(comp), ids)
	}
	return fmt.Sprintf("none recorded for %s, so every snapshot of the lineage (%d): %s", clean(comp), len(c.SynthesisUUIDs), ids)
}

func snapshotState(s app.SnapshotReport) string {
	health := "complete"
	switch {
	case s.MixedMetadata:
		health = "mixed metadata"
	case !s.Complete:
		health = "incomplete"
	case s.Digest.Check == domain.DigestMismatch.String():
		health = "digest mismatch"
	case s.Digest.Check == domain.DigestUndecodable.String():
		health = "undecodable"
	}
	return health + ", " + s.Role
}

// sizeOf renders bytes the way the limit reads: "206 B", "3.5 KiB", "812 KiB", "1024 KiB".
func sizeOf(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 10*1024:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%d KiB", int(math.Round(float64(n)/1024)))
}

func percent(n, limit int) string {
	return fmt.Sprintf("%d%%", n*100/limit)
}

func parens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + clean(s) + ")"
}

func sliceNote(name string) string {
	if name == "" {
		return ""
	}
	return " in ResourceSlice " + clean(name)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clean makes a value read from a cluster safe for one table cell: no tabs, line breaks or
// other control characters.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}
