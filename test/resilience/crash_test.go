package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// crashChunkBytes fits three of the crash scenarios' entries in one chunk: 3 resources make
// one chunk, 8 make three. The scenarios assert the counts.
const crashChunkBytes = 260

var errCrash = errors.New("simulated crash: the controller process died before this write")

// crashSwitch is shared by the decorators of one Service: it counts the pass's writes in order
// and fails write number failAt and every later one, as a process that died would never make
// them. A negative failAt never fails.
type crashSwitch struct {
	mu        sync.Mutex
	failAt    int
	attempted []string
}

func (s *crashSwitch) admit(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.attempted)
	s.attempted = append(s.attempted, op)
	if s.failAt >= 0 && n >= s.failAt {
		return errCrash
	}
	return nil
}

func (s *crashSwitch) ops() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.attempted...)
}

func (s *crashSwitch) options(maxChunkBytes int) serviceOptions {
	return serviceOptions{
		maxChunkBytes: maxChunkBytes,
		wrapStore:     func(st ports.SnapshotStore) ports.SnapshotStore { return crashingStore{st, s} },
		wrapSink:      func(k ports.TombstoneSink) ports.TombstoneSink { return crashingSink{k, s} },
		wrapDecisions: func(d ports.DecisionWriter) ports.DecisionWriter { return crashingDecisions{d, s} },
	}
}

// crashingStore is the real k8s SecretStore; writes pass the crash switch first.
type crashingStore struct {
	ports.SnapshotStore
	sw *crashSwitch
}

func (s crashingStore) CreateChunk(ctx context.Context, c domain.ChunkSecret) (domain.ChunkSecret, error) {
	if err := s.sw.admit("create chunk " + c.Annotations[domain.AnnotationChunkIndex]); err != nil {
		return domain.ChunkSecret{}, err
	}
	return s.SnapshotStore.CreateChunk(ctx, c)
}

func (s crashingStore) UpdateChunk(ctx context.Context, c domain.ChunkSecret) (domain.ChunkSecret, error) {
	if err := s.sw.admit("update chunk " + c.Annotations[domain.AnnotationChunkIndex]); err != nil {
		return domain.ChunkSecret{}, err
	}
	return s.SnapshotStore.UpdateChunk(ctx, c)
}

type crashingSink struct {
	ports.TombstoneSink
	sw *crashSwitch
}

func (s crashingSink) ArmTombstones(ctx context.Context, c domain.Composition, digest string) (domain.Composition, error) {
	if err := s.sw.admit("arm tombstones"); err != nil {
		return domain.Composition{}, err
	}
	return s.TombstoneSink.ArmTombstones(ctx, c, digest)
}

func (s crashingSink) CreateRecoverySlice(ctx context.Context, c domain.Composition, h domain.Handoff, part int) (string, error) {
	if err := s.sw.admit("create recovery slice"); err != nil {
		return "", err
	}
	return s.TombstoneSink.CreateRecoverySlice(ctx, c, h, part)
}

func (s crashingSink) AppendRecoverySlice(ctx context.Context, c domain.Composition, slice string) (domain.Composition, error) {
	if err := s.sw.admit("append recovery slice"); err != nil {
		return domain.Composition{}, err
	}
	return s.TombstoneSink.AppendRecoverySlice(ctx, c, slice)
}

func (s crashingSink) RequestResynthesis(ctx context.Context, c domain.Composition) error {
	if err := s.sw.admit("request resynthesis"); err != nil {
		return err
	}
	return s.TombstoneSink.RequestResynthesis(ctx, c)
}

type crashingDecisions struct {
	ports.DecisionWriter
	sw *crashSwitch
}

func (d crashingDecisions) WriteDecision(ctx context.Context, c domain.Composition, dec domain.Decision) error {
	if err := d.sw.admit("write decision"); err != nil {
		return err
	}
	return d.DecisionWriter.WriteDecision(ctx, c, dec)
}

// replacement is a snapshot replacement by a resynthesis of the same incarnation, and the writes
// its pass makes, in order: the SameIncarnation decision, then one write per changed chunk.
type replacement struct {
	name                 string
	oldN, newN           int
	oldChunks, newChunks int
	writes               []string
}

