package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
	"github.com/Azure/eno-tombstone-recovery/ports/portsfakes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errNotFound = ports.ErrNotFound

// testUID is the UID of every object the tests observe present.
const testUID = "0f1e2d3c-0000-4000-8000-000000000001"

var (
	now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	// historyWritten is when the downstream API server stored the fixtures' snapshots.
	historyWritten = now.Add(-30 * time.Minute)
	synthTime      = now.Add(-time.Hour)
	oldTime        = now.Add(-48 * time.Hour)
)

const (
	ns       = "team-a"
	name     = "web"
	uid      = "uid-new"
	oldUID   = "uid-old"
	synthID  = "11111111-aaaa-bbbb-cccc-000000000001"
	oldSynth = "22222222-aaaa-bbbb-cccc-000000000002"
	// chunkLimit makes the default fixture's 9 resources span 3 chunks.
	chunkLimit = 500
)

// res describes a manifest in a slice.
type res struct {
	apiVersion, kind, namespace, name string
	deleted                           bool
	patchTarget                       [2]string // apiVersion, kind for Patches
}

func cm(n string) res { return res{apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: n} }

func manifest(r res) string {
	m := map[string]any{
		"apiVersion": r.apiVersion,
		"kind":       r.kind,
		"metadata": map[string]any{
			"name": r.name, "namespace": r.namespace,
			"labels":      map[string]string{"app": "web", "component": r.name},
			"annotations": map[string]string{domain.AnnotationDeletionGroup: "1", "unrelated": "x"},
		},
	}
	if r.patchTarget[0] != "" {
		m["patch"] = map[string]any{"apiVersion": r.patchTarget[0], "kind": r.patchTarget[1], "ops": []any{}}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// resources returns n ConfigMaps named cm-00.. in order.
func resources(n int) []res {
	out := make([]res, n)
	for i := range out {
		out[i] = cm(fmt.Sprintf("cm-%02d", i))
	}
	return out
}

// slicesOf is a synthesis's slices as stock Eno writes them: stamp is their spec.synthesisUUID,
// the synthesis current when the executor wrote them, "" on a first synthesis and the previous
// synthesis's UUID after that (design §2); membership comes from the Composition's resourceSlices
// alone, never from the stamp.
func slicesOf(stamp string, rs ...[]res) []domain.ResourceSlice {
	out := make([]domain.ResourceSlice, len(rs))
	for i, group := range rs {
		s := domain.ResourceSlice{Namespace: ns, Name: fmt.Sprintf("web-slice-%d", i), SynthesisUUID: stamp}
		for _, r := range group {
			s.Resources = append(s.Resources, domain.SliceResource{Manifest: manifest(r), Deleted: r.deleted})
		}
		out[i] = s
	}
	return out
}

func composition(uid, uuid string, slices []domain.ResourceSlice, decided bool) domain.Composition {
	c := domain.Composition{
		Namespace: ns, Name: name, UID: uid, ResourceVersion: "10",
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue},
		Synthesis:   &domain.Synthesis{UUID: uuid, Synthesized: synthTime, Ready: true},
	}
	for _, s := range slices {
		c.Synthesis.Slices = append(c.Synthesis.Slices, s.Name)
	}
	if decided {
		c.Annotations[domain.AnnotationDecision] = domain.Decision{SynthesisUUID: uuid, Outcome: domain.OutcomeNoInventory, DecidedAt: now}.Encode()
	}
	return c
}

// snapshotSecrets is what recording comp with these resources stores, as the store lists them.
// thisControlPlane runs the service under test; otherControlPlane shares its downstream cluster.
const thisControlPlane, otherControlPlane = "cp-this", "cp-other"

func snapshotSecrets(t *testing.T, compUID, uuid string, ts time.Time, limit int, rs []res) []domain.ChunkSecret {
	t.Helper()
	c := composition(compUID, uuid, slicesOf("", rs), false)
	c.Synthesis.Synthesized = ts
	contents, err := domain.ReadSynthesis(c, slicesOf("", rs))
	require.NoError(t, err)
	chunks, err := domain.SplitInventory(contents.Inventory(), limit, 64)
	require.NoError(t, err)
	meta := domain.SnapshotMeta{
		Lineage: domain.DefaultLineage(ns, name), CompositionNamespace: ns, CompositionName: name,
		CompositionUID: compUID, SynthesisUUID: uuid, SynthesisTime: ts,
		ChunkCount: len(chunks), Digest: contents.Inventory().Digest(), ControlPlane: thisControlPlane,
	}
	out := make([]domain.ChunkSecret, len(chunks))
	for i, ch := range chunks {
		out[i] = domain.DesiredChunkSecret("kube-system", meta, ch)
		out[i].ResourceVersion = fmt.Sprint(100 + i)
		out[i].DataWrittenAt = historyWritten
	}
	return out
}

type fixture struct {
	comp   domain.Composition
	slices []domain.ResourceSlice
	comps  *portsfakes.FakeCompositionReader
	live   *portsfakes.FakeLiveReader
	reader *portsfakes.FakeSliceReader
	fleet  *portsfakes.FakeFleetIndex
	// fleetSlices and fleetComps are what the fleet index holds besides this Composition.
	fleetSlices []domain.ResourceSlice
	fleetComps  []domain.Composition
	store       *portsfakes.FakeSnapshotStore
	sink        *portsfakes.FakeTombstoneSink
	decisions   *portsfakes.FakeDecisionWriter
	events      *eventLog
	metrics     *portsfakes.FakeMetrics
	downstream  *portsfakes.FakeDownstreamReader
	published   map[string]domain.ResourceSlice
	cfg         app.Config
	// current is the synthesis setSynthesis last published: Eno's stamp on the next one's slices.
	current string
}

// newFixture is a healthy world: an opted-in, Ready, decided Composition whose 9 resources
// sit in two slices, an empty inventory namespace, and a live read that sees no change.
func newFixture(t *testing.T) *fixture {
	f := &fixture{
		comps: &portsfakes.FakeCompositionReader{}, live: &portsfakes.FakeLiveReader{},
		reader: &portsfakes.FakeSliceReader{}, fleet: &portsfakes.FakeFleetIndex{}, store: &portsfakes.FakeSnapshotStore{},
		sink: &portsfakes.FakeTombstoneSink{}, decisions: &portsfakes.FakeDecisionWriter{},
		events: &eventLog{}, metrics: &portsfakes.FakeMetrics{},
		downstream: &portsfakes.FakeDownstreamReader{},
	}
	// Downstream, every object the history names exists and is older than the history.
	f.downstream.ObserveObjectReturns(domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Writes: enoWrote(historyWritten.Add(-time.Hour)), UID: testUID}, nil)
	rs := resources(9)
	f.setSynthesis(synthID, rs[:5], rs[5:])
	f.comp = composition(uid, synthID, f.slices, true)
	f.live.LiveCompositionCalls(func(context.Context, domain.CompositionRef) (domain.Composition, error) { return f.comp, nil })
	f.fleet.ProducedElsewhereCalls(func(_ context.Context, ids []domain.ResourceID, excluded ...string) (map[domain.ResourceID]string, error) {
		var all []domain.Production
		for _, s := range f.fleetSlices {
			all = append(all, domain.ProductionOf(s))
		}
		return domain.ProducedElsewhere(all, ids, excluded...), nil
	})
	f.fleet.LineageMembersCalls(func(_ context.Context, ref domain.CompositionRef, l domain.Lineage) ([]domain.CompositionRef, error) {
		return domain.LineageMembers(domain.Composition{Namespace: ref.Namespace, Name: ref.Name}, l, f.fleetComps), nil
	})
	f.comps.GetCompositionCalls(func(context.Context, domain.CompositionRef) (domain.Composition, error) { return f.comp, nil })
	f.store.GetChunkCalls(func(_ context.Context, name string) (domain.ChunkSecret, error) {
		return domain.ChunkSecret{}, fmt.Errorf("secret %s: %w", name, errNotFound)
	})
	f.store.CreateChunkCalls(func(_ context.Context, s domain.ChunkSecret) (domain.ChunkSecret, error) { return s, nil })
	f.store.UpdateChunkCalls(func(_ context.Context, s domain.ChunkSecret) (domain.ChunkSecret, error) { return s, nil })
	// Like an API server: a published recovery slice can be read back, until a test removes it.
	f.published = map[string]domain.ResourceSlice{}
	f.sink.CreateRecoverySliceCalls(func(_ context.Context, c domain.Composition, h domain.Handoff, part int) (string, error) {
		sl, err := h.RecoverySlice(c, part)
		if err != nil {
			return "", err
		}
		f.published[sl.Name] = sl
		return sl.Name, nil
	})
	// Like an API server, an armed Composition is what the next live read returns.
	f.sink.ArmTombstonesCalls(func(_ context.Context, c domain.Composition, digest string) (domain.Composition, error) {
		f.comp.Annotations = maps.Clone(f.comp.Annotations)
		if f.comp.Annotations == nil {
			f.comp.Annotations = map[string]string{}
		}
		f.comp.Annotations[domain.AnnotationArmed] = digest
		c.Annotations = maps.Clone(f.comp.Annotations)
		return c, nil
	})
	f.sink.AppendRecoverySliceCalls(func(_ context.Context, c domain.Composition, name string) (domain.Composition, error) {
		if !f.comp.NamesSlice(name) {
			f.comp.Synthesis = &domain.Synthesis{UUID: f.comp.Synthesis.UUID, Synthesized: f.comp.Synthesis.Synthesized,
				Slices: append(slices.Clone(f.comp.Synthesis.Slices), name)}
		}
		return f.comp, nil
	})
	f.sink.DisarmTombstonesCalls(func(context.Context, domain.Composition) error {
		f.comp.Annotations = maps.Clone(f.comp.Annotations)
		f.comp.Annotations[domain.AnnotationArmed] = domain.ArmedOff
		return nil
	})
	f.sink.RequestResynthesisCalls(func(_ context.Context, c domain.Composition) error {
		f.comp.Annotations = maps.Clone(f.comp.Annotations)
		f.comp.Annotations[domain.AnnotationForceResynthesis] = c.SynthesisUUID()
		return nil
	})
	// Like an API server, a written decision is what the next live read returns.
	f.decisions.WriteDecisionCalls(func(_ context.Context, c domain.Composition, d domain.Decision) error {
		f.comp.Annotations = maps.Clone(f.comp.Annotations)
		f.comp.Annotations[domain.AnnotationDecision] = d.Encode()
		return nil
	})
	f.cfg = app.DefaultConfig()
	f.cfg.ControlPlane = thisControlPlane
	f.cfg.Enabled = true
	f.cfg.MaxChunkBytes = chunkLimit
	f.cfg.Now = func() time.Time { return now }
	return f
}

