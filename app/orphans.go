package app

import (
	"context"
	"sync"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// orphanReports holds each Composition's last "did Eno do it?" count, for the orphans_remaining
// gauge. A count above zero is read again on every reconcile until it reaches zero, so a manual
// cleanup shows; a count this process has not made yet (after a restart) is made once, quietly.
// A Composition that records a synthesis carrying no hand-off counts zero; one deleted or out of
// scope is forgotten (design §6.2, "Did Eno do it?").
type orphanReports struct {
	mu   sync.Mutex
	last map[domain.CompositionRef]int
}

func newOrphanReports() *orphanReports {
	return &orphanReports{last: map[domain.CompositionRef]int{}}
}

func (o *orphanReports) set(ref domain.CompositionRef, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last[ref] = n
}

func (o *orphanReports) get(ref domain.CompositionRef) (int, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, ok := o.last[ref]
	return n, ok
}

func (o *orphanReports) forget(ref domain.CompositionRef) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.last, ref)
}

// refreshOrphans counts again, without an event or an alert, the orphans of a Composition whose
// last count was above zero or not made by this process. Recording's fast path calls it: the
// loud report belongs to the pass that records the carrying synthesis.
func (s *Service) refreshOrphans(ctx context.Context, comp domain.Composition) {
	if n, ok := s.orphans.get(comp.Ref()); ok && n == 0 {
		return
	}
	check, err := checkCarried(ctx, s.deps.Slices, s.planner, comp)
	if err != nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("could not count the orphans of the carried hand-off again; the last count stands", "error", err.Error())
		return
	}
	s.orphans.set(comp.Ref(), len(check.remaining))
}
