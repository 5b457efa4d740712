package k8s

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/client-go/tools/cache"
)

// informerRun runs one informer from Start until its context ends, and lets Wait see it stop.
type informerRun struct {
	informer cache.SharedIndexInformer
	what     string
	once     sync.Once
	wg       sync.WaitGroup
}

func (r *informerRun) start(ctx context.Context) {
	r.once.Do(func() {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.informer.RunWithContext(ctx)
		}()
	})
}

func (r *informerRun) waitForCacheSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), r.informer.HasSynced) {
		err := context.Cause(ctx)
		if err == nil {
			err = errors.New("the informer stopped")
		}
		return fmt.Errorf("waiting for the %s cache to sync: %w", r.what, err)
	}
	return nil
}

func (r *informerRun) wait() { r.wg.Wait() }
