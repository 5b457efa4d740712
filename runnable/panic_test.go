package runnable

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports/portsfakes"
)

// capture is a logger that keeps its lines.
func capture(lines *[]string) logr.Logger {
	return funcr.New(func(prefix, args string) { *lines = append(*lines, args) }, funcr.Options{})
}

// TestReconcilePanicBecomesAnError: a panic inside app's Reconcile is recovered by the guest's
// reconciler, logged with its stack, counted, and returned as an error, which controller-runtime
// retries with backoff. It never reaches the host.
func TestReconcilePanicBecomesAnError(t *testing.T) {
	reader := &portsfakes.FakeCompositionReader{}
	reader.GetCompositionStub = func(context.Context, domain.CompositionRef) (domain.Composition, error) { panic("boom") }
	m := &portsfakes.FakeMetrics{}
	svc, err := app.New(app.DefaultConfig(), app.Deps{
		Compositions: reader, Live: &portsfakes.FakeLiveReader{}, Slices: &portsfakes.FakeSliceReader{}, Fleet: &portsfakes.FakeFleetIndex{},
		Store: &portsfakes.FakeSnapshotStore{}, Sink: &portsfakes.FakeTombstoneSink{}, Downstream: &portsfakes.FakeDownstreamReader{},
		Decisions: &portsfakes.FakeDecisionWriter{}, Metrics: m,
	})
	require.NoError(t, err)
	var lines []string
	g := &Guest{metrics: m, log: capture(&lines)}
	ctx := logr.NewContext(t.Context(), g.log)

	res, err := g.reconciler(func(context.Context) (*app.Service, error) { return svc, nil })(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "c"}})
	var pe *PanicError
	require.True(t, errors.As(err, &pe), "got %v", err)
	assert.Equal(t, "boom", pe.Value)
	assert.Equal(t, reconcile.Result{}, res)
	require.Equal(t, 1, m.PanickedCallCount())
	assert.Equal(t, "reconcile", m.PanickedArgsForCall(0))
	require.NotEmpty(t, lines)
	assert.Contains(t, strings.Join(lines, "\n"), `"reconcile panicked; retrying with backoff"`)
	assert.Contains(t, strings.Join(lines, "\n"), `"stack"`)
}

// TestEventHandlerPanicIsRecovered: controller-runtime's RecoverPanic covers Reconcile only; a
// panic in an event handler would be re-panicked by client-go in the informer's goroutine and
// end the host. The guest's handlers recover it, log and count it, and drop the event.
func TestEventHandlerPanicIsRecovered(t *testing.T) {
	m := &portsfakes.FakeMetrics{}
	var lines []string
	g := &Guest{metrics: m, log: capture(&lines)}
	h := g.refHandler("composition", func(client.Object) (reconcile.Request, bool) { panic("handler boom") }, new(atomic.Int64))
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	obj := &unstructured.Unstructured{}
	obj.SetNamespace("ns")
	obj.SetName("c")

	assert.NotPanics(t, func() {
		h.Create(t.Context(), event.CreateEvent{Object: obj}, q)
		h.Update(t.Context(), event.UpdateEvent{ObjectOld: obj, ObjectNew: obj}, q)
		h.Delete(t.Context(), event.DeleteEvent{Object: obj}, q)
		h.Generic(t.Context(), event.GenericEvent{Object: obj}, q)
	})
	assert.Equal(t, 0, q.Len(), "the events are dropped")
	assert.Equal(t, 4, m.PanickedCallCount())
	assert.Equal(t, "event-handler", m.PanickedArgsForCall(0))
	assert.Contains(t, strings.Join(lines, "\n"), "handler boom")
}

// TestHandlersMapEventsToCompositions: a Composition's event enqueues it; an inventory Secret's
// enqueues the Composition its annotations name, and one without them nothing. The handlers
// count each cache's objects.
func TestHandlersMapEventsToCompositions(t *testing.T) {
	g := &Guest{log: logr.Discard()}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	comp := &unstructured.Unstructured{}
	comp.SetNamespace("ns")
	comp.SetName("c")
	g.refHandler("composition", compositionRequest, &g.cachedComps).Create(t.Context(), event.CreateEvent{Object: comp}, q)

	secret := &unstructured.Unstructured{}
	secret.SetNamespace("kube-system")
	secret.SetName("chunk")
	secrets := g.refHandler("inventory secret", secretRequest, &g.cachedSecrets)
	secrets.Create(t.Context(), event.CreateEvent{Object: secret}, q)
	secrets.Create(t.Context(), event.CreateEvent{Object: secret.DeepCopy()}, q)
	secret.SetAnnotations(map[string]string{domain.AnnotationCompositionNamespace: "ns2", domain.AnnotationCompositionName: "c2"})
	secrets.Update(t.Context(), event.UpdateEvent{ObjectOld: secret, ObjectNew: secret}, q)
	secrets.Delete(t.Context(), event.DeleteEvent{Object: secret}, q)
	assert.Equal(t, int64(1), g.cachedComps.Load())
	assert.Equal(t, int64(1), g.cachedSecrets.Load())

	require.Equal(t, 2, q.Len(), "the update and delete of the same Secret are one request")
	first, _ := q.Get()
	second, _ := q.Get()
	assert.Equal(t, types.NamespacedName{Namespace: "ns", Name: "c"}, first.NamespacedName)
	assert.Equal(t, types.NamespacedName{Namespace: "ns2", Name: "c2"}, second.NamespacedName)
}

