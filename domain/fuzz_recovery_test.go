package domain_test

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// editPool applies FuzzHistoryVerdict's edits to the Secrets of historyPool: two bytes per
// edit, the Secret and the operation with its argument.
func editPool(pool []domain.ChunkSecret, ops []byte, s string, data []byte) []domain.ChunkSecret {
	secrets := slices.Clone(pool)
	keys := []string{domain.AnnotationCompositionNamespace, domain.AnnotationCompositionName, domain.AnnotationCompositionUID,
		domain.AnnotationSourceSynthesisUUID, domain.AnnotationSourceSynthesisTime, domain.AnnotationChunkIndex,
		domain.AnnotationChunkCount, domain.AnnotationDigest, domain.AnnotationFormat}
	for i := 0; i+1 < len(ops) && len(secrets) > 0; i += 2 {
		at, op, arg := int(ops[i])%len(secrets), ops[i+1]&0x0f, int(ops[i+1]>>4)
		c := secrets[at].Clone()
		ann := c.Annotations
		switch op {
		case 0:
			secrets = slices.Delete(secrets, at, at+1)
			continue
		case 1:
			c.Name += "-copy"
			secrets = append(secrets, c)
			continue
		case 2:
			ann[domain.AnnotationChunkIndex] = strconv.Itoa(arg)
		case 3:
			ann[domain.AnnotationChunkCount] = strconv.Itoa(arg)
		case 4:
			ann[domain.AnnotationSourceSynthesisTime] = pool[arg%len(pool)].Annotations[domain.AnnotationSourceSynthesisTime]
		case 5:
			ann[domain.AnnotationCompositionUID] = []string{compUID, "uid-east", s}[arg%3]
		case 6:
			ann[domain.AnnotationCompositionName] = []string{"web", "east", s}[arg%3]
		case 7:
			ann[domain.AnnotationDigest] = s
		case 8:
			c.Data[domain.SecretDataKey] = data
		case 9:
			ann[keys[arg%len(keys)]] = s
		case 10:
			c.Type = s
		case 11:
			ann[domain.AnnotationSourceSynthesisUUID] = pool[arg%len(pool)].Annotations[domain.AnnotationSourceSynthesisUUID]
		case 12:
			ann[domain.AnnotationCompositionNamespace] = s
		default:
			delete(ann, keys[arg%len(keys)])
		}
		secrets[at] = c
	}
	return secrets
}

// oracleSnapshot is one snapshot as the candidate oracle reads it from the annotations.
type oracleSnapshot struct {
	uuid, namespace, name, uid string
	at                         time.Time
}

// oracleCandidates is design §5 step 3 computed from the Secrets' annotations alone: the snapshots
// (metadata of each one's first Secret by name), those recorded for self's namespace/name, and
// the candidates under adoption. It is meaningful only when every Secret passed step 1.
func oracleCandidates(t *testing.T, self domain.Composition, secrets []domain.ChunkSecret, adoption domain.Adoption) (all, own, cands []oracleSnapshot) {
	sorted := slices.Clone(secrets)
	slices.SortFunc(sorted, func(a, b domain.ChunkSecret) int { return strings.Compare(a.Name, b.Name) })
	seen := map[string]bool{}
	var adoptable []oracleSnapshot
	for _, s := range sorted {
		a := s.Annotations
		uuid := a[domain.AnnotationSourceSynthesisUUID]
		if seen[uuid] {
			continue
		}
		seen[uuid] = true
		at, err := time.Parse(time.RFC3339, a[domain.AnnotationSourceSynthesisTime])
		require.NoError(t, err, "a Secret that passed step 1 has an RFC 3339 timestamp")
		o := oracleSnapshot{uuid: uuid, namespace: a[domain.AnnotationCompositionNamespace], name: a[domain.AnnotationCompositionName],
			uid: a[domain.AnnotationCompositionUID], at: at}
		all = append(all, o)
		if o.namespace == self.Namespace && o.name == self.Name {
			own = append(own, o)
		}
		if o.namespace == self.Namespace || adoption == domain.AdoptAcrossNamespaces {
			adoptable = append(adoptable, o)
		}
	}
	cands = own
	if len(own) == 0 {
		cands = adoptable
	}
	return all, own, cands
}

