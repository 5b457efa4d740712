package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/buildinfo"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

const namespace = "eno_tombstone_recovery"

var _ ports.Metrics = (*Recorder)(nil)

// Recorder holds the product's collectors.
type Recorder struct {
	snapshots   *prometheus.CounterVec
	chunkWrites *prometheus.CounterVec
	decisions   *prometheus.CounterVec
	refusals    *prometheus.CounterVec
	reconciles  *prometheus.HistogramVec
	chunks      *prometheus.GaugeVec
	chunksUsed  *prometheus.GaugeVec
	entryBytes  *prometheus.GaugeVec
	entryRatio  *prometheus.GaugeVec
	alerts      *prometheus.CounterVec
	panics      *prometheus.CounterVec
	waiting     *prometheus.GaugeVec
	orphans     prometheus.Gauge
	unresolved  *prometheus.GaugeVec
	build       *prometheus.GaugeVec

	mu     sync.Mutex
	states map[domain.CompositionRef]ports.CompositionState
}

// The label values every series starts with, so that alerts and dashboards see it (at 0) before the first event.
var (
	reconcileResults = []string{"success", "error"}
	panicSites       = []string{"reconcile", "event-handler"}
	alertReasons     = []string{"CascadingKind", "HandoffDisarmed", "OrphansRemain"}
	waitingStates    = []string{"HeldForReview", "HandoffPending", "RecordingFailing"}
)

// New registers the collectors on reg.
func New(reg prometheus.Registerer) (*Recorder, error) {
	r := &Recorder{
		snapshots:   counterVec("snapshots_total", "Recording passes by result: written (at least one chunk written) or unchanged.", "result"),
		chunkWrites: counterVec("chunk_writes_total", "Inventory chunk Secret outcomes: created, updated, unchanged, conflict, alreadyExists, refused, error.", "result"),
		decisions:   counterVec("decisions_total", "Recovery decisions written, by outcome and reason.", "outcome", "reason"),
		refusals:    counterVec("refusals_total", "Refusals by reason: InventoryInvalid reasons, slice problems, foreign Secrets, lineage collisions, invalid lineages, held deletions.", "reason"),
		reconciles: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "reconcile_duration_seconds",
			Help:    "Duration of one reconcile, by result.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"result"}),
		chunks:     gaugeVec("snapshot_chunks", "Chunk Secrets a lineage's inventory takes: its recorded snapshot's, or what it would take when over --max-chunks.", "lineage"),
		chunksUsed: gaugeVec("chunks_used_ratio", "snapshot_chunks / --max-chunks, per lineage: over 1 recording refuses InventoryTooLarge. Chunks are filled close to --max-chunk-bytes by design, so a chunk's own size says nothing.", "lineage"),
		entryBytes: gaugeVec("largest_entry_bytes", "Bytes of a chunk holding the largest entry of a lineage's inventory alone, set whenever recording builds the inventory (not on the fast path).", "lineage"),
		entryRatio: gaugeVec("largest_entry_ratio", "largest_entry_bytes / --max-chunk-bytes, per lineage: over 1 the entry cannot be recorded, however many chunks are allowed.", "lineage"),
		alerts:     counterVec("tombstone_alerts_total", "Orphans reported to an operator instead of Eno, by reason: CascadingKind (a decision kept an orphan whose deletion cascades, never handed to Eno: its Warning names the kubectl delete to run after looking), HandoffDisarmed (another composition produces them, so the hand-off was disarmed), OrphansRemain (still present after Eno's carrying synthesis was Ready).", "reason"),
		panics:     counterVec("panics_total", "Panics recovered before they reached the host process, by where: reconcile or event-handler. Each reconcile that panicked is retried with backoff.", "where"),
		waiting:    gaugeVec("compositions_waiting", "Compositions this replica last saw waiting, by state: HeldForReview (the deletion guard holds the recovery), HandoffPending (decided Recovered, not yet carried by Eno), RecordingFailing (the last recording pass failed or was refused).", "state"),
		// One total, no names and no lineage label, so a fleet's cardinality stays.
		orphans:    prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "orphans_remaining", Help: "Objects handed to Eno as tombstones still present after its carrying synthesis was Ready, summed over the Compositions this replica reconciles: each one's last \"did Eno do it?\" count, made when it records the carrying synthesis, counted again on each reconcile while above 0 (a manual cleanup shows), 0 once it records a synthesis that carried no hand-off, gone with the Composition. inspect --all names them."}),
		unresolved: gaugeVec("unresolved_entries", "Objects a lineage's snapshot carries for a person (kept by a recovery, left by Eno or by a refused history, until gone or dismissed; inspect lists them, dismiss clears them), summed over its Compositions this replica reconciles. One series per lineage of a living Composition, gone with the last, as snapshot_chunks: bounded by the Compositions opted in.", "lineage"),
		build:      gaugeVec("build_info", "Always 1; its labels name the running build of tombstone-recovery: version, revision (unknown when nothing recorded it) and goversion. Inside eno-reconciler, version is the module's as the host was built with it ((devel) for a local replacement).", "version", "revision", "goversion"),
		states:     map[domain.CompositionRef]ports.CompositionState{},
	}
	for _, c := range []prometheus.Collector{r.snapshots, r.chunkWrites, r.decisions, r.refusals, r.reconciles, r.chunks, r.chunksUsed, r.entryBytes, r.entryRatio, r.alerts, r.panics, r.waiting, r.orphans, r.unresolved, r.build} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for vec, values := range map[*prometheus.MetricVec][]string{r.reconciles.MetricVec: reconcileResults, r.panics.MetricVec: panicSites,
		r.alerts.MetricVec: alertReasons, r.waiting.MetricVec: waitingStates} {
		for _, v := range values {
			_, _ = vec.GetMetricWithLabelValues(v)
		}
	}
	build := buildinfo.Read()
	r.build.WithLabelValues(build.Version, build.Revision, build.GoVersion).Set(1)
	return r, nil
}

