package domain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Finding is one problem reading found in a lineage's Secrets. Every read derives the verdict
// from the same checks: the first decisive finding in reading's order (design §5).
type Finding struct {
	// Step is the step of reading that found it: 1 (one Secret), 2 (a snapshot's chunks disagree),
	// 3 (a tie among the candidates), 4 (indexes) or 5 (decoding and digest).
	Step   int
	Reason InvalidReason
	// Snapshot is the source synthesis UUID of the snapshot concerned; "" for steps 1 and 3.
	Snapshot string
	// Secret is the Secret that showed the problem, when one did.
	Secret string
	Detail string
	// Missing lists the first missing indexes of a gap (step 4), MissingCount counts them all.
	Missing      []int
	MissingCount int
	// Index is the chunk index of a step-4 finding about one Secret: out of range, or, when
	// HeldBy names the Secret that already holds it, repeated.
	Index  int
	HeldBy string
	// Decisive: it decides the verdict unless an earlier one does. Steps 1–3 judge every Secret;
	// steps 4–5 decide only for the selected snapshot, information for any other.
	Decisive bool
}

// Err is the finding as reading's refusal.
func (f Finding) Err() *InventoryInvalidError {
	return &InventoryInvalidError{Reason: f.Reason, Secret: f.Secret, Detail: f.Detail}
}

// listedMissing is how many missing indexes a gap finding lists.
const listedMissing = 10

// SnapshotRole is what choosing the candidates made of a snapshot.
type SnapshotRole struct{ name string }

var (
	// RoleSelected: the verdict selects it.
	RoleSelected = SnapshotRole{"selected"}
	// RoleNewest: the newest candidate, but the verdict is no selection.
	RoleNewest = SnapshotRole{"newest"}
	// RoleNewestTied: a candidate sharing the newest timestamp with another (AmbiguousTimestamp).
	RoleNewestTied = SnapshotRole{"newest-tied"}
	// RoleOlder: an older candidate, ignored.
	RoleOlder = SnapshotRole{"older"}
	// RoleSameIncarnation: a candidate carrying the reader's own UID (SameIncarnation).
	RoleSameIncarnation = SnapshotRole{"same-incarnation"}
	// RoleNotCandidate: another Composition's while the reader has its own, ignored.
	RoleNotCandidate = SnapshotRole{"not-candidate"}
	// RoleOtherNamespace: another namespace's, the reader having none and adoption off; ignored.
	RoleOtherNamespace = SnapshotRole{"other-namespace"}
)

func (r SnapshotRole) String() string { return r.name }

// DigestCheck is what the digest check found of a snapshot's digest.
type DigestCheck struct{ name string }

var (
	// DigestUnchecked: the snapshot is incomplete or its chunks disagree, so it was not decoded.
	DigestUnchecked   = DigestCheck{"unchecked"}
	DigestOK          = DigestCheck{"ok"}
	DigestMismatch    = DigestCheck{"mismatch"}
	DigestUndecodable = DigestCheck{"undecodable"}
)

func (d DigestCheck) String() string { return d.name }

// SnapshotReading is one snapshot of a History: its chunks that passed step 1, and what steps 2–5 found.
type SnapshotReading struct {
	// Meta is the metadata of its first chunk by Secret name.
	Meta SnapshotMeta
	// Chunks are ordered by index, then Secret name.
	Chunks        []StoredChunk
	Role          SnapshotRole
	Candidate     bool
	MixedMetadata bool
	// Present counts the distinct indexes in 0..count-1.
	Present int
	// Complete: the chunks agree and hold exactly the indexes 0..count-1, each once.
	Complete bool
	Digest   DigestCheck
	// Computed is the digest of the decoded entries, and Entries their number, once decoded.
	Computed string
	Entries  int
	// Findings are those of steps 2, 4 and 5 about this snapshot.
	Findings []Finding
}