// TestCompositionOutsideTheScopeIsNotFound: an inventory Secret of another shard can name a
// Composition outside the cache's namespace; reading it is NotFound (nothing to do), as a
// client-go lister says, not the namespaced cache's error retried forever.
func TestCompositionOutsideTheScopeIsNotFound(t *testing.T) {
	l := cachedCompositions{scope: "shard-a"} // no cache: reading it would panic
	_, err := l.ByNamespace("shard-b").Get("web")
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
	objs, err := l.ByNamespace("shard-b").List(labels.Everything())
	require.NoError(t, err)
	assert.Empty(t, objs)

	req, ok := secretRequest(&unstructured.Unstructured{})
	assert.False(t, ok, "a Secret naming no Composition enqueues nothing: %v", req)
}

// TestGuestFailuresNeverReachTheHost: a manager stops when a runnable's Start returns an error,
// so the guest's one runnable logs and counts an error or panic of its setup or of any part it
// runs, stops the other parts, marks the guest unready, and returns nil to the host.
func TestGuestFailuresNeverReachTheHost(t *testing.T) {
	for name, fail := range map[string]func(context.Context) error{
		"error": func(context.Context) error { return errors.New("cache failed") },
		"panic": func(context.Context) error { panic("cache boom") },
	} {
		for _, in := range []string{"setup", "a part"} {
			t.Run(name+" in "+in, func(t *testing.T) {
				m := &portsfakes.FakeMetrics{}
				var lines []string
				g := &Guest{metrics: m, log: capture(&lines), added: true}
				g.ready.Store(true)
				r := guestRunnable{g: g, setup: func(ctx context.Context) ([]manager.Runnable, error) {
					if in == "setup" {
						return nil, fail(ctx)
					}
					waits := manager.RunnableFunc(func(ctx context.Context) error { <-ctx.Done(); return nil })
					return []manager.Runnable{waits, manager.RunnableFunc(fail)}, nil
				}}
				require.True(t, r.NeedLeaderElection(), "the guest runs on the leader only")
				require.NoError(t, g.ReadyzCheck(nil))

				done := make(chan error, 1)
				go func() { done <- r.Start(t.Context()) }()
				select {
				case err := <-done:
					assert.NoError(t, err, "nothing of the guest returns an error to the host")
				case <-time.After(10 * time.Second):
					t.Fatal("a failed part did not stop the others")
				}
				assert.Error(t, g.ReadyzCheck(nil), "a failed guest is not ready")
				assert.Contains(t, strings.Join(lines, "\n"), "the tombstone recovery controller stopped until the process restarts")
				assert.Equal(t, name == "panic", m.PanickedCallCount() == 1)
			})
		}
	}
}

// TestBuildPanicReleasesTheLock: a panic while building the Service becomes an error, and the
// next reconcile still runs (builds again) instead of blocking on a lock left held.
func TestBuildPanicReleasesTheLock(t *testing.T) {
	m := &portsfakes.FakeMetrics{}
	g := &Guest{metrics: m, log: logr.Discard()}
	builds := 0
	rec := g.reconciler(func(context.Context) (*app.Service, error) {
		builds++
		if builds == 1 {
			panic("build")
		}
		return nil, errors.New("unreachable control plane")
	})
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "c"}}
	_, err := rec(t.Context(), req)
	var pe *PanicError
	require.True(t, errors.As(err, &pe), "got %v", err)
	done := make(chan error, 1)
	go func() { _, err := rec(t.Context(), req); done <- err }()
	select {
	case err := <-done:
		require.EqualError(t, err, "unreachable control plane")
	case <-time.After(10 * time.Second):
		t.Fatal("the second reconcile blocked on the lock the panicking build held")
	}
	assert.Equal(t, 2, builds)
}
