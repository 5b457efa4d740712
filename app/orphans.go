package app

import (
	"context"
	"sync"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// counts holds each Composition's last count for a gauge (orphans_remaining, unresolved_entries).
// One above zero, or not made by this process, is made again on every reconcile, so a manual
// cleanup or a dismissal shows (design §6.2, "Did Eno do it?").
type counts struct{ last sync.Map } // domain.CompositionRef: int

func (o *counts) set(ref domain.CompositionRef, n int) { o.last.Store(ref, n) }

func (o *counts) get(ref domain.CompositionRef) (int, bool) {
	v, ok := o.last.Load(ref)
	n, _ := v.(int)
	return n, ok
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

// refreshUnresolved counts again, as refreshOrphans does, the unresolved entries of the snapshot
// the fast path found in cached: chunk 0 is read live only in format 3.
func (s *Service) refreshUnresolved(ctx context.Context, comp domain.Composition, cached []domain.ChunkSecret) {
	if n, ok := s.kept.get(comp.Ref()); ok && n == 0 {
		return
	}
	for _, c := range cached {
		if c.Annotations[domain.AnnotationChunkIndex] != "0" {
			continue
		}
		if c.Annotations[domain.AnnotationFormat] != domain.FormatUnresolved {
			s.kept.set(comp.Ref(), 0)
			return
		}
		live, err := s.deps.Store.GetChunk(ctx, c.Name)
		if err != nil {
			logr.FromContextOrDiscard(ctx).V(1).Info("could not count the unresolved entries again; the last count stands", "error", err.Error())
			return
		}
		us, _ := domain.UnresolvedIn([]domain.ChunkSecret{live}, comp.Ref())
		s.kept.set(comp.Ref(), len(us))
		return
	}
}