// History is a lineage read with every finding rather than the first, for inspect.
type History struct {
	// Findings are all findings in reading's order.
	Findings []Finding
	// Snapshots are newest first, ties by synthesis UUID.
	Snapshots []SnapshotReading
	// Candidates are the synthesis UUIDs of the candidates, in Snapshots' order (candidatesFor);
	// OwnCandidates: they are the reader's own namespace/name's snapshots.
	Candidates    []string
	OwnCandidates bool
	// Adoption is the reader's; OtherNamespaces are the namespaces of the snapshots it kept
	// from being candidates (RoleOtherNamespace), sorted.
	Adoption        Adoption
	OtherNamespaces []string

	verdict verdict
}

// Verdict is the outcome of reading, as ReadSnapshotFor returns it (verdict.derive).
func (h History) Verdict() (Snapshot, error) { return h.verdict.derive(h.Findings) }

// Rejected are the findings of step 1, one per Secret that does not parse, by Secret name.
func (h History) Rejected() []Finding {
	return slices.DeleteFunc(slices.Clone(h.Findings), func(f Finding) bool { return f.Step != 1 })
}

// ReadHistory reads a lineage's history with every finding for no Composition: all are candidates.
func ReadHistory(secrets []ChunkSecret, now time.Time, maxChunks int) History {
	r := reader{now: now, maxChunks: maxChunks, all: true}
	r.read(secrets)
	return r.history()
}

// ReadHistoryFor is ReadSnapshotFor with every finding.
func ReadHistoryFor(c Composition, secrets []ChunkSecret, now time.Time, maxChunks int, adoption Adoption) History {
	r := reader{now: now, maxChunks: maxChunks, self: &c, adoption: adoption, all: true}
	r.read(secrets)
	return r.history()
}

// verdict is what the findings leave to decide: no Secret, another namespace's history, the
// reader's incarnation, or the selected snapshot; owners go with whatever snapshot it returns.
type verdict struct {
	empty           bool
	otherNamespaces []string
	same            *SnapshotMeta
	selected        Snapshot
	readFor         *string
	owners          []CompositionRef
}

func (v verdict) derive(findings []Finding) (Snapshot, error) {
	if v.empty {
		return Snapshot{}, ErrNoInventory
	}
	for _, f := range findings {
		if f.Decisive {
			return Snapshot{}, f.Err()
		}
	}
	if v.otherNamespaces != nil {
		return Snapshot{readFor: v.readFor, owners: v.owners}, &OtherNamespaceError{Namespaces: slices.Clone(v.otherNamespaces)}
	}
	if v.same != nil {
		return Snapshot{meta: *v.same, readFor: v.readFor, owners: v.owners}, ErrSameIncarnation
	}
	s := v.selected
	s.readFor, s.owners = v.readFor, v.owners
	return s, nil
}

// reader reads a lineage's Secrets step by step, stopping at the first decisive finding unless all is set.
type reader struct {
	now       time.Time
	maxChunks int
	self      *Composition
	adoption  Adoption
	all       bool

	findings   []Finding
	groups     map[string][]StoredChunk
	order      []string // synthesis UUIDs in the order of their first Secret by name
	mixed      map[string]bool
	candidates []string
	own        bool
	newest     string
	tied       bool
	selected   string
	verdict    verdict
	readings   map[string]*SnapshotReading
}

// found records f and reports whether reading goes on.
func (r *reader) found(f Finding) bool {
	r.findings = append(r.findings, f)
	return r.all || !f.Decisive
}

func (r *reader) read(secrets []ChunkSecret) {
	if r.self != nil {
		r.verdict.readFor = &r.self.UID
	}
	if len(secrets) == 0 {
		r.verdict.empty = true
		return
	}
	if !r.parse(secrets) || !r.agree() || !r.choose() {
		return
	}
	if !r.all {
		if r.selected != "" {
			r.judge(r.selected, nil)
		}
		return
	}
	r.readings = make(map[string]*SnapshotReading, len(r.order))
	for _, uuid := range r.byTime() {
		rd := &SnapshotReading{Meta: r.groups[uuid][0].Meta, Candidate: slices.Contains(r.candidates, uuid), MixedMetadata: r.mixed[uuid]}
		r.readings[uuid] = rd
		r.judge(uuid, rd)
	}
}

