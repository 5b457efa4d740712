package app_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
	"github.com/Azure/eno-tombstone-recovery/ports/portsfakes"
)

// A HeldForReview decision ends the reconcile that wrote it: recording is not even evaluated,
// and the old snapshot stays as it is (design §6.1).
func TestReconcileHeldStopsBeforeRecording(t *testing.T) {
	rs := resources(9)
	f := recoveryFixture(t, rs, rs[:3]) // 6 of 9 orphaned: over the guard of 0.5
	f.comp.Synthesis.Ready = true
	res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	require.NotNil(t, res.Recovery)
	assert.Equal(t, domain.OutcomeHeldForReview, res.Recovery.Plan.Decision.Outcome)
	assert.Equal(t, domain.OutcomeHeldForReview, writtenDecision(t, f).Outcome)
	assert.Nil(t, res.Recording)
	assert.Nil(t, res.Skipped, "recording was not evaluated, so it was not skipped either")
	assert.Zero(t, f.store.ListCachedChunksCallCount(), "not even the recording fast path ran")
	assert.Zero(t, f.writes())
	assert.Zero(t, f.sink.PublishTombstonesCallCount())
}

// Each run condition that fails skips the whole reconcile: no error (nothing to retry), no
// read of Secrets or slices, no write, no event (only an invalid lineage gets one).
func TestReconcileSkipsIneligibleCompositions(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(f *fixture)
		reason domain.IneligibleReason
	}{
		{"operator disabled", func(f *fixture) { f.cfg.Enabled = false }, domain.IneligibleDisabled},
		{"namespace out of scope", func(f *fixture) { f.cfg.Scope.Namespace = "team-b" }, domain.IneligibleOutOfScope},
		{"labels out of scope", func(f *fixture) { f.cfg.Scope.Selector = onlyLabel{"shard", "2"} }, domain.IneligibleOutOfScope},
		{"not opted in", func(f *fixture) { delete(f.comp.Annotations, domain.AnnotationOptIn) }, domain.IneligibleNotOptedIn},
		{"opt-in with another value", func(f *fixture) { f.comp.Annotations[domain.AnnotationOptIn] = "Enabled" }, domain.IneligibleNotOptedIn},
		{"being deleted", func(f *fixture) { f.comp.Deleting = true }, domain.IneligibleDeleting},
		{"no synthesis", func(f *fixture) { f.comp.Synthesis = nil }, domain.IneligibleNotSynthesized},
		{"synthesis without a UUID", func(f *fixture) { f.comp.Synthesis.UUID = "" }, domain.IneligibleNotSynthesized},
		{"synthesis not synthesized yet", func(f *fixture) { f.comp.Synthesis.Synthesized = time.Time{} }, domain.IneligibleNotSynthesized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			delete(f.comp.Annotations, domain.AnnotationDecision) // recovery would run if eligible
			tc.mutate(f)
			res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
			require.NoError(t, err)
			require.NotNil(t, res.Skipped)
			assert.Equal(t, tc.reason, res.Skipped.Reason)
			assert.Nil(t, res.Recovery)
			assert.Nil(t, res.Recording)
			assert.Zero(t, f.store.ListChunksCallCount())
			assert.Zero(t, f.store.ListCachedChunksCallCount())
			assert.Zero(t, f.reader.GetSliceCallCount())
			assert.Zero(t, f.guard.LiveCompositionCallCount())
			assert.Zero(t, f.writes())
			assert.Zero(t, f.decisions.WriteDecisionCallCount())
			assert.Zero(t, f.events.EventCallCount())
			assert.Zero(t, f.metrics.RefusalCallCount())
		})
	}
}

// onlyLabel selects Compositions carrying one label value.
type onlyLabel struct{ key, value string }

func (s onlyLabel) Matches(labels map[string]string) bool { return labels[s.key] == s.value }