func (f *fixture) setSynthesis(uuid string, groups ...[]res) {
	if uuid != f.current {
		f.slices = slicesOf(f.current, groups...)
		f.current = uuid
	} else {
		f.slices = slicesOf(slicesStamp(f.slices), groups...)
	}
	byName := map[string]domain.ResourceSlice{}
	for _, s := range f.slices {
		byName[s.Name] = s
	}
	f.reader.GetSliceCalls(func(_ context.Context, _ string, n string) (domain.ResourceSlice, error) {
		s, ok := byName[n]
		if !ok {
			s, ok = f.published[n]
		}
		if !ok {
			return domain.ResourceSlice{}, fmt.Errorf("slice %s: %w", n, errNotFound)
		}
		return s, nil
	})
}

func slicesStamp(s []domain.ResourceSlice) string {
	if len(s) == 0 {
		return ""
	}
	return s[0].SynthesisUUID
}

func (f *fixture) service(t *testing.T) *app.Service {
	t.Helper()
	svc, err := app.New(f.cfg, app.Deps{
		Compositions: f.comps, Live: f.live, Slices: f.reader, Fleet: f.fleet, Store: f.store,
		Sink: f.sink, Decisions: f.decisions, Downstream: f.downstream, Events: f.events, Metrics: f.metrics,
	})
	require.NoError(t, err)
	return svc
}

