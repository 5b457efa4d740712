package main

import (
	"cmp"
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

// writeInspectJSON writes an inspect document: an app.InspectReport, or an app.FleetReport.
func writeInspectJSON(w io.Writer, r any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return wrapIf("inspect: writing the report", enc.Encode(r))
}

// writeReport writes r as JSON for -o json, else as table renders it for people.
func writeReport[R any](w io.Writer, output string, r R, table func(io.Writer, R) error) error {
	if output == "json" {
		return writeInspectJSON(w, r)
	}
	return table(w, r)
}

// writeInspectTable renders the report for people. Every value read from the clusters passes
// through clean, so annotations cannot break the layout or send terminal escapes.
func writeInspectTable(w io.Writer, r *app.InspectReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	rfc := func(t time.Time) string { return t.Format(time.RFC3339) }

	p("Lineage %s in namespace %s (downstream), inspected at %s", clean(r.Lineage), clean(r.InventoryNamespace), rfc(r.InspectedAt))
	if c := r.Composition; c != nil {
		from := "default: sha256 of " + strconv.Quote(c.Namespace+"/"+c.Name)
		if c.LineageSource == "override" {
			from = "override: annotation " + domain.AnnotationLineageOverride
		}
		p("Composition %s/%s  uid %s  current synthesis %s  (lineage from %s)", clean(c.Namespace), clean(c.Name), clean(c.UID), cmp.Or(clean(c.SynthesisUUID), "-"), clean(from))
	}
	adoption := map[bool]string{false: "off", true: "on"}[r.Limits.AllowCrossNamespaceLineage]
	p("Limits: %s per chunk, %d chunks per snapshot, deletion guard %g, adoption across namespaces %s", sizeOf(r.Limits.MaxChunkBytes), r.Limits.MaxChunks, r.Limits.MaxTombstoneFraction, adoption)

	var snapshots, secrets, unresolved [][]string
	var problems []string
	for _, s := range r.Snapshots {
		snapshots = append(snapshots, []string{clean(s.SynthesisUUID), rfc(s.SynthesisTimestamp), clean(s.CompositionNamespace) + "/" + clean(s.CompositionName),
			clean(s.CompositionUID), fmt.Sprintf("%d/%d", s.ChunksPresent, s.ChunksExpected), sizeOf(s.TotalBytes),
			fmt.Sprintf("%s / %s (%d%%)", sizeOf(s.LargestChunkBytes), sizeOf(r.Limits.MaxChunkBytes), s.LargestChunkBytes*100/r.Limits.MaxChunkBytes),
			s.Digest.Check, snapshotState(s)})
		for _, c := range s.Chunks {
			secrets = append(secrets, []string{clean(c.Secret), clean(s.SynthesisUUID), strconv.Itoa(c.Index), sizeOf(c.Bytes), ""})
		}
		unresolved = append(unresolved, rowsOf(s.Unresolved, unresolvedRow)...)
		for _, pr := range s.Problems {
			problems = append(problems, "  "+clean(fmt.Sprintf("snapshot %s: %s", s.SynthesisUUID, pr)))
		}
	}
	for _, s := range r.RejectedSecrets {
		secrets = append(secrets, []string{clean(s.Secret), "-", "-", sizeOf(s.Bytes), fmt.Sprintf("not trusted (%s): %s", clean(s.Reason), clean(s.Detail))})
	}
	section(p, "SNAPSHOTS", "SYNTHESIS\tSOURCE TIMESTAMP\tCOMPOSITION\tCOMPOSITION UID\tCHUNKS\tTOTAL\tLARGEST CHUNK / LIMIT\tDIGEST\tSTATE", snapshots)
	section(p, "SECRETS", "NAME\tSYNTHESIS\tINDEX\tBYTES\tNOTE", secrets)
	if len(unresolved) > 0 {
		section(p, "UNRESOLVED (kept for a person until the object is gone)", unresolvedHeader, unresolved)
	}
	if len(problems) > 0 {
		p("\nPROBLEMS\n%s", strings.Join(problems, "\n"))
	}

	switch v := r.Verdict; v.Outcome {
	case app.VerdictSelected:
		p("\nVERDICT ON THE HISTORY: snapshot %s selected: %s, %d entries, digest %s verified", clean(v.SynthesisUUID), rfc(*v.SynthesisTimestamp), v.Entries, clean(v.Digest))
		if v.RecordedEntries != nil {
			section(p, "RECORDED ENTRIES", "KIND\tAPI VERSION\tNAMESPACE\tNAME", rowsOf(v.RecordedEntries, entryRow))
		}
	case domain.OutcomeNoInventory.String():
		p("\nVERDICT ON THE HISTORY: NoInventory: no Secret in %s carries %s=%s", clean(r.InventoryNamespace), domain.LabelLineage, clean(r.Lineage))
	case domain.OutcomeNothingToRecover.String():
		p("\nVERDICT ON THE HISTORY: NothingToRecover (%s): %s", clean(v.Reason), clean(v.Detail))
	default:
		p("\nVERDICT ON THE HISTORY: InventoryInvalid (%s): %s", clean(v.Reason), clean(v.Detail))
		if v.Secret != "" {
			p("  secret: %s", clean(v.Secret))
		}
		p("  recovery generates no tombstones from this history")
	}

	writeDryRun(p, r.DryRun)
	return wrapIf("inspect: writing the report", tw.Flush())
}

// writeFleetTable renders the fleet view: the rows that need a person, then the rest, in the
// report's order, and why each of the first needs one.
func writeFleetTable(w io.Writer, r *app.FleetReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	rfc := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Format(time.RFC3339)
	}
	p("Compositions in scope, inventory in namespace %s (downstream), inspected at %s", clean(r.InventoryNamespace), r.InspectedAt.Format(time.RFC3339))
	p("Limits: %d chunks per snapshot; a hand-off pending %s needs a person", r.Limits.MaxChunks, clean(r.HandoffPendingLong))
	const header = "COMPOSITION\tLINEAGE\tNEEDS\tRECOVERY SKIPS\tLAST DECISION\tHELD FOR REVIEW SINCE\tHAND-OFF PENDING SINCE\tORPHANS REMAINING\tLAST RECORDED SYNTHESIS\tAGE\tCHUNKS"
	var attend, rest [][]string
	var why []string
	for _, row := range r.Rows {
		decision := "-"
		if d := row.LastDecision; d != nil {
			decision = d.Outcome + parens(d.Reason)
			if !d.Current {
				decision += ", earlier synthesis"
			}
		}
		orphans := "-"
		if row.OrphansRemaining != nil {
			orphans = strconv.Itoa(*row.OrphansRemaining)
		}
		recorded, age, chunks := "-", "-", "-"
		if rec := row.LastRecorded; rec != nil {
			recorded, age = clean(rec.SynthesisUUID), ageOf(time.Duration(rec.AgeSeconds)*time.Second)
			chunks = fmt.Sprintf("%d/%d", rec.Chunks, r.Limits.MaxChunks)
		}
		cells := []string{clean(row.Namespace) + "/" + clean(row.Name), cmp.Or(clean(row.Lineage), "-"), cmp.Or(clean(strings.Join(row.Attention, ",")), "-"),
			cmp.Or(clean(row.NotRunReason), "-"), decision, rfc(row.HeldForReviewSince), rfc(row.HandoffPendingSince), orphans, recorded, age, chunks}
		if len(row.Attention) == 0 {
			rest = append(rest, cells)
			continue
		}
		attend = append(attend, cells)
		why = append(why, "  "+clean(row.Namespace+"/"+row.Name+": "+row.AttentionDetail))
	}
	section(p, "NEEDS A PERSON", header, attend)
	section(p, "THE REST", header, rest)
	if len(why) > 0 {
		p("\nWHY\n%s", strings.Join(why, "\n"))
	}
	return wrapIf("inspect: writing the report", tw.Flush())
}

