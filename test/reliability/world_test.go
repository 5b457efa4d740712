package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const inventoryNamespace = domain.DefaultInventoryNamespace

var (
	// now is every controller's clock; syntheses finish before it, one second apart.
	now       = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	synthBase = now.Add(-2 * time.Hour)
)

// world is one in-memory cluster with Eno on it plus what the scenarios need to drive it: the
// controllers' configuration, an audit of every write the controllers made, and a check of
// every object Eno deleted downstream.
type world struct {
	t       *testing.T
	cluster *cluster
	cfg     app.Config
	audit   *audit
	// yield makes every audited read and write yield the processor first, so that racing
	// instances interleave inside a pass rather than between passes.
	yield bool

	mu sync.Mutex
	// last is the newest synthesis Eno made for each Composition, its output and every
	// resource any of its syntheses ever produced.
	last           map[domain.CompositionRef]string
	output         map[domain.CompositionRef][]domain.ResourceID
	ever           map[domain.CompositionRef]map[domain.ResourceID]bool
	deleted        []string // every downstream object Eno deleted, as "<composition> <id>"
	wrongDeletions []string // deletions of an object some Composition still produces, or never produced
}

// worldSliceBytes spreads a synthesis over several slices, 3 resources each, as Eno does for
// large ones.
var worldSliceBytes = len(configMap("team-a", "name")) * 5 / 2

func newWorld(t *testing.T, maxChunkBytes int, maxTombstoneFraction float64) *world {
	cfg := app.DefaultConfig()
	cfg.Enabled, cfg.ControlPlane = true, "reliability"
	cfg.MaxChunkBytes = maxChunkBytes
	cfg.MaxTombstoneFraction = maxTombstoneFraction
	cfg.Now = func() time.Time { return now }
	// Each synthesis finishes one second after the previous one, all before the controllers' clock.
	c := newCluster()
	c.env.Eno.SliceBytes = worldSliceBytes
	return &world{t: t, cluster: c, cfg: cfg, audit: &audit{},
		last: map[domain.CompositionRef]string{}, output: map[domain.CompositionRef][]domain.ResourceID{},
		ever: map[domain.CompositionRef]map[domain.ResourceID]bool{}}
}

// service is one controller instance over the shared cluster, its writes audited; each
// option may replace a dependency, to intercept it.
func (w *world) service(options ...func(*app.Deps)) *app.Service {
	w.t.Helper()
	c := w.cluster
	deps := app.Deps{
		Compositions: c.comps,
		Live:         c.comps,
		Slices:       c.slices,
		Fleet:        c.env.Fleet(),
		Store:        &auditedStore{SnapshotStore: c.store, cluster: c, audit: w.audit, read: map[string]string{}, yield: w.yield},
		Sink:         &auditedSink{TombstoneSink: c.sink, audit: w.audit, yield: w.yield},
		Decisions:    &auditedDecisions{DecisionWriter: c.comps, audit: w.audit, yield: w.yield},
		Downstream:   c.downstream,
		Events:       &c.EventLog,
	}
	for _, o := range options {
		o(&deps)
	}
	svc, err := app.New(w.cfg, deps)
	require.NoError(w.t, err)
	return svc
}

// synthesize lets Eno synthesize ref producing ConfigMaps of the given names, and, when ready,
// reconcile that synthesis downstream (which makes it Ready).
func (w *world) synthesize(ref domain.CompositionRef, ready bool, names ...string) (domain.Composition, error) {
	outputs := make([]*unstructured.Unstructured, len(names))
	ids := make([]domain.ResourceID, len(names))
	for i, n := range names {
		outputs[i] = &unstructured.Unstructured{}
		if err := outputs[i].UnmarshalJSON([]byte(configMap(ref.Namespace, n))); err != nil {
			return domain.Composition{}, err
		}
		ids[i] = domain.ResourceID{Kind: "ConfigMap", Namespace: ref.Namespace, Name: n}
	}
	w.cluster.eno.Lock()
	w.cluster.syntheses.Add(1)
	err := w.cluster.env.Synthesize(context.Background(), ref, outputs...)
	w.cluster.eno.Unlock()
	if err != nil {
		return domain.Composition{}, err
	}
	comp, err := w.cluster.LiveComposition(context.Background(), ref)
	if err != nil {
		return domain.Composition{}, err
	}
	w.mu.Lock()
	w.last[ref], w.output[ref] = comp.SynthesisUUID(), ids
	if w.ever[ref] == nil {
		w.ever[ref] = map[domain.ResourceID]bool{}
	}
	for _, id := range ids {
		w.ever[ref][id] = true
	}
	w.mu.Unlock()
	if !ready {
		return comp, nil
	}
	return w.enoReconcile(ref)
}

