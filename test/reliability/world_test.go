package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory"
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

// world is one in-memory cluster plus what the scenarios need to drive it: a synthesis
// counter standing in for Eno's synthesizer, the controllers' configuration and an audit of
// every write the controllers made.
type world struct {
	t       *testing.T
	cluster *memory.Cluster
	cfg     app.Config
	audit   *audit
	synths  atomic.Int64
	// yield makes every audited read and write yield the processor first, so that racing
	// instances interleave inside a pass rather than between passes.
	yield bool
}

func newWorld(t *testing.T, maxChunkBytes int, maxTombstoneFraction float64) *world {
	cfg := app.DefaultConfig()
	cfg.Enabled = true
	cfg.MaxChunkBytes = maxChunkBytes
	cfg.MaxTombstoneFraction = maxTombstoneFraction
	cfg.Now = func() time.Time { return now }
	return &world{t: t, cluster: memory.NewCluster(inventoryNamespace), cfg: cfg, audit: &audit{}}
}

// service is one controller instance over the shared cluster, its writes audited.
func (w *world) service() *app.Service {
	w.t.Helper()
	svc, err := app.New(w.cfg, app.Deps{
		Compositions: w.cluster,
		Guard:        w.cluster,
		Slices:       w.cluster,
		Store:        &auditedStore{SnapshotStore: w.cluster, cluster: w.cluster, audit: w.audit, read: map[string]string{}, yield: w.yield},
		Sink:         &auditedSink{TombstoneSink: w.cluster, audit: w.audit, yield: w.yield},
		Decisions:    &auditedDecisions{DecisionWriter: w.cluster, audit: w.audit, yield: w.yield},
		Events:       w.cluster,
	})
	require.NoError(w.t, err)
	return svc
}

// publish stands in for Eno's synthesizer: it stores the slices of a new synthesis producing
// ConfigMaps of the given names, split over two slices, and returns the Composition's new
// status.currentSynthesis. Each synthesis finishes one second after the previous one.
func (w *world) publish(ref domain.CompositionRef, ready bool, names ...string) *domain.Synthesis {
	n := w.synths.Add(1)
	uuid := fmt.Sprintf("%08x-5eed-4000-8000-%012d", n, n)
	syn := &domain.Synthesis{UUID: uuid, Synthesized: synthBase.Add(time.Duration(n) * time.Second), Ready: ready}
	half := (len(names) + 1) / 2
	for i, group := range [][]string{names[:half], names[half:]} {
		s := domain.ResourceSlice{Namespace: ref.Namespace, Name: fmt.Sprintf("%s-%s-%d", ref.Name, uuid[:8], i), SynthesisUUID: uuid}
		for _, name := range group {
			s.Resources = append(s.Resources, domain.SliceResource{Manifest: configMap(ref.Namespace, name)})
		}
		w.cluster.PutSlice(s)
		syn.Slices = append(syn.Slices, s.Name)
	}
	return syn
}

// create makes a new incarnation (fresh UID) of ref, opted in, with a new synthesis.
func (w *world) create(ref domain.CompositionRef, ready bool, names ...string) domain.Composition {
	comp := domain.Composition{Namespace: ref.Namespace, Name: ref.Name,
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue}}
	comp.Synthesis = w.publish(ref, ready, names...)
	return w.cluster.PutComposition(comp)
}

// recreate deletes ref with an orphaning strategy and creates it again with a new synthesis.
func (w *world) recreate(ref domain.CompositionRef, ready bool, names ...string) domain.Composition {
	if err := w.cluster.DeleteComposition(ref); err != nil && !errors.Is(err, ports.ErrNotFound) {
		panic(err) // only the admin helper's own bookkeeping can fail here
	}
	return w.create(ref, ready, names...)
}

// resynthesize gives the existing incarnation of ref a new current synthesis, as Eno's status
// update would: a read-modify-write retried on conflict, keeping every annotation.
func (w *world) resynthesize(ref domain.CompositionRef, ready bool, names ...string) (domain.Composition, error) {
	syn := w.publish(ref, ready, names...)
	for range 1000 {
		cur, err := w.cluster.LiveComposition(context.Background(), ref)
		if err != nil {
			return domain.Composition{}, err
		}
		cur.Synthesis = syn
		out, err := w.cluster.UpdateComposition(cur)
		if errors.Is(err, ports.ErrConflict) {
			continue
		}
		return out, err
	}
	return domain.Composition{}, fmt.Errorf("resynthesizing %s: still conflicting after 1000 attempts", ref)
}

// live reads ref from the cluster.
func (w *world) live(ref domain.CompositionRef) domain.Composition {
	w.t.Helper()
	comp, err := w.cluster.LiveComposition(context.Background(), ref)
	require.NoError(w.t, err)
	return comp
}

// readSnapshot applies SPEC §5 to what the cluster holds for the lineage.
func (w *world) readSnapshot(lineage domain.Lineage) (domain.Snapshot, error) {
	w.t.Helper()
	secrets, err := w.cluster.ListChunks(context.Background(), lineage)
	require.NoError(w.t, err)
	return domain.ReadSnapshot(secrets, now, w.cfg.MaxChunks)
}

// recoverySlices lists the slices the sink published (the only slices with an owner).
func (w *world) recoverySlices() []domain.ResourceSlice {
	var out []domain.ResourceSlice
	for _, s := range w.cluster.Slices("") {
		if w.cluster.SliceOwner(s.Namespace, s.Name) != "" {
			out = append(out, s)
		}
	}
	return out
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
}

type decisionRecord struct {
	UID      string
	Decision domain.Decision
}

type publishRecord struct {
	UID, SynthesisUUID, Slice string
	Tombstones                int
}

// writes counts the successful writes so far; a pass that changes it was not idle.
func (a *audit) writes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.creates + a.updates + len(a.decisions) + len(a.publishes)
}

// report copies what was audited so far.
func (a *audit) report() audit {
	a.mu.Lock()
	defer a.mu.Unlock()
	return audit{
		unguarded: slices.Clone(a.unguarded), creates: a.creates, updates: a.updates,
		chunkConflicts: a.chunkConflicts, alreadyExists: a.alreadyExists,
		decisions: slices.Clone(a.decisions), decisionConflicts: a.decisionConflicts,
		publishes: slices.Clone(a.publishes),
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

// auditedStore is one controller instance's view of the SnapshotStore. It remembers the
// resourceVersion of every Secret the instance last listed live, and flags an update that
// does not carry it: SPEC §4 replaces a Secret only under the resourceVersion it read. It
// also flags a stale update the store accepted: resourceVersions only grow, so one that
// differed from the stored version before the call must come back as a conflict.
type auditedStore struct {
	ports.SnapshotStore
	cluster *memory.Cluster
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

func (s *auditedSink) PublishTombstones(ctx context.Context, comp domain.Composition, h domain.Handoff) (string, error) {
	maybeYield(s.yield)
	where, err := s.TombstoneSink.PublishTombstones(ctx, comp, h)
	if err == nil {
		s.audit.mu.Lock()
		s.audit.publishes = append(s.audit.publishes, publishRecord{UID: comp.UID, SynthesisUUID: comp.SynthesisUUID(), Slice: where, Tombstones: len(h.Resources)})
		s.audit.mu.Unlock()
	}
	return where, err
}
