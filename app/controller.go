package app

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// Controller drains a rate-limited work queue with a fixed number of workers.
type Controller struct {
	svc     *Service
	queue   ports.WorkQueue
	workers int
}

// NewController refuses nil dependencies and a non-positive worker count.
func NewController(svc *Service, queue ports.WorkQueue, workers int) (*Controller, error) {
	switch {
	case svc == nil:
		return nil, errors.New("app: controller needs a service")
	case queue == nil:
		return nil, errors.New("app: controller needs a work queue")
	case workers < 1:
		return nil, fmt.Errorf("app: controller needs at least one worker, got %d", workers)
	}
	return &Controller{svc: svc, queue: queue, workers: workers}, nil
}

// Run starts the workers and blocks until ctx is cancelled; it then shuts the queue down and
// waits for in-flight reconciles to finish (draining) before returning.
func (c *Controller) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.processNext(ctx) {
			}
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
}

// reconcile runs one reconcile under the configured deadline, and turns a panic inside it (ours
// or a library's) into an error, logged with its stack and counted: a guest inside
// eno-reconciler must never take its host down.
func (c *Controller) reconcile(ctx context.Context, ref domain.CompositionRef) (res Result, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.svc.cfg.ReconcileTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			c.svc.deps.Metrics.Panicked("reconcile")
			pe := &PanicError{Value: r, Stack: debug.Stack()}
			logr.FromContextOrDiscard(ctx).Error(pe, "reconcile panicked; retrying with backoff", "composition", ref.String(), "stack", string(pe.Stack))
			err = pe
		}
	}()
	return c.svc.Reconcile(ctx, ref)
}

// PanicError is a panic recovered from a reconcile.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// processNext handles one item: Forget on success (then AddAfter when the result asks for a
// later look), AddRateLimited on error.
func (c *Controller) processNext(ctx context.Context) bool {
	ref, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(ref)
	// Reconcile adds the Composition to the logger it passes on.
	log := logr.FromContextOrDiscard(ctx).WithValues("composition", ref.String())
	res, err := c.reconcile(ctx, ref)
	if err != nil {
		if ctx.Err() == nil {
			log.Error(err, "reconcile failed; retrying with backoff")
		}
		c.queue.AddRateLimited(ref)
		return true
	}
	c.queue.Forget(ref)
	if res.RequeueAfter > 0 {
		c.queue.AddAfter(ref, res.RequeueAfter)
	}
	return true
}