// enoReconcile lets eno-reconciler apply ref's current synthesis, and checks what it deleted:
// only objects that ref's syntheses once produced and that no Composition produces now.
func (w *world) enoReconcile(ref domain.CompositionRef) (domain.Composition, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	before := w.cluster.DownstreamObjects()
	w.cluster.eno.Lock()
	err := w.cluster.env.Reconcile(context.Background(), ref)
	w.cluster.eno.Unlock()
	if err != nil {
		return domain.Composition{}, err
	}
	comp, err := w.cluster.LiveComposition(context.Background(), ref)
	if err != nil {
		return domain.Composition{}, err
	}
	after := w.cluster.DownstreamObjects()
	for _, id := range minusIDs(before, after) {
		w.deleted = append(w.deleted, ref.String()+" "+id.String())
		produced := false
		for _, out := range w.output {
			produced = produced || slices.Contains(out, id)
		}
		if produced || !w.ever[ref][id] {
			w.wrongDeletions = append(w.wrongDeletions, fmt.Sprintf("%s: Eno deleted %s (still produced: %t, ever produced by it: %t)", ref, id, produced, w.ever[ref][id]))
		}
	}
	return comp, nil
}

// enoFollows is Eno acting on the force-resynthesis annotation: a new synthesis with the same
// output (carrying the tombstones handed to it), reconciled downstream. It reports whether
// Eno did anything.
func (w *world) enoFollows(ref domain.CompositionRef) (bool, error) {
	w.cluster.eno.Lock()
	w.cluster.syntheses.Add(1)
	did, err := w.cluster.env.Follow(context.Background(), ref)
	w.cluster.eno.Unlock()
	if err != nil || !did {
		return false, err
	}
	comp, err := w.cluster.LiveComposition(context.Background(), ref)
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	w.last[ref] = comp.SynthesisUUID()
	w.mu.Unlock()
	_, err = w.enoReconcile(ref)
	return true, err
}

// enoSliceStatus is Eno's slice status controller looking at ref's current synthesis once.
func (w *world) enoSliceStatus(ref domain.CompositionRef) {
	w.cluster.eno.Lock()
	defer w.cluster.eno.Unlock()
	_, err := w.cluster.env.Eno.SliceStatus(context.Background(), ref.Namespace, ref.Name)
	require.NoError(w.t, err)
}

// enoFollowsOnly is enoFollows without the reconcile: the carrying synthesis is not Ready yet.
func (w *world) enoFollowsOnly(ref domain.CompositionRef) (bool, error) {
	w.cluster.eno.Lock()
	defer w.cluster.eno.Unlock()
	w.cluster.syntheses.Add(1)
	return w.cluster.env.Follow(context.Background(), ref)
}

// settle runs controller passes and Eno's reactions to them until a round changes nothing:
// the hand-off of design §6.2 carried through to the recording of Eno's next synthesis.
func (w *world) settle(ctx context.Context, svc *app.Service, refs ...domain.CompositionRef) {
	w.t.Helper()
	for range 10 {
		before, eno := w.audit.writes(), false
		for _, ref := range refs {
			_, err := svc.Reconcile(ctx, ref)
			require.NoError(w.t, err)
			did, err := w.enoFollows(ref)
			require.NoError(w.t, err)
			eno = eno || did
		}
		if !eno && w.audit.writes() == before {
			return
		}
	}
	w.t.Fatalf("%v did not settle within 10 rounds", refs)
}

// lastSynthesis is the newest synthesis Eno made for ref.
func (w *world) lastSynthesis(ref domain.CompositionRef) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[ref]
}

// deletedObjects lists every downstream object Eno deleted, as "<composition> <id>".
func (w *world) deletedObjects() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.deleted)
}

