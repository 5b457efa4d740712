package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// costChunkBytes is the small MaxChunkBytes that makes a few dozen resources span several chunks.
const costChunkBytes = 1024

// costSlices is how many ResourceSlices each synthesis of these tests spans.
const costSlices = 2

// minimum is the floor any design pays to record a synthesis safely (design §4): read every slice,
// write every chunk, and re-read the Composition live before each write.
func minimum(slices, chunks int) int { return slices + 2*chunks }

// newSynthesisCost is what one reconcile of a first synthesis costs (no snapshot yet, outcome
// NoInventory): s + 2n + 3 requests and 2 events.
//   - recovery: LIST the lineage's Secrets live (design §5 must see foreign ones), GET each slice,
//     GET the Composition live (the recheck), PATCH the decision (with the resourceVersion and
//     UID the recheck saw);
//   - recording: reuses that list and those slices; per chunk, GET the Composition live and
//     POST the Secret;
//   - events: the decision (NoInventory) and InventoryRecorded.
func newSynthesisCost(s, n int) Counts {
	return Counts{
		"list secrets": 1, "get resourceslices": s,
		"get compositions": 1 + n, decisionWrite: 1,
		"create secrets": n, "create events": 2,
	}
}

// resynthesisCost is a new synthesis of the same incarnation over an n-chunk snapshot
// (NothingToRecover/SameIncarnation): as above, but each chunk is an update, a PUT with the
// listed resourceVersion built from the cached Secret (which keeps metadata others set): s + 2n + 3.
// The InventoryRecorded event repeats the first one word for word, so client-go's event
// correlator PATCHes its count instead of creating a second event.
func resynthesisCost(s, n int) Counts {
	return Counts{
		"list secrets": 1, "get resourceslices": s,
		"get compositions": 1 + n, decisionWrite: 1,
		"update secrets": n, "create events": 1, "patch events": 1,
	}
}

// handOffCost is a recreated Composition whose old snapshot has t orphans (Recovered), in a
// process that has not read downstream yet. Recovery lists the lineage, GETs each slice, maps
// the orphans' kinds through discovery (GET /api and /apis, once per process) and GETs each
// orphan's metadata downstream (design §6.3; perKind counts them by resource), then asks the fleet
// index, with no request, for identities other Compositions produce (K4). Then the hand-off (design §6.2) in
// p recovery slices (one per 512 KiB of tombstone manifests): after a live recheck of the
// Composition, PATCH the arming annotation, then for each slice a POST and a status PATCH that
// names it; after another recheck PATCH the decision, and after a third PATCH the
// force-resynthesis annotation. Nothing is read back and no slice is ever updated. A synthesis
// decided Recovered is never recorded: no Secret is written, and the only event is the
// decision's.
func handOffCost(s, p int, perKind Counts) Counts {
	c := Counts{
		// The synthesis's slices twice: the plan, then the check of what the hand-off's
		// synthesis disables, which is never recorded (K7).
		"list secrets": 1, "get resourceslices": 2 * s, "get /api": 1, "get /apis": 1,
		"get compositions": 3, "create resourceslices": p, "patch compositions/status": p,
		decisionWrite: 1, "patch compositions": 2, "create events": 1,
	}
	for k, v := range perKind {
		c[k] += v
	}
	return c
}

// carriedCost is Eno's next synthesis after the hand-off, which carries the tombstones over the
// same output: it is decided AlreadyDecided (before any downstream read) and recorded over the
// old incarnation's first n chunks, after the fleet index's answer on the lineage (K6a) and the
// hand-off's end ("done", after a live read). The events are new (another Composition UID):
// s + 2n + 5.
func carriedCost(s, n int) Counts {
	return Counts{
		"list secrets": 1, "get resourceslices": s,
		"get compositions": 2 + n, decisionWrite: 1, "patch compositions": 1,
		"update secrets": n, "create events": 2,
	}
}

// downstreamGets counts the metadata GETs recovery makes for resources [from, to) of a
// synthesis, by resource, as the counter names them.
func downstreamGets(from, to int) Counts {
	plural := map[string]string{"ConfigMap": "configmaps", "Deployment": "deployments", "ClusterRole": "clusterroles"}
	out := Counts{}
	for i := from; i < to; i++ {
		var m struct{ Kind string }
		if err := json.Unmarshal([]byte(manifest("ns", i)), &m); err != nil {
			panic(err)
		}
		out["get "+plural[m.Kind]]++
	}
	return out
}