var (
	oneToThree = replacement{"1→3", 3, 8, 1, 3,
		[]string{"write decision", "update chunk 0", "create chunk 1", "create chunk 2"}}
	threeToOne = replacement{"3→1", 8, 3, 3, 1,
		[]string{"write decision", "update chunk 0"}}
	threeToThree = replacement{"3→3", 8, 8, 3, 3,
		[]string{"write decision", "update chunk 0", "update chunk 1", "update chunk 2"}}
)

// verdict is what design §5 reads in the state a crash left behind.
type verdict string

const (
	readsOld     verdict = "the old snapshot"
	readsNew     verdict = "the new snapshot"
	readsInvalid verdict = "InventoryInvalid(MissingChunk)"
)

// crashPoint kills the replacement pass at write failAt (from 0); failAt == len(writes) is the
// crash right after the last write.
type crashPoint struct {
	shape  replacement
	failAt int
	after  verdict
}

func (p crashPoint) String() string {
	if p.failAt == len(p.shape.writes) {
		return fmt.Sprintf("%s crash after the last write", p.shape.name)
	}
	return fmt.Sprintf("%s crash at write %d (%s)", p.shape.name, p.failAt, p.shape.writes[p.failAt])
}

// crashPoints: every write position of every replacement, and the point after the last.
var crashPoints = []crashPoint{
	{oneToThree, 0, readsOld},
	{oneToThree, 1, readsOld},
	{oneToThree, 2, readsInvalid}, // chunk 0 is new (count 3), 1 and 2 absent
	{oneToThree, 3, readsInvalid},
	{oneToThree, 4, readsNew},

	{threeToOne, 0, readsOld},
	{threeToOne, 1, readsOld},
	{threeToOne, 2, readsNew}, // old chunks 1 and 2 are left over and ignored: older timestamp

	{threeToThree, 0, readsOld},
	{threeToThree, 1, readsOld},
	{threeToThree, 2, readsInvalid}, // chunk 0 new, chunks 1 and 2 old: the new snapshot lacks them
	{threeToThree, 3, readsInvalid},
	{threeToThree, 4, readsNew},
}

func TestCrashPointsCoverEveryWritePosition(t *testing.T) {
	for _, shape := range []replacement{oneToThree, threeToOne, threeToThree} {
		var got []int
		for _, p := range crashPoints {
			if p.shape.name == shape.name {
				got = append(got, p.failAt)
			}
		}
		want := make([]int, len(shape.writes)+1)
		for i := range want {
			want[i] = i
		}
		assert.Equal(t, want, got, "crash points of %s", shape.name)
	}
}

// crashed is the state a crash left in the API server.
type crashed struct {
	c          kubetest.Clients
	ns         string
	ref        domain.CompositionRef
	lineage    domain.Lineage
	normal     *app.Service
	old, next  *synthesis
	incarnated string // the UID of the Composition that crashed
}

// crash records the old snapshot through a normal pass, resynthesizes, and runs the replacement
// pass until it dies at p. It checks which writes were attempted and what design §5 reads afterwards.
func crash(t *testing.T, ctx context.Context, p crashPoint) crashed {
	t.Helper()
	c := env.AdminClients(t)
	ns := c.NewNamespace(t, "crash")
	s := crashed{
		c: c, ns: ns,
		ref:     domain.CompositionRef{Namespace: ns, Name: "web"},
		lineage: domain.DefaultLineage(ns, "web"),
		normal:  newService(t, env.AdminConfig(), serviceOptions{maxChunkBytes: crashChunkBytes}),
		old:     newSynthesis(numbered("old", p.shape.oldN)),
		next:    newSynthesis(numbered("new", p.shape.newN)),
	}
	require.Equal(t, p.shape.oldChunks, chunkCount(t, s.old.Resources, crashChunkBytes), "old snapshot shape")
	require.Equal(t, p.shape.newChunks, chunkCount(t, s.next.Resources, crashChunkBytes), "new snapshot shape")

	var err error
	s.incarnated, err = createComposition(ctx, c, ns, "web", s.old)
	require.NoError(t, err)
	_, err = s.normal.Reconcile(ctx, s.ref)
	require.NoError(t, err)
	snap, err := readSnapshot(ctx, c, s.lineage)
	require.NoError(t, err, "the old snapshot was recorded")
	require.Equal(t, s.old.UUID, snap.SynthesisUUID())

	require.NoError(t, resynthesize(ctx, c, ns, "web", s.next))
	sw := &crashSwitch{failAt: p.failAt}
	_, err = newService(t, env.AdminConfig(), sw.options(crashChunkBytes)).Reconcile(ctx, s.ref)
	if p.failAt < len(p.shape.writes) {
		require.ErrorIs(t, err, errCrash)
	} else {
		require.NoError(t, err)
	}
	require.Equal(t, p.shape.writes[:min(p.failAt+1, len(p.shape.writes))], sw.ops(), "writes the pass attempted, in order")

	snap, err = readSnapshot(ctx, c, s.lineage)
	switch p.after {
	case readsOld:
		require.NoError(t, err, describeSnapshot(snap, err))
		assert.Equal(t, s.old.UUID, snap.SynthesisUUID())
		assert.Equal(t, s.old.ids(), snapshotIDs(snap))
	case readsNew:
		require.NoError(t, err, describeSnapshot(snap, err))
		assert.Equal(t, s.next.UUID, snap.SynthesisUUID())
		assert.Equal(t, s.next.ids(), snapshotIDs(snap))
	case readsInvalid:
		reason, ok := domain.InvalidReasonOf(err)
		require.True(t, ok, "want InventoryInvalid, read %s", describeSnapshot(snap, err))
		assert.Equal(t, domain.ReasonMissingChunk, reason)
	}
	return s
}