// parse is step 1: every Secret must parse, taken by name so that findings are deterministic.
func (r *reader) parse(secrets []ChunkSecret) bool {
	sorted := slices.Clone(secrets)
	slices.SortFunc(sorted, func(a, b ChunkSecret) int { return strings.Compare(a.Name, b.Name) })
	r.groups, r.mixed = map[string][]StoredChunk{}, map[string]bool{}
	for _, s := range sorted {
		c, err := ParseStoredChunk(s, r.now, r.maxChunks)
		if err != nil {
			inv := err.(*InventoryInvalidError)
			if !r.found(Finding{Step: 1, Reason: inv.Reason, Secret: inv.Secret, Detail: inv.Detail, Decisive: true}) {
				return false
			}
			continue
		}
		if owner := c.Meta.RecordedFor(); !slices.Contains(r.verdict.owners, owner) {
			r.verdict.owners = append(r.verdict.owners, owner)
		}
		uuid := c.Meta.SynthesisUUID
		if _, ok := r.groups[uuid]; !ok {
			r.order = append(r.order, uuid)
		}
		r.groups[uuid] = append(r.groups[uuid], c)
	}
	slices.SortFunc(r.verdict.owners, CompositionRef.Compare)
	return true
}

// agree is step 2: the chunks of one snapshot agree on their metadata.
func (r *reader) agree() bool {
	for _, uuid := range r.order {
		g := r.groups[uuid]
		for _, c := range g[1:] {
			if c.Meta != g[0].Meta {
				r.mixed[uuid] = true
				if !r.found(Finding{Step: 2, Reason: ReasonMixedMetadata, Snapshot: uuid, Secret: c.Secret.Name,
					Detail: fmt.Sprintf("disagrees with %s on %s", g[0].Secret.Name, metaDiff(g[0].Meta, c.Meta)), Decisive: true}) {
					return false
				}
			}
		}
	}
	return true
}

// choose is step 3: no candidate, or one of the reader's incarnation, stops; the newest is selected, a tie ambiguous.
func (r *reader) choose() bool {
	if len(r.order) == 0 {
		return true // every Secret was rejected: step 1 decided
	}
	r.candidates, r.own = candidatesFor(r.self, r.adoption, r.order, r.groups)
	if len(r.candidates) == 0 {
		r.verdict.otherNamespaces = namespacesOf(r.order, r.groups)
		return r.all
	}
	if r.self != nil {
		for _, uuid := range r.candidates {
			if m := r.groups[uuid][0].Meta; m.CompositionUID == r.self.UID {
				r.verdict.same = &m
				return r.all
			}
		}
	}
	r.newest = r.candidates[0]
	for _, uuid := range r.candidates[1:] {
		t, best := r.groups[uuid][0].Meta.SynthesisTime, r.groups[r.newest][0].Meta.SynthesisTime
		switch {
		case t.After(best):
			r.newest, r.tied = uuid, false
		case t.Equal(best):
			r.tied = true
		}
	}
	if r.tied {
		return r.found(Finding{Step: 3, Reason: ReasonAmbiguousTimestamp, Decisive: true,
			Detail: fmt.Sprintf("more than one snapshot has the newest source timestamp %s", r.groups[r.newest][0].Meta.SynthesisTime.Format(time.RFC3339))})
	}
	r.selected = r.newest
	return true
}

// candidatesFor returns the snapshots self may read from, in the order given: those recorded for
// self's namespace/name (own); when there is none, every one adoption permits self to take (a
// rename, or a move between namespaces when allowed). With no reader, every snapshot. None
// means the history is another namespace's.
func candidatesFor(self *Composition, adoption Adoption, order []string, groups map[string][]StoredChunk) (candidates []string, own bool) {
	if self == nil {
		return order, false
	}
	var adoptable []string
	for _, uuid := range order {
		m := groups[uuid][0].Meta
		if m.RecordedFor() == self.Ref() {
			candidates = append(candidates, uuid)
		}
		if adoption.Permits(self.Ref(), m.RecordedFor()) {
			adoptable = append(adoptable, uuid)
		}
	}
	if len(candidates) == 0 {
		return adoptable, false
	}
	return candidates, true
}

