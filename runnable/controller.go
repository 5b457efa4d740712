package runnable

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// controllerName names the controller in controller-runtime's logs and metrics.
const controllerName = "tombstone-recovery"

// queueName names the work queue in the workqueue_* metrics, as before controller-runtime.
const queueName = "compositions"

// attemptRun is what one attempt runs: the two caches and an unmanaged controller-runtime
// controller over them.
type attemptRun struct {
	comps      cache.Cache
	downstream cluster.Cluster
	fleet      *k8s.FleetIndex
	ctl        controller.Controller
}

// build makes one attempt's caches, adapters, Service and controller; it starts nothing.
func (g *Guest) build(ctx context.Context) (*attemptRun, error) {
	comps, err := g.compositionCache()
	if err != nil {
		return nil, fmt.Errorf("building the composition cache: %w", err)
	}
	ds, err := g.downstreamCluster()
	if err != nil {
		return nil, fmt.Errorf("building the downstream cluster: %w", err)
	}
	compInf, err := comps.GetInformer(ctx, compositionObject(), cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("building the composition informer: %w", err)
	}
	secrets, err := newCachedSecrets(ctx, ds.GetCache(), g.s.config.InventoryNamespace)
	if err != nil {
		return nil, err
	}
	// The fleet index lives as long as the attempt, on the leader only (design §6.3).
	fleet, err := k8s.NewFleetIndex(g.clients.dynamic, g.clients.cpMeta)
	if err != nil {
		return nil, err
	}
	lister := compositionLister{reader: comps, scope: g.s.CompositionNamespace}
	controlPlane := g.s.config.ControlPlane
	if controlPlane == "" {
		if controlPlane, err = k8s.ControlPlaneID(ctx, g.clients.cpMeta); err != nil {
			return nil, err
		}
	}
	svc, err := g.service(lister, secrets, fleet, controlPlane)
	if err != nil {
		return nil, err
	}
	g.sizes.Store(&cacheSizes{
		compositions: func() int { return lister.count(compInf.HasSynced) },
		secrets:      secrets.count,
	})
	recoverPanic, skipNameCheck := true, true
	ctl, err := controller.NewTypedUnmanaged(controllerName, controller.TypedOptions[reconcile.Request]{
		Reconciler:              g.reconciler(svc),
		MaxConcurrentReconciles: g.s.Workers,
		ReconciliationTimeout:   g.s.config.ReconcileTimeout,
		CacheSyncTimeout:        g.s.CacheSyncTimeout,
		RecoverPanic:            &recoverPanic,                                         // a backstop: reconciler recovers and counts its own
		SkipNameValidation:      &skipNameCheck,                                        // every attempt builds a controller of this name
		LogConstructor:          func(*reconcile.Request) logr.Logger { return g.log }, // app names the Composition
		NewQueue: func(_ string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			return workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: queueName})
		},
	})
	if err != nil {
		return nil, fmt.Errorf("building the controller: %w", err)
	}
	if err := ctl.Watch(source.Kind[client.Object](comps, compositionObject(), g.refHandler("composition", compositionRequest))); err != nil {
		return nil, err
	}
	// A pending hand-off's watch looks again on the event itself (design §6.2).
	if err := ctl.Watch(source.TypedFunc[reconcile.Request](func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		return fleet.OnThreat(func(ref domain.CompositionRef) {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}})
		})
	})); err != nil {
		return nil, err
	}
	inScope := func(obj client.Object) (reconcile.Request, bool) {
		req, ok := secretRequest(obj)
		return req, ok && (g.s.CompositionNamespace == "" || req.Namespace == g.s.CompositionNamespace)
	}
	if err := ctl.Watch(source.Kind[client.Object](ds.GetCache(), secretObject(), g.refHandler("inventory secret", inScope))); err != nil {
		return nil, err
	}
	return &attemptRun{comps: comps, downstream: ds, fleet: fleet, ctl: ctl}, nil
}