func TestConfigValidateBounds(t *testing.T) {
	below := func(x float64) float64 { return math.Nextafter(x, math.Inf(-1)) }
	above := func(x float64) float64 { return math.Nextafter(x, math.Inf(1)) }
	cases := []struct {
		name    string
		mutate  func(c *app.Config)
		setting *app.Setting // nil: valid
		got     string
	}{
		{"the defaults", func(*app.Config) {}, nil, ""},
		{"inventory namespace empty", func(c *app.Config) { c.InventoryNamespace = "" }, &app.SettingInventoryNamespace, ""},
		{"inventory namespace of one character", func(c *app.Config) { c.InventoryNamespace = "x" }, nil, ""},
		{"max chunk bytes 1", func(c *app.Config) { c.MaxChunkBytes = 1 }, &app.SettingMaxChunkBytes, "1"},
		{"max chunk bytes 2", func(c *app.Config) { c.MaxChunkBytes = 2 }, nil, ""},
		{"max chunk bytes at the Secret limit", func(c *app.Config) { c.MaxChunkBytes = domain.SecretDataLimit }, nil, ""},
		{"max chunk bytes one over the Secret limit", func(c *app.Config) { c.MaxChunkBytes = domain.SecretDataLimit + 1 }, &app.SettingMaxChunkBytes, "1048577"},
		{"max chunks 0", func(c *app.Config) { c.MaxChunks = 0 }, &app.SettingMaxChunks, "0"},
		{"max chunks 1", func(c *app.Config) { c.MaxChunks = 1 }, nil, ""},
		{"fraction just below 0", func(c *app.Config) { c.MaxTombstoneFraction = below(0) }, &app.SettingMaxTombstoneFraction, "-5e-324"},
		{"fraction 0", func(c *app.Config) { c.MaxTombstoneFraction = 0 }, nil, ""},
		{"fraction 1 (the guard disabled)", func(c *app.Config) { c.MaxTombstoneFraction = 1 }, nil, ""},
		{"fraction just above 1", func(c *app.Config) { c.MaxTombstoneFraction = above(1) }, &app.SettingMaxTombstoneFraction, "1.0000000000000002"},
		{"fraction NaN", func(c *app.Config) { c.MaxTombstoneFraction = math.NaN() }, &app.SettingMaxTombstoneFraction, "NaN"},
		{"fraction +Inf", func(c *app.Config) { c.MaxTombstoneFraction = math.Inf(1) }, &app.SettingMaxTombstoneFraction, "+Inf"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := app.DefaultConfig()
			tc.mutate(&c)
			err := c.Validate()
			if tc.setting == nil {
				require.NoError(t, err)
				return
			}
			var se *app.SettingError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, *tc.setting, se.Setting)
			assert.Equal(t, tc.got, se.Got)
			assert.NotEmpty(t, se.Rule)
			assert.Contains(t, err.Error(), tc.setting.String())
		})
	}
}

func TestNewControllerRefusesBadArguments(t *testing.T) {
	svc := newFixture(t).service(t)
	queue := &portsfakes.FakeWorkQueue{}
	for _, tc := range []struct {
		name    string
		svc     *app.Service
		queue   *portsfakes.FakeWorkQueue
		workers int
	}{
		{"nil service", nil, queue, 1},
		{"nil queue", svc, nil, 1},
		{"no workers", svc, queue, 0},
		{"negative workers", svc, queue, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c *app.Controller
			var err error
			if tc.queue == nil { // an untyped nil, not a nil *FakeWorkQueue
				c, err = app.NewController(tc.svc, nil, tc.workers)
			} else {
				c, err = app.NewController(tc.svc, tc.queue, tc.workers)
			}
			require.Error(t, err)
			assert.Nil(t, c)
		})
	}
	c, err := app.NewController(svc, queue, 1)
	require.NoError(t, err)
	assert.NotNil(t, c)
	assert.Zero(t, len(queue.Invocations()), "the constructor touches nothing")
}

// Each reconcile reports what the Composition waits on, for the gauges behind the alerts: held
// for review, recording failing, and nothing (a Composition gone or recorded) forgets it.
func TestReconcileReportsWhatTheCompositionWaitsOn(t *testing.T) {
	lastObserved := func(t *testing.T, f *fixture) ports.CompositionState {
		t.Helper()
		require.Equal(t, 1, f.metrics.CompositionObservedCallCount())
		ref, state := f.metrics.CompositionObservedArgsForCall(0)
		assert.Equal(t, f.comp.Ref(), ref)
		return state
	}
	t.Run("held for review", func(t *testing.T) {
		rs := resources(9)
		f := recoveryFixture(t, rs, rs[:3])
		f.comp.Synthesis.Ready = true
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, ports.CompositionState{HeldForReview: true}, lastObserved(t, f))
	})
	t.Run("recording fails", func(t *testing.T) {
		f := newFixture(t)
		f.store.CreateChunkReturns(domain.ChunkSecret{}, errors.New("etcdserver: request timed out"))
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.Error(t, err)
		assert.Equal(t, ports.CompositionState{RecordingFailing: true}, lastObserved(t, f))
	})
	t.Run("recorded", func(t *testing.T) {
		f := newFixture(t)
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, ports.CompositionState{}, lastObserved(t, f))
	})
	t.Run("gone", func(t *testing.T) {
		f := newFixture(t)
		f.comps.GetCompositionReturns(domain.Composition{}, ports.ErrNotFound)
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, ports.CompositionState{}, lastObserved(t, f))
	})
	t.Run("not read", func(t *testing.T) {
		f := newFixture(t)
		f.comps.GetCompositionReturns(domain.Composition{}, errors.New("connection refused"))
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.Error(t, err)
		assert.Zero(t, f.metrics.CompositionObservedCallCount(), "an unknown state keeps the last one")
	})
}
