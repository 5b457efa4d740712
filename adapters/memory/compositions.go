package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// GetComposition returns the Composition; ErrNotFound when absent.
func (c *Cluster) GetComposition(ctx context.Context, ref domain.CompositionRef) (domain.Composition, error) {
	if err := ctx.Err(); err != nil {
		return domain.Composition{}, fmt.Errorf("getting composition %s: %w", ref, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	comp, ok := c.compositions[objectKey{ref.Namespace, ref.Name}]
	if !ok {
		return domain.Composition{}, fmt.Errorf("getting composition %s: %w", ref, ports.ErrNotFound)
	}
	return cloneComposition(comp), nil
}

// LiveComposition is GetComposition: there is no cache to bypass.
func (c *Cluster) LiveComposition(ctx context.Context, ref domain.CompositionRef) (domain.Composition, error) {
	return c.GetComposition(ctx, ref)
}

// WriteDecision sets the decision annotation if comp.ResourceVersion is the stored one.
func (c *Cluster) WriteDecision(ctx context.Context, comp domain.Composition, d domain.Decision) error {
	key := objectKey{comp.Namespace, comp.Name}
	if err := c.runBeforeWrite(ctx, OpWriteDecision, key); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.compositions[key]
	if !ok {
		return fmt.Errorf("writing decision on composition %s: %w", key, ports.ErrNotFound)
	}
	if comp.ResourceVersion == "" || comp.ResourceVersion != cur.ResourceVersion {
		return fmt.Errorf("writing decision on composition %s at resourceVersion %q (stored %q): %w; re-read and decide again",
			key, comp.ResourceVersion, cur.ResourceVersion, ports.ErrConflict)
	}
	cur = cloneComposition(cur)
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[domain.AnnotationDecision] = d.Encode()
	cur.ResourceVersion = c.nextVersion()
	c.compositions[key] = cur
	return nil
}

// PutComposition creates comp or replaces the stored one without a precondition. A new
// Composition gets a fresh UID unless comp.UID is set; a replaced one keeps its UID unless
// comp.UID is set. It returns the stored Composition.
func (c *Cluster) PutComposition(comp domain.Composition) domain.Composition {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := objectKey{comp.Namespace, comp.Name}
	stored := cloneComposition(comp)
	if stored.UID == "" {
		if cur, ok := c.compositions[key]; ok {
			stored.UID = cur.UID
		} else {
			stored.UID = c.nextUID()
		}
	}
	if cur, ok := c.compositions[key]; !ok || cur.UID != stored.UID {
		c.created[key] = c.now()
	}
	stored.ResourceVersion = c.nextVersion()
	c.compositions[key] = stored
	return cloneComposition(stored)
}

// UpdateComposition replaces the stored Composition if comp.ResourceVersion is the stored one
// (ErrConflict otherwise; ErrNotFound when absent). The UID and deletion state are not
// changed by an update: a different comp.UID is a conflict, as on a real API server.
func (c *Cluster) UpdateComposition(comp domain.Composition) (domain.Composition, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := objectKey{comp.Namespace, comp.Name}
	cur, ok := c.compositions[key]
	if !ok {
		return domain.Composition{}, fmt.Errorf("updating composition %s: %w", key, ports.ErrNotFound)
	}
	if comp.ResourceVersion == "" || comp.ResourceVersion != cur.ResourceVersion {
		return domain.Composition{}, fmt.Errorf("updating composition %s at resourceVersion %q (stored %q): %w",
			key, comp.ResourceVersion, cur.ResourceVersion, ports.ErrConflict)
	}
	if comp.UID != "" && comp.UID != cur.UID {
		return domain.Composition{}, fmt.Errorf("updating composition %s: UID %s is not the stored %s: %w", key, comp.UID, cur.UID, ports.ErrConflict)
	}
	stored := cloneComposition(comp)
	stored.UID, stored.Deleting = cur.UID, cur.Deleting
	stored.ResourceVersion = c.nextVersion()
	c.compositions[key] = stored
	return cloneComposition(stored), nil
}

// SetAnnotation sets one annotation on the stored Composition, as an operator's
// `kubectl annotate` would, and returns the result.
func (c *Cluster) SetAnnotation(ref domain.CompositionRef, key, value string) (domain.Composition, error) {
	return c.modifyComposition(ref, "annotating", func(comp *domain.Composition) {
		if comp.Annotations == nil {
			comp.Annotations = map[string]string{}
		}
		comp.Annotations[key] = value
	})
}

// MarkCompositionDeleting sets the deletion timestamp, as a delete blocked by finalizers would.
func (c *Cluster) MarkCompositionDeleting(ref domain.CompositionRef) (domain.Composition, error) {
	return c.modifyComposition(ref, "marking deleting", func(comp *domain.Composition) { comp.Deleting = true })
}

func (c *Cluster) modifyComposition(ref domain.CompositionRef, verb string, change func(*domain.Composition)) (domain.Composition, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := objectKey{ref.Namespace, ref.Name}
	cur, ok := c.compositions[key]
	if !ok {
		return domain.Composition{}, fmt.Errorf("%s composition %s: %w", verb, key, ports.ErrNotFound)
	}
	cur = cloneComposition(cur)
	change(&cur)
	cur.ResourceVersion = c.nextVersion()
	c.compositions[key] = cur
	return cloneComposition(cur), nil
}

// DeleteComposition removes the Composition at once; what it owns stays (orphaning deletion).
func (c *Cluster) DeleteComposition(ref domain.CompositionRef) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := objectKey{ref.Namespace, ref.Name}
	cur, ok := c.compositions[key]
	if !ok {
		return fmt.Errorf("deleting composition %s: %w", key, ports.ErrNotFound)
	}
	delete(c.compositions, key)
	// As the garbage collector does, its slices go; Eno's finalizer holds them terminating.
	for k, s := range c.slices {
		if s.owner == cur.UID {
			s.slice.Deleting = true
			c.slices[k] = s
		}
	}
	return nil
}

// Compositions lists every Composition, sorted by namespace and name.
// ListCompositions lists every stored Composition (the memory adapter has no cache).
func (c *Cluster) ListCompositions(ctx context.Context) ([]domain.Composition, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.Compositions(), nil
}

func (c *Cluster) Compositions() []domain.Composition {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]domain.Composition, 0, len(c.compositions))
	for _, comp := range c.compositions {
		out = append(out, cloneComposition(comp))
	}
	slices.SortFunc(out, func(a, b domain.Composition) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}
