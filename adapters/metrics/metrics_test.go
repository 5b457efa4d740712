package metrics_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/Azure/eno-tombstone-recovery/adapters/metrics"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/buildinfo"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestRecorderExposesEveryProductMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := metrics.New(reg)
	require.NoError(t, err)
	r.SnapshotRecorded(true)
	r.SnapshotRecorded(false)
	r.ChunkWrite("created")
	r.ChunkWrite("conflict")
	r.DecisionMade(domain.OutcomeRecovered, "")
	r.DecisionMade(domain.OutcomeNothingToRecover, "NoOrphans")
	r.Refusal("MissingChunk")
	r.ChunksUsed(domain.DefaultLineage("team-a", "web"), 16, 64)
	r.LargestEntry(domain.DefaultLineage("team-a", "web"), 262144, 1048576)
	r.ReconcileDone(20*time.Millisecond, nil)
	r.ReconcileDone(time.Second, errors.New("x"))

	body := scrape(t, reg)
	assert.NotContains(t, body, "chunk_headroom_ratio", "a full chunk is healthy: its headroom is not reported")
	for _, want := range []string{
		`eno_tombstone_recovery_snapshots_total{result="written"} 1`,
		`eno_tombstone_recovery_snapshots_total{result="unchanged"} 1`,
		`eno_tombstone_recovery_chunk_writes_total{result="created"} 1`,
		`eno_tombstone_recovery_chunk_writes_total{result="conflict"} 1`,
		`eno_tombstone_recovery_decisions_total{outcome="Recovered",reason=""} 1`,
		`eno_tombstone_recovery_decisions_total{outcome="NothingToRecover",reason="NoOrphans"} 1`,
		`eno_tombstone_recovery_refusals_total{reason="MissingChunk"} 1`,
		`eno_tombstone_recovery_snapshot_chunks{lineage="a6d6889313c2"} 16`,
		`eno_tombstone_recovery_chunks_used_ratio{lineage="a6d6889313c2"} 0.25`,
		`eno_tombstone_recovery_largest_entry_bytes{lineage="a6d6889313c2"} 262144`,
		`eno_tombstone_recovery_largest_entry_ratio{lineage="a6d6889313c2"} 0.25`,
		`eno_tombstone_recovery_reconcile_duration_seconds_count{result="success"} 1`,
		`eno_tombstone_recovery_reconcile_duration_seconds_count{result="error"} 1`,
	} {
		assert.Contains(t, body, want)
	}
}

// TestSeriesExistBeforeTheFirstEvent: alerts and dashboards see every finite label value at 0.
func TestSeriesExistBeforeTheFirstEvent(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := metrics.New(reg)
	require.NoError(t, err)
	body := scrape(t, reg)
	for _, want := range []string{
		`eno_tombstone_recovery_reconcile_duration_seconds_count{result="error"} 0`,
		`eno_tombstone_recovery_reconcile_duration_seconds_count{result="success"} 0`,
		`eno_tombstone_recovery_panics_total{where="reconcile"} 0`,
		`eno_tombstone_recovery_panics_total{where="event-handler"} 0`,
		`eno_tombstone_recovery_tombstone_alerts_total{reason="OrphansRemain"} 0`,
		`eno_tombstone_recovery_tombstone_alerts_total{reason="HandoffDisarmed"} 0`,
		`eno_tombstone_recovery_tombstone_alerts_total{reason="CascadingKind"} 0`,
		`eno_tombstone_recovery_compositions_waiting{state="HeldForReview"} 0`,
		`eno_tombstone_recovery_compositions_waiting{state="HandoffPending"} 0`,
		`eno_tombstone_recovery_compositions_waiting{state="RecordingFailing"} 0`,
		`eno_tombstone_recovery_orphans_remaining 0`,
	} {
		assert.Contains(t, body, want)
	}
}