// newestOf is the newest of the snapshots and whether another shares its timestamp.
func newestOf(ss []oracleSnapshot) (oracleSnapshot, bool) {
	best, tied := ss[0], false
	for _, s := range ss[1:] {
		switch c := s.at.Compare(best.at); {
		case c > 0:
			best, tied = s, false
		case c == 0:
			tied = true
		}
	}
	return best, tied
}

// FuzzCandidates: design §5 step 3 on arbitrary Secret sets (historyPool edited as in
// FuzzHistoryVerdict) read for a fuzzed reader, under both adoptions. A selected snapshot is
// the reader's own namespace/name's whenever the lineage holds one, is of the reader's
// namespace unless adoption across namespaces is allowed (none of it: OtherNamespace), never
// carries the reader's UID (that is SameIncarnation), and is the strictly newest candidate; a
// tie is reported only among candidates; steps 4–5 decide only for the newest candidate.
func FuzzCandidates(f *testing.F) {
	f.Add([]byte{}, "", []byte(nil), uint8(0), uint8(0), false)
	f.Add([]byte{}, "", []byte(nil), uint8(0), uint8(0), true)                 // own predecessor over a newer sibling
	f.Add([]byte{}, "", []byte(nil), uint8(2), uint8(3), true)                 // no own snapshot: the whole lineage
	f.Add([]byte{}, "", []byte(nil), uint8(1), uint8(1), true)                 // east reads its own, with its UID
	f.Add([]byte{}, "", []byte(nil), uint8(1), uint8(3), true)                 // east recreated
	f.Add([]byte{2, 0x04, 3, 0x04}, "", []byte(nil), uint8(0), uint8(0), true) // a tie among own candidates
	f.Add([]byte{4, 0x04}, "", []byte(nil), uint8(0), uint8(0), true)          // a tie with a non-candidate
	f.Add([]byte{2, 0x00}, "", []byte(nil), uint8(0), uint8(0), true)          // an older own candidate misses a chunk
	f.Add([]byte{2, 0x44, 3, 0x44}, "", []byte(nil), uint8(0), uint8(0), true) // an older own candidate made the newest
	f.Add([]byte{0, 0x06, 1, 0x06}, "", []byte(nil), uint8(0), uint8(0), true) // own renamed to east
	f.Add([]byte{0, 0x05, 1, 0x05}, "", []byte(nil), uint8(0), uint8(0), true) // own carries this UID
	f.Add([]byte{2, 0x0c}, "team-b", []byte(nil), uint8(0), uint8(0), true)
	f.Add([]byte{}, "", []byte(nil), uint8(3), uint8(3), true)                       // team-b/web: the lineage is team-a's
	f.Add([]byte{2, 0x0c}, "team-b", []byte(nil), uint8(3), uint8(3), true)          // team-b/web: its own snapshot among team-a's
	f.Add([]byte{2, 0x0c, 5, 0x0c}, "team-b", []byte(nil), uint8(5), uint8(3), true) // team-b/gone: a rename within team-b
	f.Add([]byte{0, 0x08}, "", []byte("[{]"), uint8(0), uint8(0), true)              // the selected is undecodable
	f.Add([]byte{0, 0x00}, "", []byte(nil), uint8(0), uint8(0), true)                // the selected misses a chunk
	f.Add([]byte{3, 0x07}, "sha256:00", []byte(nil), uint8(0), uint8(0), true)
	f.Fuzz(func(t *testing.T, ops []byte, s string, data []byte, readerName, readerUID uint8, dropMine bool) {
		pool := historyPool(t)
		if dropMine {
			pool = slices.DeleteFunc(pool, func(c domain.ChunkSecret) bool {
				return c.Annotations[domain.AnnotationCompositionUID] == compUID
			})
		}
		secrets := editPool(pool, ops, s, data)
		self := composition()
		self.Name = []string{"web", "east", "gone"}[int(readerName)%3]
		self.Namespace = []string{"team-a", "team-b"}[int(readerName/3)%2]
		self.UID = []string{compUID, "uid-east", "uid-pred", "uid-fresh"}[int(readerUID)%4]

		for _, adoption := range []domain.Adoption{domain.AdoptWithinNamespace, domain.AdoptAcrossNamespaces} {
			snap, err := domain.ReadSnapshotFor(self, secrets, now, 0, adoption)
			h := domain.ReadHistoryFor(self, secrets, now, 0, adoption)
			_, hErr := h.Verdict()
			require.Equal(t, err, hErr, "ReadHistoryFor judges as ReadSnapshotFor does")
			if len(secrets) == 0 {
				require.ErrorIs(t, err, domain.ErrNoInventory)
				continue
			}
			if len(h.Rejected()) > 0 {
				require.Error(t, err, "a rejected Secret makes the lineage untrusted")
				continue
			}
			all, own, cands := oracleCandidates(t, self, secrets, adoption)
			require.Equal(t, len(own) > 0, h.OwnCandidates)
			var wantCands []string
			for _, r := range h.Snapshots {
				isCand := slices.ContainsFunc(cands, func(o oracleSnapshot) bool { return o.uuid == r.Meta.SynthesisUUID })
				require.Equal(t, isCand, r.Candidate, "snapshot %s", r.Meta.SynthesisUUID)
				excluded := !isCand && len(own) == 0 && r.Meta.CompositionNamespace != self.Namespace && adoption == domain.AdoptWithinNamespace
				require.Equal(t, excluded, r.Role == domain.RoleOtherNamespace, "snapshot %s is %s", r.Meta.SynthesisUUID, r.Role)
				require.Equal(t, !isCand && !excluded, r.Role == domain.RoleNotCandidate, "snapshot %s is %s", r.Meta.SynthesisUUID, r.Role)
				if r.Role == domain.RoleNewestTied || r.Role == domain.RoleSelected || r.Role == domain.RoleSameIncarnation {
					require.True(t, r.Candidate, "only a candidate is %s", r.Role)
				}
				if isCand {
					wantCands = append(wantCands, r.Meta.SynthesisUUID)
				}
			}
			require.Equal(t, wantCands, h.Candidates)
			require.Len(t, h.Snapshots, len(all))
			var mixed bool
			for _, f := range h.Findings {
				if f.Step == 2 {
					mixed = true
				}
			}
			var other *domain.OtherNamespaceError
			if len(cands) == 0 && mixed {
				reason, _ := domain.InvalidReasonOf(err)
				require.Equal(t, domain.ReasonMixedMetadata, reason, "step 2 decides before step 3")
				continue
			}
			if len(cands) == 0 {
				require.ErrorAs(t, err, &other, "a lineage with snapshots but no candidate is another namespace's")
				require.Equal(t, domain.AdoptWithinNamespace, adoption, "with adoption across namespaces every snapshot is a candidate")
				var namespaces []string
				for _, o := range all {
					require.NotEqual(t, self.Namespace, o.namespace)
					if !slices.Contains(namespaces, o.namespace) {
						namespaces = append(namespaces, o.namespace)
					}
				}
				slices.Sort(namespaces)
				require.Equal(t, namespaces, other.Namespaces)
				require.Equal(t, namespaces, h.OtherNamespaces)
				continue
			}
			require.False(t, errors.As(err, &other), "OtherNamespace only when nothing is a candidate: %v", err)

			ownUID := slices.ContainsFunc(cands, func(o oracleSnapshot) bool { return o.uid == self.UID })
			newest, tied := newestOf(cands)
			reason, invalid := domain.InvalidReasonOf(err)
			switch {
			case err == nil:
				m := snap.Meta()
				if len(own) > 0 {
					require.Equal(t, self.Namespace, m.CompositionNamespace, "the own namespace/name's snapshot is selected")
					require.Equal(t, self.Name, m.CompositionName, "the own namespace/name's snapshot is selected")
				}
				require.NotEqual(t, self.UID, m.CompositionUID, "a snapshot of this incarnation is never selected")
				require.False(t, ownUID, "a candidate of this incarnation is SameIncarnation")
				require.False(t, tied, "a tie among candidates is AmbiguousTimestamp")
				require.Equal(t, newest.uuid, m.SynthesisUUID, "the newest candidate is selected")
				if adoption == domain.AdoptWithinNamespace {
					require.Equal(t, self.Namespace, m.CompositionNamespace, "another namespace's snapshot is adopted only when allowed")
				}
			case errors.Is(err, domain.ErrSameIncarnation):
				require.True(t, ownUID, "SameIncarnation needs a candidate carrying the reader's UID")
				require.Equal(t, self.UID, snap.CompositionUID())
				require.True(t, slices.ContainsFunc(cands, func(o oracleSnapshot) bool { return o.uuid == snap.SynthesisUUID() }))
			case invalid && reason == domain.ReasonAmbiguousTimestamp:
				require.False(t, ownUID, "SameIncarnation stops before the timestamps are compared")
				require.True(t, tied, "AmbiguousTimestamp is a tie among the candidates, not the lineage")
			case invalid && !mixed:
				// Steps 4–5: they judge the newest candidate only.
				require.False(t, ownUID)
				require.False(t, tied)
				first, ok := firstDecisive(h)
				require.True(t, ok)
				require.GreaterOrEqual(t, first.Step, 4, "%+v", first)
				require.Equal(t, newest.uuid, first.Snapshot, "steps 4–5 decide only for the selected snapshot")
			case invalid:
				require.Equal(t, domain.ReasonMixedMetadata, reason)
			default:
				t.Fatalf("unexpected verdict %v", err)
			}
		}
	})
}