func uuidFor(i int) string { return fmt.Sprintf("%08x-aaaa-4bbb-8ccc-%012x", i, i) }

// costSynthesis spreads a synthesis of n chunks over costSlices slices.
func costSynthesis(t testing.TB, n, i int) synthesis {
	r := resourcesForChunks(t, n, costChunkBytes)
	return synthesis{uuid: uuidFor(i), resources: r, perSlice: (r + costSlices - 1) / costSlices}
}

func logCost(t testing.TB, what string, got Counts, s, n int) {
	t.Helper()
	req := got.Without("events").Total()
	t.Logf("%s: %d requests (%d writes) + %d events; minimum %d (s=%d slices, n=%d chunks); ratio %.2f; %s",
		what, req, got.Writes(), got.Events(), minimum(s, n), s, n, float64(req)/float64(minimum(s, n)), got)
}

func TestAPICostOfOneReconcile(t *testing.T) {
	a := newAdmin(t)
	for _, n := range []int{1, 3, 8} {
		t.Run(fmt.Sprintf("%d chunks", n), func(t *testing.T) {
			ctx := context.Background()
			ns, inv := a.NewNamespace(t, "cost"), a.NewNamespace(t, "inventory")
			c := startController(t, ns, inv, costChunkBytes)
			ref := domain.CompositionRef{Namespace: ns, Name: "web"}

			first := costSynthesis(t, n, 1)
			require.Equal(t, n, first.chunks(t, ns, ref.Name, costChunkBytes))
			s := len(first.sliceNames(ref.Name))
			u, err := a.createComposition(ctx, ns, ref.Name, first)
			require.NoError(t, err)
			c.waitCached(t, ref, u.GetResourceVersion())

			res, got := c.reconcile(t, ref, 2)
			logCost(t, "new synthesis", got, s, n)
			require.NotNil(t, res.Recovery)
			assert.Equal(t, domain.OutcomeNoInventory, res.Recovery.Plan.Decision.Outcome)
			require.NotNil(t, res.Recording)
			assert.Equal(t, n, res.Recording.Created)
			assert.Equal(t, newSynthesisCost(s, n), got, "requests of a reconcile that records a first synthesis")
			assert.Equal(t, n, got.Writes()-1, "n chunk writes and one decision")

			t.Run("steady state", func(t *testing.T) {
				c.waitSettled(t, ref)
				for range 3 {
					before := c.counter.Snapshot()
					res, err := c.svc.Reconcile(ctx, ref)
					require.NoError(t, err)
					time.Sleep(100 * time.Millisecond) // room for a late event, which would show here
					got := c.counter.Snapshot().Sub(before)
					require.NotNil(t, res.Recording)
					assert.True(t, res.Recording.Unchanged, "the fast path")
					assert.Empty(t, got, "a settled Composition costs no request")
				}
			})

			t.Run("resynthesis of the same incarnation", func(t *testing.T) {
				c.waitSettled(t, ref) // the cache holds the chunks the update starts from
				next := first
				next.uuid = uuidFor(2)
				u, err := a.resynthesize(ctx, ns, ref.Name, next)
				require.NoError(t, err)
				c.waitCached(t, ref, u.GetResourceVersion())

				res, got := c.reconcile(t, ref, 2)
				logCost(t, "resynthesis", got, s, n)
				require.NotNil(t, res.Recovery)
				assert.Equal(t, domain.ReasonSameIncarnation, res.Recovery.Plan.Decision.Reason)
				require.NotNil(t, res.Recording)
				assert.Equal(t, n, res.Recording.Updated)
				assert.Equal(t, resynthesisCost(s, n), got)
				c.waitSettled(t, ref)
				_, got = c.reconcile(t, ref, 0)
				assert.Empty(t, got)
			})

			t.Run("recreated with orphans", func(t *testing.T) {
				c.waitSettled(t, ref)
				// Deleted without cascading (the Composition owns nothing here) and recreated with a
				// synthesis that drops a quarter of the resources: under the deletion guard.
				require.NoError(t, a.Dynamic.Resource(k8s.CompositionGVR).Namespace(ns).Delete(ctx, ref.Name, metav1.DeleteOptions{}))
				smaller := synthesis{uuid: uuidFor(3), resources: first.resources * 3 / 4, perSlice: first.perSlice}
				n2 := smaller.chunks(t, ns, ref.Name, costChunkBytes)
				s2 := len(smaller.sliceNames(ref.Name))
				u, err := a.createComposition(ctx, ns, ref.Name, smaller)
				require.NoError(t, err)
				c.waitCached(t, ref, u.GetResourceVersion())

				res, got := c.reconcile(t, ref, 1)
				logCost(t, "recreated, recovered (the hand-off)", got, s2, 0)
				require.NotNil(t, res.Recovery)
				d := res.Recovery.Plan.Decision
				require.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
				assert.Equal(t, first.resources-smaller.resources, d.Tombstones, "every orphan exists downstream and is older than the history")
				assert.Empty(t, res.Recovery.Plan.Dropped)
				assert.Nil(t, res.Recording, "a synthesis decided Recovered is never recorded")
				assert.Equal(t, handOffCost(s2, 1, downstreamGets(smaller.resources, first.resources)), got, "a few orphans fit one recovery slice")

				// Eno's next synthesis carries the tombstones; it is decided and recorded.
				carried := smaller
				carried.uuid = uuidFor(4)
				u, err = a.resynthesize(ctx, ns, ref.Name, carried)
				require.NoError(t, err)
				c.waitCached(t, ref, u.GetResourceVersion())
				res, got = c.reconcile(t, ref, 2)
				logCost(t, "Eno's carrying synthesis, recorded", got, s2, n2)
				require.NotNil(t, res.Recovery)
				assert.Equal(t, domain.ReasonAlreadyDecided, res.Recovery.Plan.Decision.Reason)
				require.NotNil(t, res.Recording)
				assert.Equal(t, n2, res.Recording.Updated)
				assert.Equal(t, carriedCost(s2, n2), got)
			})
		})
	}
}