// run starts the caches, waits for them to sync within CacheSyncTimeout, then runs the
// controller until ctx ends or any of them fails; it stops all of them before returning.
func (r *attemptRun) run(ctx context.Context, g *Guest) (synced bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	failed := make(chan error, 4)
	goRun := func(what string, start func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					g.panicked("start")
					failed <- fmt.Errorf("%s panicked: %v\n%s", what, p, debug.Stack())
				}
			}()
			if err := start(ctx); err != nil {
				failed <- fmt.Errorf("%s: %w", what, err)
			} else if ctx.Err() == nil {
				failed <- fmt.Errorf("%s stopped", what)
			}
		}()
	}
	goRun("the composition cache", r.comps.Start)
	goRun("the downstream cluster", r.downstream.Start)
	goRun("the fleet index", func(ctx context.Context) error { r.fleet.Run(ctx); return nil })
	if err := r.waitForSync(ctx, g); err != nil {
		return false, err
	}
	g.synced.Store(true)
	g.log.Info("caches synced", "workers", g.s.Workers, "inventoryNamespace", g.s.config.InventoryNamespace)
	goRun("the controller", r.ctl.Start)
	select {
	case <-ctx.Done():
		return true, nil
	case err := <-failed:
		return true, err
	}
}

// waitForSync waits for both caches, at most CacheSyncTimeout.
func (r *attemptRun) waitForSync(ctx context.Context, g *Guest) error {
	syncCtx, cancel := context.WithTimeout(ctx, g.s.CacheSyncTimeout)
	defer cancel()
	for _, c := range []struct {
		what  string
		cache interface{ WaitForCacheSync(context.Context) bool }
	}{{"composition", r.comps}, {"inventory secret", r.downstream.GetCache()}, {"fleet index", r.fleet}} {
		if !c.cache.WaitForCacheSync(syncCtx) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("the %s cache did not sync within %s (is the list forbidden, or the cluster unreachable?)", c.what, g.s.CacheSyncTimeout)
		}
	}
	return nil
}

// reconciler calls app's Reconcile for a request. A panic in it (ours or a library's) becomes
// an error, logged with its stack and counted, and the request is retried with backoff: a
// guest inside eno-reconciler must never take its host down.
func (g *Guest) reconciler(svc *app.Service) reconcile.Func {
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
		out, err := svc.Reconcile(ctx, ref)
		if err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{RequeueAfter: out.RequeueAfter}, nil
	}
}

// PanicError is a panic recovered from a reconcile.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// compositionRequest is the request for a Composition's event.
func compositionRequest(obj client.Object) (reconcile.Request, bool) {
	return reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}, true
}

// secretRequest is the request for the Composition an inventory Secret names in its
// annotations, so that a changed or removed chunk is re-recorded promptly.
func secretRequest(obj client.Object) (reconcile.Request, bool) {
	a := obj.GetAnnotations()
	var req reconcile.Request
	req.Namespace, req.Name = a[domain.AnnotationCompositionNamespace], a[domain.AnnotationCompositionName]
	return req, req.Namespace != "" && req.Name != ""
}

// errNoObject is a handler's refusal of an event without an object.
var errNoObject = errors.New("an event without an object")

// refHandler enqueues requestFor(obj) on every add, update, delete and generic event. A panic
// in it is recovered, logged and counted: client-go would re-panic it in the informer's
// goroutine and take the host process down. The event is then dropped; the next resync or
// change delivers the object again.
func (g *Guest) refHandler(what string, requestFor func(client.Object) (reconcile.Request, bool)) handler.Funcs {
	enqueue := func(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		defer func() {
			if p := recover(); p != nil {
				g.panicked("event-handler")
				g.log.Error(fmt.Errorf("panic: %v", p), "an event handler panicked; the event is dropped, the next resync or change re-delivers it",
					"object", what, "stack", string(debug.Stack()))
			}
		}()
		if obj == nil {
			g.log.Error(errNoObject, "dropping an event", "object", what)
			return
		}
		if req, ok := requestFor(obj); ok {
			q.Add(req)
		}
	}
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		CreateFunc:  func(_ context.Context, e event.CreateEvent, q queue) { enqueue(e.Object, q) },
		UpdateFunc:  func(_ context.Context, e event.UpdateEvent, q queue) { enqueue(e.ObjectNew, q) },
		DeleteFunc:  func(_ context.Context, e event.DeleteEvent, q queue) { enqueue(e.Object, q) },
		GenericFunc: func(_ context.Context, e event.GenericEvent, q queue) { enqueue(e.Object, q) },
	}
}