// counterVec and gaugeVec are collectors of the product's namespace.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

func (r *Recorder) ChunkWrite(result string) { r.chunkWrites.WithLabelValues(result).Inc() }

func (r *Recorder) SnapshotRecorded(written bool) {
	result := "unchanged"
	if written {
		result = "written"
	}
	r.snapshots.WithLabelValues(result).Inc()
}

func (r *Recorder) DecisionMade(o domain.Outcome, reason string) {
	r.decisions.WithLabelValues(o.String(), reason).Inc()
}

// CompositionObserved keeps each Composition's last state and sets the gauges; a lineage no one has loses its series.
func (r *Recorder) CompositionObserved(ref domain.CompositionRef, state ports.CompositionState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	before := r.states[ref]
	if state == (ports.CompositionState{}) {
		delete(r.states, ref)
	} else {
		r.states[ref] = state
	}
	var waiting [3]int // by waitingStates
	orphans := 0
	for _, s := range r.states {
		for i, on := range []bool{s.HeldForReview, s.HandoffPending, s.RecordingFailing} {
			if on {
				waiting[i]++
			}
		}
		orphans += s.OrphansRemaining
	}
	for i, state := range waitingStates {
		r.waiting.WithLabelValues(state).Set(float64(waiting[i]))
	}
	r.orphans.Set(float64(orphans))
	for _, l := range []domain.Lineage{before.Lineage, state.Lineage} {
		kept, has := 0, false
		for _, s := range r.states {
			if s.Lineage == l && !l.IsZero() {
				kept, has = kept+s.Unresolved, true
			}
		}
		switch {
		case has:
			r.unresolved.WithLabelValues(l.String()).Set(float64(kept))
		case !l.IsZero(): // no Composition has l any more
			for _, g := range []*prometheus.GaugeVec{r.chunks, r.chunksUsed, r.entryBytes, r.entryRatio, r.unresolved} {
				g.DeleteLabelValues(l.String())
			}
		}
	}
}

func (r *Recorder) Refusal(reason string) { r.refusals.WithLabelValues(reason).Inc() }

func (r *Recorder) Panicked(where string) { r.panics.WithLabelValues(where).Inc() }

func (r *Recorder) TombstoneAlert(reason string, n int) {
	r.alerts.WithLabelValues(reason).Add(float64(n))
}

func (r *Recorder) ChunksUsed(l domain.Lineage, chunks, maxChunks int) {
	r.chunks.WithLabelValues(l.String()).Set(float64(chunks))
	if maxChunks > 0 {
		r.chunksUsed.WithLabelValues(l.String()).Set(float64(chunks) / float64(maxChunks))
	}
}

func (r *Recorder) LargestEntry(l domain.Lineage, entryBytes, maxChunkBytes int) {
	r.entryBytes.WithLabelValues(l.String()).Set(float64(entryBytes))
	if maxChunkBytes > 0 {
		r.entryRatio.WithLabelValues(l.String()).Set(float64(entryBytes) / float64(maxChunkBytes))
	}
}

func (r *Recorder) ReconcileDone(d time.Duration, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	r.reconciles.WithLabelValues(result).Observe(d.Seconds())
}

// RegisterCacheSizes exports each informer cache's size at scrape time: eno_tombstone_recovery_cached_objects{cache}.
func RegisterCacheSizes(reg prometheus.Registerer, sizes map[string]func() int) error {
	for name, size := range sizes {
		g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace, Name: "cached_objects",
			Help:        "Objects held by an informer cache: compositions, or inventory-secrets (metadata only).",
			ConstLabels: prometheus.Labels{"cache": name},
		}, func() float64 { return float64(size()) })
		if err := reg.Register(g); err != nil {
			return err
		}
	}
	return nil
}