// BenchmarkReconcileAPICost reports the requests one reconcile makes against the real API
// server as custom metrics: requests/op (events excluded), writes/op, events/op, the design
// floor min-requests/op (slice GETs + chunk writes + live rechecks) and their ratio.
func BenchmarkReconcileAPICost(b *testing.B) {
	a := newAdmin(b)
	b.Run("steady-state", func(b *testing.B) {
		ctx := context.Background()
		ns, inv := a.NewNamespace(b, "bench"), a.NewNamespace(b, "inventory")
		c := startController(b, ns, inv, costChunkBytes)
		ref := domain.CompositionRef{Namespace: ns, Name: "web"}
		u, err := a.createComposition(ctx, ns, ref.Name, costSynthesis(b, 3, 1))
		require.NoError(b, err)
		c.waitCached(b, ref, u.GetResourceVersion())
		_, _ = c.reconcile(b, ref, 2)
		c.waitSettled(b, ref)

		before := c.counter.Snapshot()
		b.ResetTimer()
		for b.Loop() {
			if _, err := c.svc.Reconcile(ctx, ref); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportCost(b, c.counter.Snapshot().Sub(before), 0)
	})
	for _, n := range []int{1, 3, 8} {
		b.Run(fmt.Sprintf("new-synthesis/chunks=%d", n), func(b *testing.B) {
			ctx := context.Background()
			ns, inv := a.NewNamespace(b, "bench"), a.NewNamespace(b, "inventory")
			c := startController(b, ns, inv, costChunkBytes)
			syn := costSynthesis(b, n, 1)
			s := len(syn.sliceNames("web"))
			total := Counts{}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ref := domain.CompositionRef{Namespace: ns, Name: fmt.Sprintf("web-%d", i)}
				syn.uuid = uuidFor(i + 1)
				u, err := a.createComposition(ctx, ns, ref.Name, syn)
				require.NoError(b, err)
				c.waitCached(b, ref, u.GetResourceVersion())
				before := c.counter.Snapshot()
				b.StartTimer()
				if _, err := c.svc.Reconcile(ctx, ref); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				require.Eventually(b, func() bool { return c.counter.Snapshot().Sub(before).Events() >= 2 }, eventually, time.Millisecond)
				for k, v := range c.counter.Snapshot().Sub(before) {
					total[k] += v
				}
			}
			reportCost(b, total, b.N*minimum(s, n))
		})
	}
}

func reportCost(b *testing.B, total Counts, min int) {
	req := total.Without("events").Total()
	perOp := func(v int) float64 { return float64(v) / float64(b.N) }
	b.ReportMetric(perOp(req), "requests/op")
	b.ReportMetric(perOp(total.Writes()), "writes/op")
	b.ReportMetric(perOp(total.Events()), "events/op")
	b.ReportMetric(perOp(min), "min-requests/op")
	if min > 0 {
		b.ReportMetric(float64(req)/float64(min), "ratio-to-min")
	}
}