// judge is steps 4–5 on one snapshot, decisive only for the selected one; rd receives them.
func (r *reader) judge(uuid string, rd *SnapshotReading) {
	if rd == nil {
		rd = &SnapshotReading{}
	}
	decisive := uuid == r.selected
	g := r.groups[uuid]
	meta := g[0].Meta
	// Step 4: exactly the indexes 0..count-1, each once. Sized by the chunks present, not by
	// the claimed count, so a large count in an annotation cannot force a large allocation.
	byIndex := make(map[int]ChunkSecret, len(g))
	complete := !rd.MixedMetadata
	for _, c := range g {
		var detail, heldBy string
		if prev, dup := byIndex[c.Index]; dup {
			detail, heldBy = fmt.Sprintf("index %d is also held by %s", c.Index, prev.Name), prev.Name
		} else if c.Index >= meta.ChunkCount {
			detail = fmt.Sprintf("index %d is out of range for %d chunks", c.Index, meta.ChunkCount)
		}
		if detail != "" {
			complete = false
			if !r.found(Finding{Step: 4, Reason: ReasonMissingChunk, Snapshot: uuid, Secret: c.Secret.Name, Detail: detail,
				Index: c.Index, HeldBy: heldBy, Decisive: decisive}) {
				return
			}
			continue
		}
		byIndex[c.Index] = c.Secret
	}
	rd.Present = len(byIndex)
	if len(byIndex) != meta.ChunkCount {
		// Indexes are distinct and below count, so fewer than count means a gap.
		complete = false
		var missing []int
		for i := 0; i < meta.ChunkCount && len(missing) < listedMissing; i++ {
			if _, ok := byIndex[i]; !ok {
				missing = append(missing, i)
			}
		}
		if !r.found(Finding{Step: 4, Reason: ReasonMissingChunk, Snapshot: uuid, Decisive: decisive,
			Detail:  fmt.Sprintf("chunk %d of %d for synthesis %s is missing", missing[0], meta.ChunkCount, uuid),
			Missing: missing, MissingCount: meta.ChunkCount - len(byIndex)}) {
			return
		}
	}
	rd.Complete, rd.Digest = complete, DigestUnchecked
	if !complete {
		return
	}
	ordered := make([]ChunkSecret, meta.ChunkCount)
	for i, s := range byIndex {
		ordered[i] = s
	}
	// Step 5: every chunk decodes, and the canonical re-encoding matches the digest.
	rd.Digest = DigestUndecodable
	var entries []Entry
	for _, s := range ordered {
		chunk, err := DecodeEntries(s.Data[SecretDataKey])
		if err != nil {
			r.found(Finding{Step: 5, Reason: ReasonMalformed, Snapshot: uuid, Secret: s.Name, Detail: err.Error(), Decisive: decisive})
			return
		}
		entries = append(entries, chunk...)
	}
	inv, err := newInventory(entries)
	if err != nil {
		r.found(Finding{Step: 5, Reason: ReasonMalformed, Snapshot: uuid, Detail: err.Error(), Decisive: decisive})
		return
	}
	rd.Digest, rd.Computed, rd.Entries = DigestOK, inv.Digest(), inv.Len()
	if inv.Digest() != meta.Digest {
		rd.Digest = DigestMismatch
		r.found(Finding{Step: 5, Reason: ReasonDigestMismatch, Snapshot: uuid, Decisive: decisive,
			Detail: fmt.Sprintf("entries hash to %s, the chunks claim %s", inv.Digest(), meta.Digest)})
		return
	}
	if decisive {
		r.verdict.selected = Snapshot{meta: meta, chunks: ordered, inventory: inv}
	}
}

