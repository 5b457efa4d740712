package memory

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// GetSlice returns the ResourceSlice; ErrNotFound when absent.
func (c *Cluster) GetSlice(ctx context.Context, namespace, name string) (domain.ResourceSlice, error) {
	key := objectKey{namespace, name}
	if err := ctx.Err(); err != nil {
		return domain.ResourceSlice{}, fmt.Errorf("getting resource slice %s: %w", key, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.slices[key]
	if !ok {
		return domain.ResourceSlice{}, fmt.Errorf("getting resource slice %s: %w", key, ports.ErrNotFound)
	}
	return s.read(), nil
}

// read is the slice as a client reads it, with its controller's UID.
func (s storedSlice) read() domain.ResourceSlice {
	out := cloneSlice(s.slice)
	out.ControllerUID = s.owner
	out.ResourceVersion = s.resourceVersion
	return out
}

// PublishTombstones writes the recovery slice of comp's current synthesis, owned by comp, as
// SPEC §6.2 step 1 says: created, or rewritten to h while the synthesis does not name it yet.
// When the short name holds another synthesis's slice the whole-UUID name is used; a slice
// owned by another Composition is refused with ErrAlreadyExists.
func (c *Cluster) PublishTombstones(ctx context.Context, comp domain.Composition, h domain.Handoff) (string, error) {
	uuid := comp.SynthesisUUID()
	if uuid == "" || comp.UID == "" || h.SynthesisUUID() != uuid {
		return "", fmt.Errorf("publishing tombstones for composition %s: a UID and a current synthesis matching the hand-off's %q are required", comp.Ref(), h.SynthesisUUID())
	}
	names := domain.RecoverySliceNames(comp.Name, uuid)
	if err := c.runBeforeWrite(ctx, OpPublishTombstones, objectKey{comp.Namespace, names[0]}); err != nil {
		return "", err
	}
	want := recoverySlice(comp, "", h)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range names {
		key := objectKey{comp.Namespace, name}
		cur, ok := c.slices[key]
		if ok && cur.slice.SynthesisUUID != uuid {
			continue // another synthesis's slice: try the next name
		}
		switch {
		case !ok:
		case cur.slice.Deleting:
			return "", fmt.Errorf("publishing tombstones to resource slice %s: it is being deleted; retry once it is gone", key)
		case cur.owner != comp.UID:
			return "", fmt.Errorf("publishing tombstones to resource slice %s: it is owned by %q, not %q: %w", key, cur.owner, comp.UID, ports.ErrAlreadyExists)
		case c.namedLocked(comp, name) || sameSlice(cur.slice, want):
			return name, nil // committed, or an earlier attempt wrote exactly this
		}
		want.Name = name
		c.slices[key] = storedSlice{slice: want, owner: comp.UID, resourceVersion: c.nextVersion()}
		return name, nil
	}
	return "", fmt.Errorf("publishing tombstones for composition %s: every recovery slice name %v holds another synthesis: %w", comp.Ref(), names, ports.ErrAlreadyExists)
}

// CommitTombstones appends slice to comp's current synthesis, as the guarded status patch of
// design §6.2 step 2 does: the slice must be comp's, for this synthesis and not terminating, and
// the stored Composition must still meet domain.CommitPreconditionOf(comp), else
// ErrSynthesisMoved.
func (c *Cluster) CommitTombstones(ctx context.Context, comp domain.Composition, slice string) error {
	key := objectKey{comp.Namespace, comp.Name}
	if err := c.runBeforeWrite(ctx, OpCommitTombstones, key); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.compositions[key]
	if !ok {
		return fmt.Errorf("committing tombstones on composition %s: %w", key, ports.ErrNotFound)
	}
	if cur.UID == comp.UID && cur.SynthesisUUID() == comp.SynthesisUUID() && cur.NamesSlice(slice) {
		return nil
	}
	if why := domain.CommitPreconditionOf(comp).MovedOn(cur); why != "" {
		return fmt.Errorf("committing tombstones on composition %s: %s: %w", key, why, ports.ErrSynthesisMoved)
	}
	stored, ok := c.slices[objectKey{comp.Namespace, slice}]
	if !ok {
		return fmt.Errorf("committing tombstones on composition %s: re-reading recovery slice %s: %w", key, slice, ports.ErrNotFound)
	}
	if err := domain.CheckCommittable(cur, stored.read()); err != nil {
		return fmt.Errorf("committing tombstones on composition %s: %w", key, err)
	}
	cur = cloneComposition(cur)
	cur.Synthesis.Slices = append(cur.Synthesis.Slices, slice)
	// Eno clears readiness when a slice without status joins the synthesis (SPEC §6.2).
	cur.Synthesis.Ready = false
	cur.ResourceVersion = c.nextVersion()
	c.compositions[key] = cur
	return nil
}

// EnsureTombstones creates the slice again from h when it is gone (SPEC §6.2 step 4).
func (c *Cluster) EnsureTombstones(ctx context.Context, comp domain.Composition, slice string, h domain.Handoff) error {
	key := objectKey{comp.Namespace, slice}
	if err := c.runBeforeWrite(ctx, OpEnsureTombstones, key); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.slices[key]; ok {
		if cur.slice.Deleting {
			return fmt.Errorf("checking resource slice %s: it is being deleted; it is created again once it is gone", key)
		}
		return nil
	}
	if h.SynthesisUUID() == "" {
		return fmt.Errorf("resource slice %s is gone and its content is unknown: %w", key, ports.ErrNotFound)
	}
	c.slices[key] = storedSlice{slice: recoverySlice(comp, slice, h), owner: comp.UID, resourceVersion: c.nextVersion()}
	return nil
}

// WithdrawTombstones writes s.Resources back to the recovery slice if s.ResourceVersion is the
// stored one (ErrConflict otherwise; ErrNotFound when it is gone).
func (c *Cluster) WithdrawTombstones(ctx context.Context, comp domain.Composition, s domain.ResourceSlice) error {
	key := objectKey{comp.Namespace, s.Name}
	if err := c.runBeforeWrite(ctx, OpWithdrawTombstones, key); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.slices[key]
	switch {
	case !ok:
		return fmt.Errorf("withdrawing tombstones in resource slice %s: %w", key, ports.ErrNotFound)
	case cur.owner != comp.UID:
		return fmt.Errorf("withdrawing tombstones in resource slice %s: it is owned by %q, not %q", key, cur.owner, comp.UID)
	case s.ResourceVersion == "" || s.ResourceVersion != cur.resourceVersion:
		return fmt.Errorf("withdrawing tombstones in resource slice %s: %w", key, ports.ErrConflict)
	case len(s.Resources) != len(cur.slice.Resources):
		return fmt.Errorf("withdrawing tombstones in resource slice %s: %d resources would replace %d; positions must stay", key, len(s.Resources), len(cur.slice.Resources))
	}
	cur.slice = cloneSlice(cur.slice)
	cur.slice.Resources = slices.Clone(s.Resources)
	cur.resourceVersion = c.nextVersion()
	c.slices[key] = cur
	return nil
}

// RequestResynthesis sets the force-resynthesis annotation if comp.ResourceVersion is the
// stored one (ErrConflict otherwise).
func (c *Cluster) RequestResynthesis(ctx context.Context, comp domain.Composition) error {
	key := objectKey{comp.Namespace, comp.Name}
	if err := c.runBeforeWrite(ctx, OpRequestResynthesis, key); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.compositions[key]
	if !ok {
		return fmt.Errorf("requesting a resynthesis of composition %s: %w", key, ports.ErrNotFound)
	}
	if comp.ResourceVersion == "" || comp.ResourceVersion != cur.ResourceVersion {
		return fmt.Errorf("requesting a resynthesis of composition %s at resourceVersion %q (stored %q): %w", key, comp.ResourceVersion, cur.ResourceVersion, ports.ErrConflict)
	}
	cur = cloneComposition(cur)
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[domain.AnnotationForceResynthesis] = comp.SynthesisUUID()
	cur.ResourceVersion = c.nextVersion()
	c.compositions[key] = cur
	return nil
}

func (c *Cluster) namedLocked(comp domain.Composition, slice string) bool {
	cur, ok := c.compositions[objectKey{comp.Namespace, comp.Name}]
	return ok && cur.UID == comp.UID && cur.NamesSlice(slice)
}

func recoverySlice(comp domain.Composition, name string, h domain.Handoff) domain.ResourceSlice {
	return domain.ResourceSlice{Namespace: comp.Namespace, Name: name, SynthesisUUID: h.SynthesisUUID(),
		Annotations: h.SliceAnnotations(),
		Resources:   slices.Clone(h.Resources)}
}

func sameSlice(a, b domain.ResourceSlice) bool {
	return a.SynthesisUUID == b.SynthesisUUID && maps.Equal(a.Annotations, b.Annotations) && slices.Equal(a.Resources, b.Resources)
}

// SliceOwner is the UID of the Composition owning the slice, or "" when it has no owner or
// does not exist.
func (c *Cluster) SliceOwner(namespace, name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slices[objectKey{namespace, name}].owner
}

// PutSlice creates s or replaces the stored slice, as Eno's synthesizer would. The owner,
// if any, is kept.
func (c *Cluster) PutSlice(s domain.ResourceSlice) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := objectKey{s.Namespace, s.Name}
	c.slices[key] = storedSlice{slice: cloneSlice(s), owner: c.slices[key].owner, resourceVersion: c.nextVersion()}
}

// MarkSliceDeleting sets the slice's deletion timestamp; ErrNotFound when absent.
func (c *Cluster) MarkSliceDeleting(namespace, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := objectKey{namespace, name}
	cur, ok := c.slices[key]
	if !ok {
		return fmt.Errorf("marking resource slice %s deleting: %w", key, ports.ErrNotFound)
	}
	cur.slice = cloneSlice(cur.slice)
	cur.slice.Deleting = true
	cur.resourceVersion = c.nextVersion()
	c.slices[key] = cur
	return nil
}

// DeleteSlice removes the slice; ErrNotFound when absent.
func (c *Cluster) DeleteSlice(namespace, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := objectKey{namespace, name}
	if _, ok := c.slices[key]; !ok {
		return fmt.Errorf("deleting resource slice %s: %w", key, ports.ErrNotFound)
	}
	delete(c.slices, key)
	return nil
}

// Slices lists the ResourceSlices of a namespace sorted by name; "" lists every namespace,
// sorted by namespace and name.
func (c *Cluster) Slices(namespace string) []domain.ResourceSlice {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []domain.ResourceSlice
	for k, s := range c.slices {
		if namespace == "" || k.namespace == namespace {
			out = append(out, s.read())
		}
	}
	slices.SortFunc(out, func(a, b domain.ResourceSlice) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}