// badDeletions lists every deletion by Eno of an object that was not an orphan.
func (w *world) badDeletions() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.wrongDeletions)
}

// create makes a new incarnation (fresh UID) of ref, opted in, with a new synthesis.
func (w *world) create(ref domain.CompositionRef, ready bool, names ...string) domain.Composition {
	w.cluster.PutComposition(domain.Composition{Namespace: ref.Namespace, Name: ref.Name,
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue}})
	comp, err := w.synthesize(ref, ready, names...)
	if err != nil {
		panic(err) // the Composition was just stored; only the model's own bookkeeping can fail here
	}
	return comp
}

// recreate deletes ref with an orphaning strategy and creates it again with a new synthesis.
func (w *world) recreate(ref domain.CompositionRef, ready bool, names ...string) domain.Composition {
	if err := w.cluster.DeleteComposition(ref); err != nil && !errors.Is(err, ports.ErrNotFound) {
		panic(err) // only the admin helper's own bookkeeping can fail here
	}
	return w.create(ref, ready, names...)
}

// resynthesize gives the existing incarnation of ref a new current synthesis, keeping every
// annotation, as Eno does.
func (w *world) resynthesize(ref domain.CompositionRef, ready bool, names ...string) (domain.Composition, error) {
	return w.synthesize(ref, ready, names...)
}

// live reads ref from the cluster.
func (w *world) live(ref domain.CompositionRef) domain.Composition {
	w.t.Helper()
	comp, err := w.cluster.LiveComposition(context.Background(), ref)
	require.NoError(w.t, err)
	return comp
}

// readSnapshot applies design §5 to what the cluster holds for the lineage.
func (w *world) readSnapshot(lineage domain.Lineage) (domain.Snapshot, error) {
	w.t.Helper()
	secrets, err := w.cluster.ListChunks(context.Background(), lineage)
	require.NoError(w.t, err)
	return domain.ReadHistory(secrets, now, w.cfg.MaxChunks).Verdict()
}

// recoverySlices lists the slices the sink published: they carry the hand-off's decision,
// which Eno's own slices never do.
func (w *world) recoverySlices() []domain.ResourceSlice {
	var out []domain.ResourceSlice
	for _, s := range w.cluster.Slices("") {
		if _, ok := s.Annotations[domain.AnnotationDecision]; ok {
			out = append(out, s)
		}
	}
	return out
}

// downstream lists the downstream objects of a namespace, as tombstoneIDs reports them, sorted.
func (w *world) downstream(namespace string) []string {
	var out []string
	for _, id := range w.cluster.DownstreamObjects() {
		if id.Namespace == namespace {
			out = append(out, id.String())
		}
	}
	sort.Strings(out)
	return out
}

func minusIDs(a, b []domain.ResourceID) []domain.ResourceID {
	return slices.DeleteFunc(slices.Clone(a), func(id domain.ResourceID) bool { return slices.Contains(b, id) })
}

func configMap(namespace, name string) string {
	b, err := json.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name": name, "namespace": namespace,
			"labels":      map[string]string{"app": "web"},
			"annotations": map[string]string{domain.AnnotationDeletionGroup: "1", "unrelated": "kept out of inventories"},
		},
		"data": map[string]string{"key": "value"},
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// cmIDs names ConfigMaps of a namespace the way tombstoneIDs reports them, sorted.
func cmIDs(namespace string, names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = domain.ResourceID{Kind: "ConfigMap", Namespace: namespace, Name: n}.String()
	}
	sort.Strings(out)
	return out
}

// tombstoneIDs parses the identities out of a recovery slice; every entry must be a tombstone.
func tombstoneIDs(t *testing.T, s domain.ResourceSlice) []string {
	t.Helper()
	out := make([]string, 0, len(s.Resources))
	for _, r := range s.Resources {
		require.True(t, r.Deleted, "recovery slice %s holds a resource that is not a tombstone", s.Name)
		var m struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Manifest), &m))
		group := ""
		if i := strings.LastIndex(m.APIVersion, "/"); i >= 0 {
			group = m.APIVersion[:i]
		}
		out = append(out, domain.ResourceID{Group: group, Kind: m.Kind, Namespace: m.Metadata.Namespace, Name: m.Metadata.Name}.String())
	}
	sort.Strings(out)
	return out
}

