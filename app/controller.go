package app

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"

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
	res, err := c.svc.Reconcile(ctx, ref)
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