// expectRecovery is what recovery for a recreated Composition with synthesis recreated must
// decide from the state a crash at p left: tombstones computed from exactly one complete
// snapshot, or none at all.
func (s crashed) expectRecovery(p crashPoint, recreated *synthesis) (outcome domain.Outcome, source string, tombstones []string) {
	switch p.after {
	case readsOld:
		return domain.OutcomeRecovered, s.old.UUID, minus(s.old.ids(), recreated.ids())
	case readsNew:
		return domain.OutcomeRecovered, s.next.UUID, minus(s.next.ids(), recreated.ids())
	}
	return domain.OutcomeInventoryInvalid, "", []string{}
}

func planTombstoneIDs(plan domain.RecoveryPlan) []string {
	out := []string{}
	for _, ts := range plan.Tombstones {
		out = append(out, ts.Entry.ID().String())
	}
	return out
}

// TestCrashConsistencyOfSnapshotReplacement kills the replacement pass after every write, on
// the real API server, and checks two ways of going on: the same process restarting, and the
// Composition being recreated before anything repaired the snapshot.
func TestCrashConsistencyOfSnapshotReplacement(t *testing.T) {
	for _, p := range crashPoints {
		t.Run(p.String(), func(t *testing.T) {
			t.Run("restart", func(t *testing.T) {
				ctx := kubetest.Context(t, 2*time.Minute)
				s := crash(t, ctx, p)
				recreated := newSynthesis(resources("shared", "recreated-00"))
				require.NoError(t, publishSlices(ctx, s.c, s.ns, "web", recreated))
				// What a recreated Composition would decide now (a dry run: nothing is written).
				hypothetical := domain.Composition{
					Namespace: s.ns, Name: "web", UID: string(uuid.NewUUID()),
					Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue},
					Synthesis:   &domain.Synthesis{UUID: recreated.UUID, Synthesized: recreated.At, Ready: true, Slices: recreated.slices},
				}
				plan, err := s.normal.Plan(ctx, hypothetical)
				require.NoError(t, err)
				outcome, source, tombstones := s.expectRecovery(p, recreated)
				assert.Equal(t, outcome, plan.Decision.Outcome, plan.Decision.Message)
				assert.Equal(t, source, plan.Decision.SourceSynthesisUUID)
				assert.Equal(t, tombstones, planTombstoneIDs(plan), "exact tombstones of the dry run")
				if outcome == domain.OutcomeInventoryInvalid {
					assert.Equal(t, domain.ReasonMissingChunk.String(), plan.Decision.Reason)
				}

				// The next normal pass completes the new snapshot.
				_, err = s.normal.Reconcile(ctx, s.ref)
				require.NoError(t, err)
				live, err := liveComposition(ctx, s.c, s.ref)
				require.NoError(t, err)
				snap, err := readSnapshot(ctx, s.c, s.lineage)
				require.NoError(t, err, describeSnapshot(snap, err))
				assert.True(t, domain.SnapshotMatches(snap, live), "the snapshot is this incarnation's current synthesis")
				assert.Equal(t, s.next.ids(), snapshotIDs(snap))
				assert.Equal(t, p.shape.newChunks, snap.Meta().ChunkCount)
				d, ok := live.FinishedDecision()
				require.True(t, ok)
				assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome)
				assert.Equal(t, domain.ReasonSameIncarnation, d.Reason)

				// And now a recreation would tombstone from the completed new snapshot.
				plan, err = s.normal.Plan(ctx, hypothetical)
				require.NoError(t, err)
				assert.Equal(t, domain.OutcomeRecovered, plan.Decision.Outcome)
				assert.Equal(t, minus(s.next.ids(), recreated.ids()), planTombstoneIDs(plan))
			})

			t.Run("recreate", func(t *testing.T) {
				ctx := kubetest.Context(t, 2*time.Minute)
				s := crash(t, ctx, p)
				recreated := newSynthesis(resources("shared", "recreated-00"))
				uid, err := recreateComposition(ctx, s.c, s.ns, "web", recreated)
				require.NoError(t, err)
				require.NotEqual(t, s.incarnated, uid)

				_, err = s.normal.Reconcile(ctx, s.ref)
				require.NoError(t, err)
				live, err := liveComposition(ctx, s.c, s.ref)
				require.NoError(t, err)
				d, ok := live.FinishedDecision()
				require.True(t, ok, "a finished decision for the recreated synthesis")
				outcome, source, tombstones := s.expectRecovery(p, recreated)
				assert.Equal(t, outcome, d.Outcome, d.Message)
				assert.Equal(t, source, d.SourceSynthesisUUID)
				assert.Equal(t, len(tombstones), d.Tombstones)
				family := domain.RecoverySliceFamily("web", recreated.UUID)
				recorded := recreated
				if outcome == domain.OutcomeRecovered {
					sliceName := d.TombstoneSlice
					assert.True(t, strings.HasPrefix(sliceName, family+"-"), "slice %s of the family %s", sliceName, family)
					got, forSynthesis, err := tombstoneSliceIDs(ctx, s.c, s.ns, sliceName)
					require.NoError(t, err)
					assert.Equal(t, tombstones, got, "exact tombstones published")
					assert.Equal(t, recreated.UUID, forSynthesis)
					// Handed off (design §6.2): committed, a resynthesis requested, and the
					// Recovered synthesis itself is never recorded.
					assert.True(t, live.NamesSlice(sliceName))
					assert.Equal(t, recreated.UUID, live.Annotations[domain.AnnotationForceResynthesis])
					snap, err := readSnapshot(ctx, s.c, s.lineage)
					if err == nil {
						assert.NotEqual(t, recreated.UUID, snap.Meta().SynthesisUUID)
					}
					// Eno's next synthesis carries the tombstones; it is the one recorded.
					carried := slices.Clone(recreated.Resources)
					for _, id := range tombstones {
						carried = append(carried, resource{Name: id[strings.LastIndex(id, "/")+1:], Deleted: true})
					}
					recorded = newSynthesis(carried)
					require.NoError(t, resynthesize(ctx, s.c, s.ns, "web", recorded))
					_, err = s.normal.Reconcile(ctx, s.ref)
					require.NoError(t, err)
					live, err = liveComposition(ctx, s.c, s.ref)
					require.NoError(t, err)
					next, ok := live.FinishedDecision()
					require.True(t, ok)
					assert.Equal(t, domain.ReasonAlreadyDecided, next.Reason)
				} else {
					assert.Equal(t, domain.ReasonMissingChunk.String(), d.Reason)
					assert.Empty(t, d.TombstoneSlice)
					list, err := s.c.Dynamic.Resource(sliceGVR).Namespace(s.ns).List(ctx, metav1.ListOptions{})
					require.NoError(t, err)
					for _, sl := range list.Items {
						assert.False(t, strings.HasPrefix(sl.GetName(), family), "no tombstone slice from untrusted history: %s", sl.GetName())
					}
				}

				// The recreated incarnation is recorded completely.
				snap, err := readSnapshot(ctx, s.c, s.lineage)
				require.NoError(t, err, describeSnapshot(snap, err))
				assert.True(t, domain.SnapshotMatches(snap, live))
				assert.Equal(t, recorded.ids(), snapshotIDs(snap))
			})
		})
	}
}
