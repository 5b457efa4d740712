package runnable

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// untilSynced is the controller's CacheSyncTimeout: as long as it takes (informers retry a failed
// list with backoff, and log it), because a controller whose caches time out cannot start again.
const untilSynced = 100 * 365 * 24 * time.Hour

// setup builds, on the leader, the caches, the fleet index and the controller: what guestRunnable runs.
func (g *Guest) setup(ctx context.Context) ([]manager.Runnable, error) {
	comps, err := g.compositions(g.refHandler("composition", compositionRequest, &g.cachedComps))
	if err != nil {
		return nil, err
	}
	secrets, err := g.downstreamCache(ctx)
	if err != nil {
		return nil, err
	}
	// The fleet index runs on the leader only (design §6.3).
	fleet, err := k8s.NewFleetIndex(g.clients.dynamic)
	if err != nil {
		return nil, err
	}
	inScope := func(obj client.Object) (reconcile.Request, bool) {
		req, ok := secretRequest(obj)
		return req, ok && (g.s.Scope.Namespace == "" || req.Namespace == g.s.Scope.Namespace)
	}
	recoverPanic, skipNameCheck := true, true
	c, err := controller.NewUnmanaged("tombstone-recovery", controller.Options{ // in controller-runtime's logs and metrics
		Reconciler:              g.reconciler(func(ctx context.Context) (*app.Service, error) { return g.service(ctx, comps.lister, secrets, fleet) }),
		MaxConcurrentReconciles: g.s.Workers,
		ReconciliationTimeout:   g.s.ReconcileTimeout,
		CacheSyncTimeout:        untilSynced,
		RecoverPanic:            &recoverPanic,                                         // a backstop: reconciler recovers and counts its own
		SkipNameValidation:      &skipNameCheck,                                        // a test process holds several managers
		LogConstructor:          func(*reconcile.Request) logr.Logger { return g.log }, // app names the Composition
		NewQueue: func(_ string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			// The queue's workqueue_* metrics are named "compositions", as before controller-runtime.
			return workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: "compositions"})
		},
	})
	if err != nil {
		return nil, fmt.Errorf("building the controller: %w", err)
	}
	for _, src := range []source.Source{
		comps.source,
		source.Kind[client.Object](secrets.cache, secretObject(), g.refHandler("inventory secret", inScope, &g.cachedSecrets)),
		fleetSource{fleet},
	} {
		if err := c.Watch(src); err != nil {
			return nil, err
		}
	}
	synced := manager.RunnableFunc(func(ctx context.Context) error {
		inf, err := comps.informer(ctx)
		if err != nil {
			return fmt.Errorf("building the composition informer: %w", err)
		}
		// The operator's sign that the leader's caches hold full lists.
		if toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced, secrets.informer.HasSynced, fleet.HasSynced) {
			g.log.Info("caches synced", "workers", g.s.Workers, "inventoryNamespace", g.s.InventoryNamespace)
			g.ready.Store(true)
		} else {
			g.log.Info("stopped before the caches synced")
		}
		return nil
	})
	parts := []manager.Runnable{secrets.cache, manager.RunnableFunc(func(ctx context.Context) error { fleet.Run(ctx); return nil }), synced, c}
	if comps.run != nil { // standalone: an informer of its own
		parts = append(parts, comps.run)
	}
	return parts, nil
}

// fleetSource enqueues a Composition whose hand-off a slice threatens, on the event itself
// (design §6.2), and holds the controller's workers until the fleet index has synced.
type fleetSource struct{ fleet *k8s.FleetIndex }

func (s fleetSource) Start(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	return s.fleet.OnThreat(func(ref domain.CompositionRef) {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}})
	})
}

func (s fleetSource) WaitForSync(ctx context.Context) error {
	if !s.fleet.WaitForCacheSync(ctx) {
		return fmt.Errorf("the fleet index did not sync: %w", ctx.Err())
	}
	return nil
}

// reconciler calls app's Reconcile for a request. A panic in it (ours or a library's) becomes
// an error, logged with its stack and counted, and retried with backoff: a guest must never take
// its host down. The Service is built at the first reconcile, on the leader only, as it may read
// the control plane's name (design §3): a follower sends nothing; a failed read is retried.
func (g *Guest) reconciler(build func(context.Context) (*app.Service, error)) reconcile.Func {
	var mu sync.Mutex
	var svc *app.Service
	return func(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
		ref := domain.CompositionRef{Namespace: req.Namespace, Name: req.Name}
		defer func() {
			if p := recover(); p != nil {
				g.panicked("reconcile")
				pe := &PanicError{Value: p, Stack: debug.Stack()}
				logr.FromContextOrDiscard(ctx).Error(pe, "reconcile panicked; retrying with backoff", "composition", ref.String(), "stack", string(pe.Stack))
				err = pe
			}
		}()
		s, err := func() (s *app.Service, err error) {
			mu.Lock()
			defer mu.Unlock() // a panic in build must not leave every later reconcile blocked
			if svc == nil {
				svc, err = build(ctx)
			}
			return svc, err
		}()
		if err != nil {
			return reconcile.Result{}, err
		}
		out, err := s.Reconcile(ctx, ref)
		if err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{RequeueAfter: out.RequeueAfter}, nil
	}
}

// compositionRequest is the request for a Composition's event.
func compositionRequest(obj client.Object) (reconcile.Request, bool) {
	return reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}, true
}

// PanicError is a panic recovered from a reconcile.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// secretRequest is the request for the Composition an inventory Secret names in its
// annotations, so that a changed or removed chunk is re-recorded promptly.
func secretRequest(obj client.Object) (reconcile.Request, bool) {
	a := obj.GetAnnotations()
	var req reconcile.Request
	req.Namespace, req.Name = a[domain.AnnotationCompositionNamespace], a[domain.AnnotationCompositionName]
	return req, req.Namespace != "" && req.Name != ""
}

// refHandler enqueues requestFor(obj) on every event, and counts the cache's objects in n. A panic
// in it is recovered, logged and counted (client-go would re-panic it in the informer's goroutine,
// taking the host down); the event is dropped, and the next resync or change delivers the object again.
func (g *Guest) refHandler(what string, requestFor func(client.Object) (reconcile.Request, bool), n *atomic.Int64) handler.Funcs {
	enqueue := func(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], added int64) {
		n.Add(added)
		defer func() {
			if p := recover(); p != nil {
				g.panicked("event-handler")
				g.log.Error(fmt.Errorf("panic: %v", p), "an event handler panicked; the event is dropped, the next resync or change re-delivers it",
					"object", what, "stack", string(debug.Stack()))
			}
		}()
		if req, ok := requestFor(obj); ok {
			q.Add(req)
		}
	}
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		CreateFunc:  func(_ context.Context, e event.CreateEvent, q queue) { enqueue(e.Object, q, 1) },
		UpdateFunc:  func(_ context.Context, e event.UpdateEvent, q queue) { enqueue(e.ObjectNew, q, 0) },
		DeleteFunc:  func(_ context.Context, e event.DeleteEvent, q queue) { enqueue(e.Object, q, -1) },
		GenericFunc: func(_ context.Context, e event.GenericEvent, q queue) { enqueue(e.Object, q, 0) },
	}
}