// ageOf words a duration to the largest two units: "3d4h", "5h12m", "7m", "40s".
func ageOf(d time.Duration) string {
	if d < 0 {
		return "in the future"
	}
	day := 24 * time.Hour
	switch {
	case d >= day:
		return fmt.Sprintf("%dd%dh", d/day, d%day/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh%dm", d/time.Hour, d%time.Hour/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

// section prints a table after a blank line: its title and row count and, when there are rows,
// its header and the rows.
func section(p func(string, ...any), title, header string, rows [][]string) {
	p("\n%s (%d)", title, len(rows))
	if len(rows) > 0 {
		p("%s", header)
	}
	for _, row := range rows {
		p("%s", strings.Join(row, "\t"))
	}
}

func writeDryRun(p func(string, ...any), d *app.DryRunReport) {
	switch {
	case d == nil:
		p("\nDRY RUN: not run; the control plane was not given (pass --composition, or --kubeconfig)")
		return
	case d.Composition == "":
		p("\nDRY RUN: not run; %s", clean(d.Unavailable))
		return
	}
	p("\nDRY RUN of recovery for %s (nothing is written)", clean(d.Composition))
	p("  composition uid\t%s", clean(d.CompositionUID))
	p("  current synthesis\t%s", cmp.Or(clean(d.SynthesisUUID), "-"))
	if d.WouldRun {
		p("  recovery runs now\tyes")
	} else {
		p("  recovery runs now\tno (%s%s); the plan below is what it would decide", clean(d.NotRunReason), around(": ", d.NotRunDetail, ""))
	}
	if c := d.Candidates; c != nil {
		p("  candidate snapshots\t%s", candidatesNote(c, d.Composition))
	}
	if rd := d.RecordedDecision; rd != nil {
		p("  recorded decision\t%s%s for synthesis %s, %d tombstones%s", rd.Outcome, parens(rd.Reason), clean(rd.SynthesisUUID), rd.Tombstones, around(" in ResourceSlice ", rd.TombstoneSlice, ""))
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
	row := func(t app.TombstoneReport) []string {
		return entryRow(domain.Entry{Group: t.Group, Version: t.Version, Kind: t.Kind, Namespace: t.Namespace, Name: t.Name})
	}
	title, listed := "TOMBSTONES", d.Tombstones
	if d.Decision.Outcome == domain.OutcomeHeldForReview {
		title, listed = "HELD FOR REVIEW", d.HeldForReview
	}
	section(p, title, "KIND\tAPI VERSION\tNAMESPACE\tNAME", rowsOf(listed, row))
	dropped := rowsOf(d.Dropped, func(t app.DroppedReport) []string {
		return append(row(t.TombstoneReport), clean(t.Reason)+parens(t.Detail))
	})
	if len(dropped) > 0 {
		section(p, "DROPPED AFTER READING THE OBJECTS DOWNSTREAM", "KIND\tAPI VERSION\tNAMESPACE\tNAME\tREASON", dropped)
	}
}

// rowsOf is one table row per item.
func rowsOf[T any](items []T, row func(T) []string) (rows [][]string) {
	for _, it := range items {
		rows = append(rows, row(it))
	}
	return rows
}

// entryRow is an object's identity in four cells: kind, API version, namespace, name.
func entryRow(e domain.Entry) []string {
	return []string{clean(e.Kind), clean(e.APIVersion()), cmp.Or(clean(e.Namespace), "-"), clean(e.Name)}
}

// candidatesNote words the snapshots the Composition comp may read from.
func candidatesNote(c *app.CandidatesReport, comp string) string {
	ids := clean(strings.Join(c.SynthesisUUIDs, ", "))
	others := ""
	if len(c.OtherNamespaces) > 0 {
		others = fmt.Sprintf("; not those of namespace %s: adoption across namespaces is off", clean(strings.Join(c.OtherNamespaces, ", ")))
	}
	switch {
	case len(c.SynthesisUUIDs) == 0 && len(c.OtherNamespaces) > 0:
		return fmt.Sprintf("none: every snapshot of the lineage is of namespace %s, and adoption across namespaces is off", clean(strings.Join(c.OtherNamespaces, ", ")))
	case len(c.SynthesisUUIDs) == 0:
		return "none: no Secret of the lineage holds a readable snapshot"
	case c.Own:
		return fmt.Sprintf("%d recorded for %s: %s", len(c.SynthesisUUIDs), clean(comp), ids)
	case c.AcrossNamespaces:
		return fmt.Sprintf("none recorded for %s, so every snapshot of the lineage, of any namespace (%d): %s", clean(comp), len(c.SynthesisUUIDs), ids)
	}
	ns, _, _ := strings.Cut(comp, "/")
	return fmt.Sprintf("none recorded for %s, so every snapshot of the lineage in namespace %s (%d): %s%s", clean(comp), clean(ns), len(c.SynthesisUUIDs), ids, others)
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

func parens(s string) string { return around(" (", s, ")") }

// around is clean(s) between before and after, or "" when s is empty.
func around(before, s, after string) string {
	if s == "" {
		return ""
	}
	return before + clean(s) + after
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

// unresolvedHeader heads unresolvedRow's columns.
const unresolvedHeader = "OBJECT\tUID\tREASON\tSINCE\tKEPT BY SYNTHESIS\tDETAIL"

// unresolvedRow is u's row under unresolvedHeader.
func unresolvedRow(u domain.Unresolved) []string {
	return []string{clean(u.Entry().ID().String()), cmp.Or(clean(u.UID), "-"), clean(u.Reason), u.Since.Format(time.RFC3339), clean(u.SourceSynthesisUUID), clean(u.Detail)}
}