// byTime orders the snapshots newest first, ties by synthesis UUID.
func (r *reader) byTime() []string {
	out := slices.Clone(r.order)
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(r.groups[b][0].Meta.SynthesisTime.Compare(r.groups[a][0].Meta.SynthesisTime), strings.Compare(a, b))
	})
	return out
}

// history assembles what an all-findings read found.
func (r *reader) history() History {
	h := History{Findings: r.findings, OwnCandidates: r.own, Adoption: r.adoption, verdict: r.verdict}
	if h.Adoption != AdoptAcrossNamespaces {
		h.Adoption = AdoptWithinNamespace
	}
	_, verdictErr := h.Verdict()
	for _, uuid := range r.byTime() {
		rd := r.readings[uuid]
		g := slices.Clone(r.groups[uuid])
		slices.SortFunc(g, func(a, b StoredChunk) int {
			return cmp.Or(a.Index-b.Index, strings.Compare(a.Secret.Name, b.Secret.Name))
		})
		rd.Chunks = g
		for _, f := range r.findings {
			if f.Snapshot == uuid {
				rd.Findings = append(rd.Findings, f)
			}
		}
		rd.Role = r.role(uuid, verdictErr == nil)
		if rd.Candidate {
			h.Candidates = append(h.Candidates, uuid)
		}
		if ns := rd.Meta.CompositionNamespace; rd.Role == RoleOtherNamespace && !slices.Contains(h.OtherNamespaces, ns) {
			h.OtherNamespaces = append(h.OtherNamespaces, ns)
		}
		h.Snapshots = append(h.Snapshots, *rd)
	}
	slices.Sort(h.OtherNamespaces)
	return h
}

// role is what step 3 made of the snapshot; selects says the verdict is a selection.
func (r *reader) role(uuid string, selects bool) SnapshotRole {
	meta := r.groups[uuid][0].Meta
	switch {
	case !slices.Contains(r.candidates, uuid) && !r.own && !r.adoption.Permits(r.self.Ref(), meta.RecordedFor()):
		return RoleOtherNamespace
	case !slices.Contains(r.candidates, uuid):
		return RoleNotCandidate
	case r.verdict.same != nil && r.verdict.same.SynthesisUUID == uuid:
		return RoleSameIncarnation
	case selects && uuid == r.selected:
		return RoleSelected
	case r.newest != "" && meta.SynthesisTime.Equal(r.groups[r.newest][0].Meta.SynthesisTime):
		if r.tied {
			return RoleNewestTied
		}
		return RoleNewest
	}
	return RoleOlder
}

// metaDiff names the fields on which two chunks of one snapshot disagree, with both values.
func metaDiff(a, b SnapshotMeta) string {
	var out []string
	add := func(differs bool, field string, x, y any) {
		if differs {
			out = append(out, fmt.Sprintf("%s (%v vs %v)", field, x, y))
		}
	}
	add(a.CompositionNamespace != b.CompositionNamespace || a.CompositionName != b.CompositionName, "composition",
		a.CompositionNamespace+"/"+a.CompositionName, b.CompositionNamespace+"/"+b.CompositionName)
	add(a.CompositionUID != b.CompositionUID, "composition UID", a.CompositionUID, b.CompositionUID)
	add(!a.SynthesisTime.Equal(b.SynthesisTime), "timestamp", a.SynthesisTime.Format(time.RFC3339), b.SynthesisTime.Format(time.RFC3339))
	add(a.ChunkCount != b.ChunkCount, "chunk count", a.ChunkCount, b.ChunkCount)
	add(a.Digest != b.Digest, "digest", a.Digest, b.Digest)
	add(a.Lineage != b.Lineage, "lineage", a.Lineage, b.Lineage)
	add(a.ControlPlane != b.ControlPlane, "control plane", a.ControlPlane, b.ControlPlane)
	return strings.Join(out, ", ")
}