// TestCompositionsWaitingCountsEachCompositionOnce: the gauges count Compositions by their last
// observed state; a later state replaces an earlier one and the zero state forgets it.
func TestCompositionsWaitingCountsEachCompositionOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := metrics.New(reg)
	require.NoError(t, err)
	a := domain.CompositionRef{Namespace: "team-a", Name: "web"}
	b := domain.CompositionRef{Namespace: "team-b", Name: "web"}
	waiting := func() map[string]float64 {
		out := map[string]float64{}
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() != "eno_tombstone_recovery_compositions_waiting" {
				continue
			}
			for _, m := range f.GetMetric() {
				out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
		return out
	}
	r.CompositionObserved(a, ports.CompositionState{HeldForReview: true})
	r.CompositionObserved(a, ports.CompositionState{HeldForReview: true})
	r.CompositionObserved(b, ports.CompositionState{HeldForReview: true, RecordingFailing: true})
	assert.Equal(t, map[string]float64{"HeldForReview": 2, "HandoffPending": 0, "RecordingFailing": 1}, waiting())
	r.CompositionObserved(a, ports.CompositionState{HandoffPending: true})
	assert.Equal(t, map[string]float64{"HeldForReview": 1, "HandoffPending": 1, "RecordingFailing": 1}, waiting())
	r.CompositionObserved(a, ports.CompositionState{})
	r.CompositionObserved(b, ports.CompositionState{})
	assert.Equal(t, map[string]float64{"HeldForReview": 0, "HandoffPending": 0, "RecordingFailing": 0}, waiting())
}

// TestOrphansRemainingSumsEachCompositionsLastCount: one total, no names, no lineage; each
// Composition counts its last report, and a forgotten one nothing.
func TestOrphansRemainingSumsEachCompositionsLastCount(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := metrics.New(reg)
	require.NoError(t, err)
	a := domain.CompositionRef{Namespace: "team-a", Name: "web"}
	b := domain.CompositionRef{Namespace: "team-b", Name: "web"}
	la, lb := domain.DefaultLineage(a.Namespace, a.Name), domain.DefaultLineage(b.Namespace, b.Name)
	r.CompositionObserved(a, ports.CompositionState{Lineage: la, OrphansRemaining: 3})
	r.CompositionObserved(b, ports.CompositionState{Lineage: lb, OrphansRemaining: 2})
	assert.Contains(t, scrape(t, reg), "eno_tombstone_recovery_orphans_remaining 5\n")
	r.CompositionObserved(a, ports.CompositionState{Lineage: la, OrphansRemaining: 1})
	assert.Contains(t, scrape(t, reg), "eno_tombstone_recovery_orphans_remaining 3\n")
	r.CompositionObserved(b, ports.CompositionState{})
	assert.Contains(t, scrape(t, reg), "eno_tombstone_recovery_orphans_remaining 1\n")
	r.CompositionObserved(a, ports.CompositionState{Lineage: la})
	assert.Contains(t, scrape(t, reg), "eno_tombstone_recovery_orphans_remaining 0\n")
}

// TestUnresolvedEntriesPerLineage: each lineage sums its Compositions' last counts; one
// forgotten counts nothing, and the series goes with the lineage's last Composition.
func TestUnresolvedEntriesPerLineage(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := metrics.New(reg)
	require.NoError(t, err)
	a := domain.CompositionRef{Namespace: "team-a", Name: "web"}
	b := domain.CompositionRef{Namespace: "team-a", Name: "web2"}
	c := domain.CompositionRef{Namespace: "team-c", Name: "web"}
	l, lc := domain.DefaultLineage(a.Namespace, a.Name), domain.DefaultLineage(c.Namespace, c.Name)
	gauge := func(l domain.Lineage, n string) string {
		return `eno_tombstone_recovery_unresolved_entries{lineage="` + l.String() + `"} ` + n + "\n"
	}
	r.CompositionObserved(a, ports.CompositionState{Lineage: l, Unresolved: 3})
	r.CompositionObserved(b, ports.CompositionState{Lineage: l, Unresolved: 2}) // an override shares it
	r.CompositionObserved(c, ports.CompositionState{Lineage: lc})
	body := scrape(t, reg)
	assert.Contains(t, body, gauge(l, "5"))
	assert.Contains(t, body, gauge(lc, "0"))
	r.CompositionObserved(a, ports.CompositionState{})
	assert.Contains(t, scrape(t, reg), gauge(l, "2"), "a forgotten Composition counts nothing")
	r.CompositionObserved(b, ports.CompositionState{Lineage: l, Unresolved: 0})
	assert.Contains(t, scrape(t, reg), gauge(l, "0"), "dismissed or gone")
	r.CompositionObserved(b, ports.CompositionState{})
	assert.NotContains(t, scrape(t, reg), `unresolved_entries{lineage="`+l.String(), "gone with the lineage's last Composition")
}