// minus is a without the names in b.
func minus(a, b []string) []string {
	return slices.DeleteFunc(slices.Clone(a), func(n string) bool { return slices.Contains(b, n) })
}

// audit is every write the controllers made through the ports, successful or refused.
type audit struct {
	mu sync.Mutex
	// unguarded lists Secret updates that did not carry the resourceVersion the instance read.
	unguarded         []string
	creates, updates  int
	chunkConflicts    int
	alreadyExists     int
	decisions         []decisionRecord
	decisionConflicts int
	publishes         []publishRecord
	commits           []publishRecord
	resyntheses       int
	// recorded lists every (composition UID, source synthesis UUID) a chunk was written for.
	recorded map[[2]string]bool
}

type decisionRecord struct {
	UID      string
	Decision domain.Decision
}

// publishRecord is one accepted publication or commit; Slice is its first recovery slice, the
// one a decision names.
type publishRecord struct {
	Ref                       domain.CompositionRef
	UID, SynthesisUUID, Slice string
	Tombstones                int
}

// writes counts the successful writes so far; a pass that changes it was not idle.
func (a *audit) writes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.creates + a.updates + len(a.decisions) + len(a.publishes) + len(a.commits) + a.resyntheses
}

// report copies what was audited so far.
func (a *audit) report() audit {
	a.mu.Lock()
	defer a.mu.Unlock()
	return audit{
		unguarded: slices.Clone(a.unguarded), creates: a.creates, updates: a.updates,
		chunkConflicts: a.chunkConflicts, alreadyExists: a.alreadyExists,
		decisions: slices.Clone(a.decisions), decisionConflicts: a.decisionConflicts,
		publishes: slices.Clone(a.publishes), commits: slices.Clone(a.commits), resyntheses: a.resyntheses,
		recorded: maps.Clone(a.recorded),
	}
}

// finishedDecisions counts the finished decisions written per (composition UID, synthesis UUID).
func (a *audit) finishedDecisions() map[[2]string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[[2]string]int{}
	for _, d := range a.decisions {
		if d.Decision.Outcome.Finished() {
			out[[2]string{d.UID, d.Decision.SynthesisUUID}]++
		}
	}
	return out
}

// recordedRecovered lists every synthesis decided Recovered that a snapshot chunk was written
// for: none may be (design §4: a synthesis decided Recovered is never recorded).
func (a *audit) recordedRecovered() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, d := range a.decisions {
		key := [2]string{d.UID, d.Decision.SynthesisUUID}
		if d.Decision.Outcome == domain.OutcomeRecovered && a.recorded[key] {
			out = append(out, fmt.Sprintf("composition %s synthesis %s", key[0], key[1]))
		}
	}
	return out
}

func (a *audit) noteRecorded(c domain.ChunkSecret) {
	if a.recorded == nil {
		a.recorded = map[[2]string]bool{}
	}
	a.recorded[[2]string{c.Annotations[domain.AnnotationCompositionUID], c.Annotations[domain.AnnotationSourceSynthesisUUID]}] = true
}

// auditedStore is one controller instance's view of the SnapshotStore. It remembers the
// resourceVersion of every Secret the instance last listed live, and flags an update that
// does not carry it: design §4 replaces a Secret only under the resourceVersion it read. It
// also flags a stale update the store accepted: resourceVersions only grow, so one that
// differed from the stored version before the call must come back as a conflict.
type auditedStore struct {
	ports.SnapshotStore
	cluster *cluster
	audit   *audit
	yield   bool
	mu      sync.Mutex
	read    map[string]string
}

func maybeYield(yield bool) {
	if yield {
		runtime.Gosched()
	}
}

func (s *auditedStore) ListChunks(ctx context.Context, lineage domain.Lineage) ([]domain.ChunkSecret, error) {
	maybeYield(s.yield)
	out, err := s.SnapshotStore.ListChunks(ctx, lineage)
	if err == nil {
		s.mu.Lock()
		for _, c := range out {
			s.read[c.Name] = c.ResourceVersion
		}
		s.mu.Unlock()
	}
	return out, err
}

