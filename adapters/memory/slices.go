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

// CreateRecoverySlice stores recovery slice part of h, owned by comp, and returns its name. A
// slice is never updated: one already stored under the name is reused when it holds exactly that
// part for comp (domain.CheckReusable), and is ErrAlreadyExists otherwise. The hook runs before
// the write.
func (c *Cluster) CreateRecoverySlice(ctx context.Context, comp domain.Composition, h domain.Handoff, part int) (string, error) {
	if comp.UID == "" || comp.SynthesisUUID() == "" || h.SynthesisUUID() != comp.SynthesisUUID() {
		return "", fmt.Errorf("creating a recovery slice for composition %s: a UID and a current synthesis matching the hand-off's %q are required", comp.Ref(), h.SynthesisUUID())
	}
	want, err := h.RecoverySlice(comp, part)
	if err != nil {
		return "", fmt.Errorf("creating a recovery slice for composition %s: %w", comp.Ref(), err)
	}
	key := objectKey{want.Namespace, want.Name}
	if err := c.runBeforeWrite(ctx, OpCreateRecoverySlice, key); err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.slices[key]; ok {
		if err := domain.CheckReusable(comp, cur.read(), want); err != nil {
			return "", fmt.Errorf("creating recovery slice %s: %w: %w", key, ports.ErrAlreadyExists, err)
		}
		return want.Name, nil
	}
	stored := cloneSlice(want)
	stored.ControllerUID = ""
	c.slices[key] = storedSlice{slice: stored, owner: comp.UID, resourceVersion: c.nextVersion()}
	return want.Name, nil
}

// AppendRecoverySlice names the slice in comp's current synthesis, as the guarded status patch
// does: the stored Composition must still meet domain.CommitPreconditionOf(comp), else
// ErrSynthesisMoved. It returns the Composition as written.
func (c *Cluster) AppendRecoverySlice(ctx context.Context, comp domain.Composition, slice string) (domain.Composition, error) {
	key := objectKey{comp.Namespace, comp.Name}
	if comp.NamesSlice(slice) {
		return comp, nil
	}
	if err := c.runBeforeWrite(ctx, OpAppendRecoverySlice, key); err != nil {
		return domain.Composition{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.compositions[key]
	if !ok {
		return domain.Composition{}, fmt.Errorf("naming recovery slice %s on composition %s: it was deleted: %w", slice, key, ports.ErrSynthesisMoved)
	}
	if why := domain.CommitPreconditionOf(comp).MovedOn(cur); why != "" {
		return domain.Composition{}, fmt.Errorf("naming recovery slice %s on composition %s: %s: %w", slice, key, why, ports.ErrSynthesisMoved)
	}
	cur = cloneComposition(cur)
	cur.Synthesis.Slices = append(cur.Synthesis.Slices, slice)
	// Eno clears readiness when a slice without status joins the synthesis.
	cur.Synthesis.Ready = false
	cur.ResourceVersion = c.nextVersion()
	c.compositions[key] = cur
	return cloneComposition(cur), nil
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

// AnnotateSlice sets one annotation of a stored slice, as another client's update would.
func (c *Cluster) AnnotateSlice(namespace, name, key, value string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := objectKey{namespace, name}
	if _, ok := c.slices[k]; !ok {
		return fmt.Errorf("annotating resource slice %s: %w", k, ports.ErrNotFound)
	}
	c.annotateLocked(k, key, value)
	return nil
}

// annotateLocked sets one annotation of the stored slice k, a new version; c.mu is held.
func (c *Cluster) annotateLocked(k objectKey, key, value string) {
	stored := c.slices[k]
	stored.slice.Annotations = maps.Clone(stored.slice.Annotations)
	if stored.slice.Annotations == nil {
		stored.slice.Annotations = map[string]string{}
	}
	stored.slice.Annotations[key] = value
	stored.resourceVersion = c.nextVersion()
	c.slices[k] = stored
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

// PutOwnedSlice creates s or replaces the stored slice, controlled by the Composition ownerUID.
func (c *Cluster) PutOwnedSlice(s domain.ResourceSlice, ownerUID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slices[objectKey{s.Namespace, s.Name}] = storedSlice{slice: cloneSlice(s), owner: ownerUID, resourceVersion: c.nextVersion()}
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

// ArmTombstones sets domain.AnnotationArmed to digest if comp's UID and resourceVersion are the
// stored ones (ErrConflict otherwise), and returns the Composition as written; already armed
// with digest, it writes nothing.
func (c *Cluster) ArmTombstones(ctx context.Context, comp domain.Composition, digest string) (domain.Composition, error) {
	if comp.Annotations[domain.AnnotationArmed] == digest {
		return comp, nil
	}
	key := objectKey{comp.Namespace, comp.Name}
	if err := c.runBeforeWrite(ctx, OpArmTombstones, key); err != nil {
		return domain.Composition{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.compositions[key]
	if !ok {
		return domain.Composition{}, fmt.Errorf("arming the tombstones of composition %s: %w", key, ports.ErrNotFound)
	}
	if comp.ResourceVersion == "" || comp.ResourceVersion != cur.ResourceVersion || comp.UID != cur.UID {
		return domain.Composition{}, fmt.Errorf("arming the tombstones of composition %s at resourceVersion %q (stored %q): %w", key, comp.ResourceVersion, cur.ResourceVersion, ports.ErrConflict)
	}
	cur = cloneComposition(cur)
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[domain.AnnotationArmed] = digest
	cur.ResourceVersion = c.nextVersion()
	c.compositions[key] = cur
	return cloneComposition(cur), nil
}

// DisarmTombstones sets domain.AnnotationArmed to domain.ArmedOff if comp's UID and
// resourceVersion are the stored ones (ErrConflict otherwise); disarmed already, it writes
// nothing.
func (c *Cluster) DisarmTombstones(ctx context.Context, comp domain.Composition) error {
	if comp.HandoffDisarmed() {
		return nil
	}
	key := objectKey{comp.Namespace, comp.Name}
	if err := c.runBeforeWrite(ctx, OpDisarmTombstones, key); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.compositions[key]
	if !ok {
		return fmt.Errorf("disarming the tombstones of composition %s: %w", key, ports.ErrNotFound)
	}
	if comp.ResourceVersion == "" || comp.ResourceVersion != cur.ResourceVersion || comp.UID != cur.UID {
		return fmt.Errorf("disarming the tombstones of composition %s at resourceVersion %q (stored %q): %w", key, comp.ResourceVersion, cur.ResourceVersion, ports.ErrConflict)
	}
	cur = cloneComposition(cur)
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[domain.AnnotationArmed] = domain.ArmedOff
	cur.ResourceVersion = c.nextVersion()
	c.compositions[key] = cur
	return nil
}