// recreated and resynthesized are what can happen to the live Composition between a plan and a
// write: a new incarnation, or a new current synthesis.
func recreated(c domain.Composition) domain.Composition { c.UID = "uid-3"; return c }

func resynthesized(c domain.Composition) domain.Composition {
	s := *c.Synthesis
	s.UUID = "66666666-aaaa-bbbb-cccc-000000000006"
	c.Synthesis = &s
	return c
}

func (f *fixture) writes() int {
	return f.store.CreateChunkCallCount() + f.store.UpdateChunkCallCount()
}

func ctx(t *testing.T) context.Context { return logr.NewContext(context.Background(), testr.New(t)) }

const (
	timeout = 10 * time.Second
	tick    = 10 * time.Millisecond
)

// eventLog records the events of a test in order, Normal and Warning alike.
type eventLog struct {
	// onEvent, when set, runs before each event is recorded.
	onEvent func()
	mu      sync.Mutex
	events  []loggedEvent
}

type loggedEvent struct {
	comp            domain.Composition
	warning         bool
	reason, message string
}

func (l *eventLog) Normal(comp domain.Composition, reason, message string) {
	l.add(loggedEvent{comp: comp, reason: reason, message: message})
}

func (l *eventLog) Warning(comp domain.Composition, reason, message string) {
	l.add(loggedEvent{comp: comp, warning: true, reason: reason, message: message})
}

func (l *eventLog) add(e loggedEvent) {
	if l.onEvent != nil {
		l.onEvent()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// Count is how many events were recorded.
func (l *eventLog) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// At returns the i-th event: its Composition, whether it is a Warning, its reason and message.
func (l *eventLog) At(i int) (domain.Composition, bool, string, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.events[i]
	return e.comp, e.warning, e.reason, e.message
}

// enoWrote is the write history of an object Eno last wrote at at.
func enoWrote(at time.Time) []domain.ObjectWrite {
	return []domain.ObjectWrite{{Manager: "eno", Time: at}}
}