func (s *auditedStore) UpdateChunk(ctx context.Context, c domain.ChunkSecret) (domain.ChunkSecret, error) {
	s.mu.Lock()
	read, ok := s.read[c.Name]
	s.mu.Unlock()
	if !ok || c.ResourceVersion == "" || c.ResourceVersion != read {
		s.audit.mu.Lock()
		s.audit.unguarded = append(s.audit.unguarded,
			fmt.Sprintf("update of %s at resourceVersion %q, last read %q (read: %t)", c.Name, c.ResourceVersion, read, ok))
		s.audit.mu.Unlock()
	}
	maybeYield(s.yield)
	cur, peekErr := s.cluster.GetSecret(c.Namespace, c.Name)
	stale := peekErr == nil && cur.ResourceVersion != c.ResourceVersion
	out, err := s.SnapshotStore.UpdateChunk(ctx, c)
	s.audit.mu.Lock()
	defer s.audit.mu.Unlock()
	if err == nil {
		s.audit.noteRecorded(c)
	}
	switch {
	case err == nil && stale:
		s.audit.unguarded = append(s.audit.unguarded,
			fmt.Sprintf("update of %s at resourceVersion %q accepted although %q was stored", c.Name, c.ResourceVersion, cur.ResourceVersion))
	case err == nil:
		s.audit.updates++
	case errors.Is(err, ports.ErrConflict):
		s.audit.chunkConflicts++
	}
	return out, err
}

func (s *auditedStore) CreateChunk(ctx context.Context, c domain.ChunkSecret) (domain.ChunkSecret, error) {
	maybeYield(s.yield)
	out, err := s.SnapshotStore.CreateChunk(ctx, c)
	s.audit.mu.Lock()
	defer s.audit.mu.Unlock()
	switch {
	case err == nil:
		s.audit.creates++
		s.audit.noteRecorded(c)
	case errors.Is(err, ports.ErrAlreadyExists):
		s.audit.alreadyExists++
	}
	return out, err
}

// auditedDecisions records every decision the cluster accepted.
type auditedDecisions struct {
	ports.DecisionWriter
	audit *audit
	yield bool
}

func (d *auditedDecisions) WriteDecision(ctx context.Context, comp domain.Composition, dec domain.Decision) error {
	maybeYield(d.yield)
	err := d.DecisionWriter.WriteDecision(ctx, comp, dec)
	d.audit.mu.Lock()
	defer d.audit.mu.Unlock()
	switch {
	case err == nil:
		d.audit.decisions = append(d.audit.decisions, decisionRecord{UID: comp.UID, Decision: dec})
	case errors.Is(err, ports.ErrConflict):
		d.audit.decisionConflicts++
	}
	return err
}

// auditedSink records every publication the cluster accepted.
type auditedSink struct {
	ports.TombstoneSink
	audit *audit
	yield bool
}

func (s *auditedSink) CreateRecoverySlice(ctx context.Context, comp domain.Composition, h domain.Handoff, part int) (string, error) {
	maybeYield(s.yield)
	name, err := s.TombstoneSink.CreateRecoverySlice(ctx, comp, h, part)
	if err == nil {
		parts, _ := h.Parts()
		s.audit.mu.Lock()
		s.audit.publishes = append(s.audit.publishes, publishRecord{Ref: comp.Ref(), UID: comp.UID, SynthesisUUID: comp.SynthesisUUID(), Slice: name, Tombstones: len(parts[part])})
		s.audit.mu.Unlock()
	}
	return name, err
}

// AppendRecoverySlice records the naming of a hand-off's first slice as its commit.
func (s *auditedSink) AppendRecoverySlice(ctx context.Context, comp domain.Composition, slice string) (domain.Composition, error) {
	maybeYield(s.yield)
	out, err := s.TombstoneSink.AppendRecoverySlice(ctx, comp, slice)
	if err == nil && out.NamedRecoverySlices()[0] == slice {
		s.audit.mu.Lock()
		s.audit.commits = append(s.audit.commits, publishRecord{Ref: comp.Ref(), UID: comp.UID, SynthesisUUID: comp.SynthesisUUID(), Slice: slice})
		s.audit.mu.Unlock()
	}
	return out, err
}

func (s *auditedSink) RequestResynthesis(ctx context.Context, comp domain.Composition) error {
	maybeYield(s.yield)
	err := s.TombstoneSink.RequestResynthesis(ctx, comp)
	if err == nil {
		s.audit.mu.Lock()
		s.audit.resyntheses++
		s.audit.mu.Unlock()
	}
	return err
}