// Downstream observations FuzzPlanRecovery draws from, one byte per entry (low bits).
const (
	obsOlder = iota
	obsNewer
	obsSameSecond
	obsAbsent
	obsUnreadable
	obsNotRead
	obsKinds
)

// FuzzPlanRecovery: design §6 and design §6.3 on a snapshot of n entries of an earlier team-a/web (or of
// team-a/web-old, renamed), with fuzzed absent entries, downstream observations, write time,
// current decision (its recoveredFrom), SharedLineage, guard and review. Recovery from the
// snapshot already decided stops with AlreadyDecided; no tombstone is ever published for an
// object not observed Present with a creationTimestamp at or before the history's write time
// (in whole seconds), nor when the write time is unknown; the guard counts what remains;
// Unverified is exactly "nothing left, and something kept back for doubt".
func FuzzPlanRecovery(f *testing.F) {
	older, newer, same := []byte{obsOlder, obsOlder, obsOlder, obsOlder}, []byte{obsNewer, obsNewer}, []byte{obsSameSecond | 0xf8, obsSameSecond}
	f.Add(uint8(4), uint16(0), older, true, uint32(0), uint8(0), "", uint8(0), false, false, uint8(100), uint8(0))
	f.Add(uint8(4), uint16(0), older, true, uint32(0), uint8(1), "", uint8(0), false, false, uint8(100), uint8(0))        // AlreadyDecided
	f.Add(uint8(4), uint16(0), older, true, uint32(0), uint8(1), "", uint8(3), true, false, uint8(100), uint8(0))         // after a SharedLineage refusal, renamed
	f.Add(uint8(4), uint16(0), older, true, uint32(0), uint8(1), "", uint8(0), true, true, uint8(100), uint8(0))          // SharedLineage first
	f.Add(uint8(4), uint16(0), older, true, uint32(0), uint8(2), "", uint8(0), false, false, uint8(100), uint8(0))        // another source
	f.Add(uint8(4), uint16(0), older, true, uint32(0), uint8(3), "s-pred", uint8(1), false, false, uint8(100), uint8(0))  // fuzzed, equal
	f.Add(uint8(4), uint16(0x5), older, true, uint32(0), uint8(0), "", uint8(0), false, false, uint8(100), uint8(0))      // some produced
	f.Add(uint8(4), uint16(0xf), older, true, uint32(0), uint8(0), "", uint8(0), false, false, uint8(100), uint8(0))      // none absent
	f.Add(uint8(4), uint16(0), older, false, uint32(1), uint8(0), "", uint8(0), false, false, uint8(100), uint8(0))       // write time unknown
	f.Add(uint8(4), uint16(0), newer, true, uint32(0), uint8(0), "", uint8(0), false, false, uint8(100), uint8(0))        // newer, then not read
	f.Add(uint8(2), uint16(0), same, true, uint32(999999999), uint8(0), "", uint8(0), false, false, uint8(100), uint8(0)) // the same second
	f.Add(uint8(2), uint16(0), same, true, uint32(0), uint8(0), "", uint8(0), false, false, uint8(100), uint8(0))         // the same second, write at .0
	f.Add(uint8(4), uint16(0), []byte{obsAbsent, obsNewer, obsAbsent, obsNewer}, true, uint32(0), uint8(0), "", uint8(0), false, false, uint8(100), uint8(0))
	f.Add(uint8(4), uint16(0), []byte{obsAbsent, obsUnreadable, obsAbsent, obsNewer}, true, uint32(0), uint8(0), "", uint8(0), false, false, uint8(100), uint8(0))
	f.Add(uint8(4), uint16(0), []byte{obsAbsent, obsOlder, obsOlder, obsOlder}, true, uint32(0), uint8(0), "", uint8(0), false, false, uint8(50), uint8(0))  // the guard counts what remains
	f.Add(uint8(4), uint16(0), []byte{obsAbsent, obsAbsent, obsOlder, obsOlder}, true, uint32(0), uint8(0), "", uint8(0), false, false, uint8(50), uint8(0)) // exactly at the guard
	f.Add(uint8(9), uint16(0x100), []byte{obsOlder, obsOlder, obsOlder, obsAbsent, obsOlder, obsOlder}, true, uint32(7), uint8(2), "", uint8(4), false, false, uint8(30), uint8(1))
	f.Add(uint8(9), uint16(0), []byte{obsOlder, obsOlder, obsOlder, obsAbsent, obsOlder, obsOlder, obsOlder, obsOlder, obsOlder}, true, uint32(7), uint8(0), "", uint8(0), false, false, uint8(30), uint8(2))
	f.Fuzz(func(t *testing.T, n uint8, produced uint16, obs []byte, writeKnown bool, writeAt uint32, rfMode uint8, rf string,
		prevKind uint8, renamed, sourceAlive bool, fraction, review uint8) {
		entries := entriesN(int(n)%10 + 1)
		inv := mustInventory(t, entries)
		m := meta(inv, "uid-pred", "s-pred", synTime.Add(-time.Hour))
		if renamed {
			m.CompositionName = "web-old"
		}
		secrets := secretsFor(t, inv, m, 400)
		// The newest chunk write is the history's write time; it may fall anywhere in its second.
		written := historyWritten.Add(time.Duration(writeAt%1e9) * time.Nanosecond)
		newestChunk := int(writeAt/1e9) % len(secrets)
		for i := range secrets {
			secrets[i].DataWrittenAt = historyWritten.Add(-time.Duration(i+1) * time.Minute)
		}
		secrets[newestChunk].DataWrittenAt = written
		if !writeKnown {
			secrets[(newestChunk+1)%len(secrets)].DataWrittenAt = time.Time{}
		}

		c := composition()
		var prevRF string
		if mode := rfMode % 4; mode != 0 {
			prevRF = []string{"", "s-pred", "s-other", rf}[mode]
			prev := []domain.Decision{
				{Outcome: domain.OutcomeRecovered},
				{Outcome: domain.OutcomeNothingToRecover, Reason: domain.ReasonNoOrphans},
				{Outcome: domain.OutcomeNothingToRecover, Reason: domain.ReasonUnverified},
				{Outcome: domain.OutcomeInventoryInvalid, Reason: domain.ReasonSharedLineage.String()},
				{Outcome: domain.OutcomeHeldForReview, Reason: domain.ReasonOverDeletionGuard},
			}[int(prevKind)%5]
			prev.SynthesisUUID, prev.RecoveredFrom = "earlier-synthesis", prevRF
			c.Annotations[domain.AnnotationDecision] = prev.Encode()
			d, ok := c.Decision()
			require.True(t, ok)
			prevRF = d.RecoveredFrom // as JSON carries it
		}
		if r := review % 3; r != 0 {
			c.Annotations[domain.AnnotationReview] = []string{"", "approve:", "reject:"}[r] + synUUID
		}
		snap, err := domain.ReadSnapshotFor(c, secrets, now, 0, domain.AdoptWithinNamespace)
		require.NoError(t, err)
		var ms []string
		var absent []domain.Entry
		for i, e := range entries {
			if produced&(1<<i) != 0 {
				ms = append(ms, manifest(e.APIVersion(), e.Kind, e.Namespace, e.Name))
			} else {
				absent = append(absent, e)
			}
		}
		observed := map[domain.ResourceID]domain.Observation{}
		kinds := map[domain.ResourceID]int{}
		wholeSecond := written.Truncate(time.Second)
		for i, e := range entries {
			kind, arg := obsNotRead, 0
			if i < len(obs) {
				kind, arg = int(obs[i]&0x07)%obsKinds, int(obs[i]>>3)
			}
			kinds[e.ID()] = kind
			switch kind {
			case obsOlder:
				observed[e.ID()] = domain.Observation{State: domain.ObjectPresent, Created: wholeSecond.Add(-time.Duration(arg+1) * time.Second), Writes: enoWrote(wholeSecond.Add(-time.Duration(arg+1) * time.Second)), UID: testUID}
			case obsNewer:
				observed[e.ID()] = domain.Observation{State: domain.ObjectPresent, Created: wholeSecond.Add(time.Duration(arg+1) * time.Second), Writes: enoWrote(wholeSecond.Add(time.Duration(arg+1) * time.Second)), UID: testUID}
			case obsSameSecond:
				observed[e.ID()] = domain.Observation{State: domain.ObjectPresent, Created: wholeSecond.Add(time.Duration(arg) * 31 * time.Millisecond), Writes: enoWrote(wholeSecond.Add(time.Duration(arg) * 31 * time.Millisecond)), UID: testUID}
			case obsAbsent:
				observed[e.ID()] = domain.Observation{State: domain.ObjectAbsent}
			case obsUnreadable:
				observed[e.ID()] = domain.Observation{State: domain.ObjectUnreadable, Detail: "forbidden"}
			}
		}
		in := domain.RecoveryInput{Composition: c, Snapshot: snap, Synthesis: readSynthesis(t, ms...),
			MaxTombstoneFraction: float64(fraction%101) / 100, Now: now}
		if sourceAlive {
			// Alive is the snapshot's own recorder: another Composition only when renamed.
			in.LiveOwners = []domain.LiveOwner{{Ref: m.RecordedFor()}}
		}

		p, err := domain.PlanRecovery(in)
		require.NoError(t, err)
		shared := sourceAlive && renamed
		already := !shared && prevRF != "" && prevRF == snap.SynthesisUUID()
		if shared || already || len(absent) == 0 {
			require.True(t, p.Decided(), "decided before any downstream read")
			in.Observed = observed
			again, err := domain.PlanRecovery(in)
			require.NoError(t, err)
			require.True(t, p.Decision.SameAs(again.Decision), "what downstream holds changes nothing before design §6.3")
			switch {
			case shared:
				require.Equal(t, domain.OutcomeInventoryInvalid, p.Decision.Outcome)
				require.Equal(t, domain.ReasonSharedLineage.String(), p.Decision.Reason)
				require.Equal(t, prevRF, p.Decision.RecoveredFrom, "a SharedLineage refusal carries recoveredFrom over")
			case already:
				require.Equal(t, domain.OutcomeNothingToRecover, p.Decision.Outcome)
				require.Equal(t, domain.ReasonAlreadyDecided, p.Decision.Reason, p.Decision.Message)
				require.Equal(t, snap.SynthesisUUID(), p.Decision.RecoveredFrom)
			default:
				require.Equal(t, domain.OutcomeNothingToRecover, p.Decision.Outcome)
				require.Equal(t, domain.ReasonNoOrphans, p.Decision.Reason)
				require.Equal(t, snap.SynthesisUUID(), p.Decision.RecoveredFrom)
			}
			require.Empty(t, p.Tombstones)
			require.Empty(t, p.Held)
			require.Empty(t, p.Dropped)
			require.Zero(t, p.Decision.Tombstones)
			return
		}
		require.False(t, p.Decided(), "absent entries are read downstream first")
		require.Equal(t, ids(absent), tombstoneIDs(p.Verify))

		in.Observed = observed
		p, err = domain.PlanRecovery(in)
		require.NoError(t, err)
		require.True(t, p.Decided())

		// The oracle of design §6.3.
		var verified []domain.ResourceID
		drops := map[domain.DropReason][]domain.ResourceID{}
		var reasons []domain.DropReason
		drop := func(r domain.DropReason, id domain.ResourceID) {
			if len(drops[r]) == 0 {
				reasons = append(reasons, r)
			}
			drops[r] = append(drops[r], id)
		}
		doubt := !writeKnown
		for _, e := range absent {
			id := e.ID()
			switch k := kinds[id]; {
			case !writeKnown:
				drop(domain.DropUnknownWriteTime, id)
			case k == obsAbsent:
				drop(domain.DropNotFound, id)
			case k == obsUnreadable || k == obsNotRead:
				drop(domain.DropUnreadable, id)
				doubt = true
			case k == obsNewer:
				drop(domain.DropNewer, id)
			default:
				verified = append(verified, id)
			}
		}

		// Whatever the outcome: nothing unverified is published or held.
		for _, ts := range slices.Concat(p.Tombstones, p.Held) {
			o, ok := observed[ts.Entry.ID()]
			require.True(t, ok, "%s was never read", ts.Entry.ID())
			require.Equal(t, domain.ObjectPresent, o.State, "%s", ts.Entry.ID())
			require.True(t, writeKnown, "no tombstone without the write time")
			require.False(t, o.Created.Truncate(time.Second).After(written.Truncate(time.Second)),
				"%s created %s, after the history was written %s", ts.Entry.ID(), o.Created, written)
		}
		require.LessOrEqual(t, len(p.Tombstones), len(absent))
		require.LessOrEqual(t, p.Decision.Tombstones, len(absent))
		require.Len(t, p.Dropped, len(absent)-len(verified))
		for i, d := range p.Dropped {
			require.Contains(t, drops[d.Reason], d.Tombstone.Entry.ID(), "dropped %d", i)
		}
		if len(p.Dropped) > 0 {
			require.Contains(t, p.Decision.Message, fmt.Sprintf("dropped %d: ", len(p.Dropped)))
			for _, r := range reasons {
				require.Contains(t, p.Decision.Message, fmt.Sprintf("%d %s (first %s", len(drops[r]), r, drops[r][0]),
					"the message counts each reason and names its first")
			}
		} else {
			require.NotContains(t, p.Decision.Message, "dropped")
		}

		if len(verified) == 0 {
			require.Equal(t, domain.OutcomeNothingToRecover, p.Decision.Outcome)
			want := domain.ReasonNoOrphans
			if doubt {
				want = domain.ReasonUnverified
			}
			require.Equal(t, want, p.Decision.Reason, p.Decision.Message)
			require.Empty(t, p.Tombstones)
			require.Empty(t, p.Held)
			require.Zero(t, p.Decision.Tombstones)
			if doubt {
				require.Equal(t, prevRF, p.Decision.RecoveredFrom, "Unverified carries recoveredFrom over")
			} else {
				require.Equal(t, snap.SynthesisUUID(), p.Decision.RecoveredFrom)
			}
			return
		}
		require.NotEqual(t, domain.ReasonUnverified, p.Decision.Reason, "something was left to publish")
		over := !(float64(len(verified))/float64(len(entries)) <= in.MaxTombstoneFraction)
		switch {
		case over && review%3 == 0:
			require.Equal(t, domain.OutcomeHeldForReview, p.Decision.Outcome)
			require.Equal(t, verified, tombstoneIDs(p.Held))
			require.Empty(t, p.Tombstones)
			require.Equal(t, len(verified), p.Decision.Tombstones)
			require.Equal(t, prevRF, p.Decision.RecoveredFrom)
		case over && review%3 == 2:
			require.Equal(t, domain.OutcomeNothingToRecover, p.Decision.Outcome)
			require.Equal(t, domain.ReasonRejected, p.Decision.Reason)
			require.Empty(t, p.Tombstones)
			require.Zero(t, p.Decision.Tombstones)
			require.Equal(t, snap.SynthesisUUID(), p.Decision.RecoveredFrom)
		default:
			require.Equal(t, domain.OutcomeRecovered, p.Decision.Outcome, p.Decision.Message)
			require.Equal(t, verified, tombstoneIDs(p.Tombstones), "exactly the verified tombstones, in canonical order")
			require.Empty(t, p.Held)
			require.Equal(t, len(verified), p.Decision.Tombstones)
			require.Equal(t, snap.SynthesisUUID(), p.Decision.RecoveredFrom)
		}
	})
}

func ids(entries []domain.Entry) []domain.ResourceID {
	out := make([]domain.ResourceID, len(entries))
	for i, e := range entries {
		out[i] = e.ID()
	}
	slices.SortFunc(out, func(a, b domain.ResourceID) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}
