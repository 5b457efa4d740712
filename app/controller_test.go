package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports/portsfakes"
)

// runOnce runs the controller over one item and returns the queue once it was handled.
func runOnce(t *testing.T, f *fixture) *portsfakes.FakeWorkQueue {
	t.Helper()
	queue := &portsfakes.FakeWorkQueue{}
	queue.GetReturnsOnCall(0, f.comp.Ref(), false)
	queue.GetReturns(domain.CompositionRef{}, true)
	c, err := app.NewController(f.service(t), queue, 1)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx(t))
	done := make(chan struct{})
	go func() { c.Run(runCtx); close(done) }()
	require.Eventually(t, func() bool { return queue.DoneCallCount() == 1 }, timeout, tick)
	cancel()
	<-done
	return queue
}

// A panic at any port call of recovery or recording, ours or a library's, is recovered,
// counted and retried with backoff: it never reaches the host process.
func TestControllerRecoversPanics(t *testing.T) {
	boom := func() { panic("boom") }
	recovering := func(t *testing.T) *fixture {
		f := recoveryFixture(t, resources(9), resources(9)[:7])
		f.cfg.MaxTombstoneFraction = 1
		return f
	}
	recording := func(t *testing.T) *fixture { return newFixture(t) }
	for name, tt := range map[string]struct {
		fixture func(*testing.T) *fixture
		inject  func(f *fixture)
	}{
		"reading the composition": {recording, func(f *fixture) {
			f.comps.GetCompositionCalls(func(context.Context, domain.CompositionRef) (domain.Composition, error) {
				boom()
				return domain.Composition{}, nil
			})
		}},
		"listing the history": {recovering, func(f *fixture) {
			f.store.ListChunksCalls(func(context.Context, domain.Lineage) ([]domain.ChunkSecret, error) { boom(); return nil, nil })
		}},
		"reading a slice": {recovering, func(f *fixture) {
			f.reader.GetSliceCalls(func(context.Context, string, string) (domain.ResourceSlice, error) {
				boom()
				return domain.ResourceSlice{}, nil
			})
		}},
		"reading downstream": {recovering, func(f *fixture) {
			f.downstream.ObserveObjectCalls(func(context.Context, domain.Entry) (domain.Observation, error) {
				boom()
				return domain.Observation{}, nil
			})
		}},
		"the live recheck": {recovering, func(f *fixture) {
			f.guard.LiveCompositionCalls(func(context.Context, domain.CompositionRef) (domain.Composition, error) {
				boom()
				return domain.Composition{}, nil
			})
		}},
		"creating a recovery slice": {recovering, func(f *fixture) {
			f.sink.CreateRecoverySliceCalls(func(context.Context, domain.Composition, domain.Handoff, int) (string, error) { boom(); return "", nil })
		}},
		"naming a recovery slice": {recovering, func(f *fixture) {
			f.sink.AppendRecoverySliceCalls(func(context.Context, domain.Composition, string) (domain.Composition, error) {
				boom()
				return domain.Composition{}, nil
			})
		}},
		"the decision": {recovering, func(f *fixture) {
			f.decisions.WriteDecisionCalls(func(context.Context, domain.Composition, domain.Decision) error { boom(); return nil })
		}},
		"the resynthesis request": {recovering, func(f *fixture) {
			f.sink.RequestResynthesisCalls(func(context.Context, domain.Composition) error { boom(); return nil })
		}},
		"recording's cache": {recording, func(f *fixture) {
			f.store.ListCachedChunksCalls(func(context.Context, domain.Lineage) ([]domain.ChunkSecret, error) { boom(); return nil, nil })
		}},
		"writing a chunk": {recording, func(f *fixture) {
			f.store.CreateChunkCalls(func(context.Context, domain.ChunkSecret) (domain.ChunkSecret, error) {
				boom()
				return domain.ChunkSecret{}, nil
			})
		}},
		"an event": {recovering, func(f *fixture) {
			f.events.onEvent = boom
		}},
	} {
		t.Run(name, func(t *testing.T) {
			f := tt.fixture(t)
			tt.inject(f)
			queue := runOnce(t, f)
			require.Equal(t, 1, queue.AddRateLimitedCallCount(), "retried with backoff")
			assert.Zero(t, queue.ForgetCallCount())
			require.Equal(t, 1, f.metrics.PanickedCallCount())
			assert.Equal(t, "reconcile", f.metrics.PanickedArgsForCall(0))
			require.Equal(t, 1, f.metrics.ReconcileDoneCallCount(), "the reconcile is still observed")
		})
	}
}

// A reconcile that hangs at a port call is cancelled at the deadline and retried with backoff.
func TestControllerBoundsEveryReconcile(t *testing.T) {
	hang := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	for name, inject := range map[string]func(f *fixture){
		"the live recheck": func(f *fixture) {
			f.guard.LiveCompositionCalls(func(ctx context.Context, _ domain.CompositionRef) (domain.Composition, error) {
				return domain.Composition{}, hang(ctx)
			})
		},
		"reading downstream": func(f *fixture) {
			f.downstream.ObserveObjectCalls(func(ctx context.Context, _ domain.Entry) (domain.Observation, error) {
				return domain.Observation{}, hang(ctx)
			})
		},
		"naming a recovery slice": func(f *fixture) {
			f.sink.AppendRecoverySliceCalls(func(ctx context.Context, _ domain.Composition, _ string) (domain.Composition, error) {
				return domain.Composition{}, hang(ctx)
			})
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := recoveryFixture(t, resources(9), resources(9)[:7])
			f.cfg.MaxTombstoneFraction = 1
			f.cfg.ReconcileTimeout = 50 * time.Millisecond
			inject(f)
			queue := runOnce(t, f)
			assert.Equal(t, 1, queue.AddRateLimitedCallCount())
			assert.Zero(t, f.metrics.PanickedCallCount())
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

func TestControllerForgetsSuccessAndRequeuesFailure(t *testing.T) {
	f := newFixture(t)
	okRef := domain.CompositionRef{Namespace: ns, Name: name}
	badRef := domain.CompositionRef{Namespace: ns, Name: "broken"}
	f.comps.GetCompositionCalls(func(_ context.Context, r domain.CompositionRef) (domain.Composition, error) {
		if r == badRef {
			return domain.Composition{}, errors.New("500 internal error")
		}
		return f.comp, nil
	})
	queue := &portsfakes.FakeWorkQueue{}
	queue.GetReturnsOnCall(0, okRef, false)
	queue.GetReturnsOnCall(1, badRef, false)
	queue.GetReturns(domain.CompositionRef{}, true)
	c, err := app.NewController(f.service(t), queue, 1)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx(t))
	done := make(chan struct{})
	go func() { c.Run(runCtx); close(done) }()
	require.Eventually(t, func() bool { return queue.DoneCallCount() == 2 }, timeout, tick)
	cancel()
	<-done
	assert.Equal(t, 1, queue.ForgetCallCount())
	assert.Equal(t, okRef, queue.ForgetArgsForCall(0))
	assert.Equal(t, 1, queue.AddRateLimitedCallCount())
	assert.Equal(t, badRef, queue.AddRateLimitedArgsForCall(0))
	assert.Equal(t, 1, queue.ShutDownCallCount())
}