// handoffBook counts the hand-offs of a run by how they ended.
type handoffBook struct {
	// decided: committed, then decided Recovered. superseded: committed, then the synthesis
	// moved on before step 3, which found it stale and wrote nothing. uncommitted: published,
	// then the synthesis moved on before the commit point.
	decided, superseded, uncommitted int
}

// checkHandoffs asserts the bookkeeping of design §6.2 over every hand-off of a run:
//   - a committed recovery slice has exactly one decision for its synthesis, Recovered, naming
//     it and counting its tombstones; or none at all when its synthesis was superseded between
//     the commit point and step 3. Never another outcome: past the commit point nothing plans
//     that synthesis again;
//   - a recovery slice that was published but never committed is named by no synthesis, so it
//     reaches nothing downstream (eno-controller's slice cleanup removes it);
//   - every Recovered decision names the slice committed for its synthesis.
func (w *world) checkHandoffs(a *audit) handoffBook {
	t := w.t
	t.Helper()
	var book handoffBook
	committed := map[[2]string]publishRecord{}
	for _, c := range a.commits {
		key := [2]string{c.UID, c.SynthesisUUID}
		if prev, ok := committed[key]; ok {
			assert.Equal(t, prev.Slice, c.Slice, "synthesis %s: one recovery slice is committed, however many passes commit it", c.SynthesisUUID)
		}
		committed[key] = c
	}
	for key, c := range committed {
		var recovered []domain.Decision
		for _, r := range a.decisions {
			if r.UID != key[0] || r.Decision.SynthesisUUID != key[1] {
				continue
			}
			assert.Equal(t, domain.OutcomeRecovered, r.Decision.Outcome, "%s: synthesis %s has committed recovery slice %s, yet was decided %s/%s: %s",
				c.Ref, c.SynthesisUUID, c.Slice, r.Decision.Outcome, r.Decision.Reason, r.Decision.Message)
			if r.Decision.Outcome == domain.OutcomeRecovered {
				recovered = append(recovered, r.Decision)
			}
		}
		switch len(recovered) {
		case 0:
			live, err := w.cluster.LiveComposition(context.Background(), c.Ref)
			if err == nil {
				assert.False(t, live.UID == c.UID && live.SynthesisUUID() == c.SynthesisUUID,
					"%s: committed recovery slice %s of the live synthesis %s has no decision", c.Ref, c.Slice, c.SynthesisUUID)
			}
			book.superseded++
		case 1:
			assert.Equal(t, c.Slice, recovered[0].TombstoneSlice)
			for _, s := range w.cluster.Slices(c.Ref.Namespace) {
				if s.Name == c.Slice {
					assert.Len(t, s.Resources, recovered[0].Tombstones, "slice %s holds what its decision counted", s.Name)
				}
			}
			book.decided++
		default:
			assert.Fail(t, "duplicate decisions", "%s: synthesis %s was decided Recovered %d times", c.Ref, c.SynthesisUUID, len(recovered))
		}
	}
	for _, s := range w.recoverySlices() {
		owner := w.cluster.SliceOwner(s.Namespace, s.Name)
		if _, ok := committed[[2]string{owner, s.SynthesisUUID}]; ok {
			continue
		}
		book.uncommitted++
		for _, p := range a.publishes {
			if p.Slice != s.Name || p.UID != owner {
				continue
			}
			if live, err := w.cluster.LiveComposition(context.Background(), p.Ref); err == nil && live.UID == owner {
				assert.False(t, live.NamesSlice(s.Name), "%s: uncommitted recovery slice %s is named by its synthesis", p.Ref, s.Name)
			}
		}
	}
	for _, r := range a.decisions {
		if r.Decision.Outcome != domain.OutcomeRecovered {
			continue
		}
		c, ok := committed[[2]string{r.UID, r.Decision.SynthesisUUID}]
		if assert.True(t, ok, "Recovered decision for synthesis %s has no committed recovery slice", r.Decision.SynthesisUUID) {
			assert.Equal(t, c.Slice, r.Decision.TombstoneSlice)
		}
	}
	return book
}