// TestLineageSeriesGoWithTheirLineage: a lineage's series stay while any Composition has it, and
// go with the last one: deleted, out of scope, or moved to another lineage.
func TestLineageSeriesGoWithTheirLineage(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := metrics.New(reg)
	require.NoError(t, err)
	a := domain.CompositionRef{Namespace: "team-a", Name: "web"}
	b := domain.CompositionRef{Namespace: "team-a", Name: "web2"}
	l, other := domain.DefaultLineage(a.Namespace, a.Name), domain.DefaultLineage("team-z", "z")
	series := func() []string {
		var out []string
		for _, name := range []string{"snapshot_chunks", "chunks_used_ratio", "largest_entry_bytes", "largest_entry_ratio", "unresolved_entries"} {
			if strings.Contains(scrape(t, reg), "eno_tombstone_recovery_"+name+`{lineage="`+l.String()+`"}`) {
				out = append(out, name)
			}
		}
		return out
	}
	all := []string{"snapshot_chunks", "chunks_used_ratio", "largest_entry_bytes", "largest_entry_ratio", "unresolved_entries"}
	r.ChunksUsed(l, 2, 64)
	r.LargestEntry(l, 100, 1000)
	r.CompositionObserved(a, ports.CompositionState{Lineage: l})
	r.CompositionObserved(b, ports.CompositionState{Lineage: l}) // an override shares it
	r.CompositionObserved(a, ports.CompositionState{})
	assert.Equal(t, all, series(), "team-a/web2 still has the lineage")
	r.CompositionObserved(b, ports.CompositionState{Lineage: other})
	assert.Empty(t, series(), "the last Composition of the lineage moved to another")

	r.ChunksUsed(l, 2, 64)
	r.CompositionObserved(a, ports.CompositionState{Lineage: l, HeldForReview: true})
	r.CompositionObserved(a, ports.CompositionState{})
	assert.Empty(t, series(), "the last Composition of the lineage is gone")
}

func TestCacheSizesAreReadAtScrapeTime(t *testing.T) {
	reg := prometheus.NewRegistry()
	n := 3
	require.NoError(t, metrics.RegisterCacheSizes(reg, map[string]func() int{
		"compositions": func() int { return n }, "inventory-secrets": func() int { return 7 },
	}))
	body := scrape(t, reg)
	assert.Contains(t, body, `eno_tombstone_recovery_cached_objects{cache="compositions"} 3`)
	assert.Contains(t, body, `eno_tombstone_recovery_cached_objects{cache="inventory-secrets"} 7`)
	n = 5
	assert.Contains(t, scrape(t, reg), `eno_tombstone_recovery_cached_objects{cache="compositions"} 5`)
}

func TestRegisteringTwiceFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := metrics.New(reg)
	require.NoError(t, err)
	_, err = metrics.New(reg)
	require.Error(t, err)
}

// TestBuildInfo: one series, set to 1, naming the running build.
func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := metrics.New(reg)
	require.NoError(t, err)
	b := buildinfo.Read()
	assert.Contains(t, scrape(t, reg),
		`eno_tombstone_recovery_build_info{goversion="`+b.GoVersion+`",revision="`+b.Revision+`",version="`+b.Version+`"} 1`)
}
