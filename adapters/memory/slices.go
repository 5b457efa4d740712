package memory

import (
	"cmp"
	"context"
	"errors"
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

// PublishTombstones writes the recovery slices of comp's current synthesis, one per part of h,
// owned by comp: each created, or rewritten to h while the synthesis does not name it yet. When
// a name of the short series holds another synthesis's slice the whole-UUID series is used; a
// slice owned by another Composition is refused with ErrAlreadyExists. The hook runs before
// each slice's write (design §6.2 step 1).
func (c *Cluster) PublishTombstones(ctx context.Context, comp domain.Composition, h domain.Handoff) ([]string, error) {
	uuid := comp.SynthesisUUID()
	if uuid == "" || comp.UID == "" || h.SynthesisUUID() != uuid {
		return nil, fmt.Errorf("publishing tombstones for composition %s: a UID and a current synthesis matching the hand-off's %q are required", comp.Ref(), h.SynthesisUUID())
	}
	parts, err := h.Parts()
	if err != nil {
		return nil, fmt.Errorf("publishing tombstones for composition %s: %w", comp.Ref(), err)
	}
series:
	for _, s := range domain.RecoverySliceSeriesOf(comp.Name, uuid) {
		names := s.Names(len(parts))
		for i, name := range names {
			taken, err := c.publishPart(ctx, comp, h, name, parts[i])
			if err != nil {
				return nil, err
			}
			if taken {
				continue series
			}
		}
		return names, nil
	}
	return nil, fmt.Errorf("publishing tombstones for composition %s: every recovery slice series %v holds another synthesis's slice: %w", comp.Ref(), domain.RecoverySliceNames(comp.Name, uuid), ports.ErrAlreadyExists)
}

// publishPart writes one recovery slice; taken reports that name holds another synthesis's slice.
func (c *Cluster) publishPart(ctx context.Context, comp domain.Composition, h domain.Handoff, name string, part []domain.SliceResource) (taken bool, err error) {
	key := objectKey{comp.Namespace, name}
	if err := c.runBeforeWrite(ctx, OpPublishTombstones, key); err != nil {
		return false, err
	}
	want := recoverySlice(comp, name, h, part)
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.slices[key]
	switch {
	case !ok:
	case cur.slice.SynthesisUUID != comp.SynthesisUUID():
		return true, nil // another synthesis's slice: try the next series
	case cur.slice.Deleting:
		return false, fmt.Errorf("publishing tombstones to resource slice %s: it is being deleted; retry once it is gone", key)
	case cur.owner != comp.UID:
		return false, fmt.Errorf("publishing tombstones to resource slice %s: it is owned by %q, not %q: %w", key, cur.owner, comp.UID, ports.ErrAlreadyExists)
	case c.namedLocked(comp, name) || sameSlice(cur.slice, want):
		return false, nil // committed, or an earlier attempt wrote exactly this
	case cur.slice.Sealed() && slices.Equal(cur.slice.Resources, want.Resources):
		return false, nil // sealed for a commit with exactly these tombstones: never rewritten
	case cur.slice.Sealed():
		return false, fmt.Errorf("publishing tombstones to resource slice %s: %w: %w", key, domain.RefuseRewrite(cur.read()), ports.ErrSynthesisMoved)
	}
	c.slices[key] = storedSlice{slice: want, owner: comp.UID, resourceVersion: c.nextVersion()}
	return false, nil
}

// CommitTombstones appends the slices to comp's current synthesis, as the guarded status patch
// does: each must be comp's, for this synthesis and not terminating, and the stored Composition
// must still meet domain.CommitPreconditionOf(comp), else ErrSynthesisMoved. Slices the
// synthesis names already are not appended again (design §6.2 step 2).
func (c *Cluster) CommitTombstones(ctx context.Context, comp domain.Composition, h domain.Handoff, slices []string) error {
	key := objectKey{comp.Namespace, comp.Name}
	if len(slices) == 0 {
		return fmt.Errorf("committing tombstones on composition %s: no slice to append", key)
	}
	parts, err := h.PartsFor(slices)
	if err == nil && parts == nil {
		err = errors.New("the hand-off holds no decided synthesis")
	}
	if err != nil {
		return fmt.Errorf("committing tombstones on composition %s: %w", key, err)
	}
	if err := c.runBeforeWrite(ctx, OpCommitTombstones, key); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.compositions[key]
	if !ok {
		return fmt.Errorf("committing tombstones on composition %s: %w", key, ports.ErrNotFound)
	}
	var missing []string
	for _, s := range slices {
		if !cur.NamesSlice(s) {
			missing = append(missing, s)
		}
	}
	committed := cur.UID == comp.UID && cur.SynthesisUUID() == comp.SynthesisUUID() && len(missing) == 0
	if why := domain.CommitPreconditionOf(comp).MovedOn(cur); !committed && why != "" {
		return fmt.Errorf("committing tombstones on composition %s: %s: %w", key, why, ports.ErrSynthesisMoved)
	}
	for i, slice := range slices {
		stored, ok := c.slices[objectKey{comp.Namespace, slice}]
		if !ok {
			return fmt.Errorf("committing tombstones on composition %s: re-reading recovery slice %s: %w", key, slice, ports.ErrNotFound)
		}
		if err := domain.CheckCommittable(cur, stored.read()); err != nil {
			return fmt.Errorf("committing tombstones on composition %s: %w", key, err)
		}
		if err := domain.CheckHolds(stored.read(), parts[i]); err != nil {
			return fmt.Errorf("committing tombstones on composition %s: %w: %w", key, err, ports.ErrSynthesisMoved)
		}
	}
	// Seal every slice before naming any: from here on none is rewritten by a publish.
	for _, slice := range slices {
		if k := (objectKey{comp.Namespace, slice}); !c.slices[k].slice.Sealed() {
			c.annotateLocked(k, domain.AnnotationRecoverySealed, cur.ResourceVersion)
		}
	}
	if committed {
		return nil
	}
	cur = cloneComposition(cur)
	cur.Synthesis.Slices = append(cur.Synthesis.Slices, missing...)
	// Eno clears readiness when a slice without status joins the synthesis (design §6.2).
	cur.Synthesis.Ready = false
	cur.ResourceVersion = c.nextVersion()
	c.compositions[key] = cur
	return nil
}

// EnsureTombstones creates again from its part of h each recovery slice that is gone. With an
// empty h the gone slices are reported as a *ports.SlicesLostError. The hook runs before each
// slice's check (design §6.2 step 4).
func (c *Cluster) EnsureTombstones(ctx context.Context, comp domain.Composition, slices []string, h domain.Handoff) error {
	parts, err := h.PartsFor(slices)
	if err != nil {
		return fmt.Errorf("checking the recovery slices of composition %s: %w", comp.Ref(), err)
	}
	var lost []string
	for i, slice := range slices {
		gone, err := c.ensurePart(ctx, comp, slice, h, parts, i)
		if err != nil {
			return err
		}
		if gone {
			lost = append(lost, slice)
		}
	}
	if len(lost) > 0 {
		return fmt.Errorf("checking the recovery slices of composition %s: %w", comp.Ref(), &ports.SlicesLostError{Slices: lost})
	}
	return nil
}

// ensurePart checks slice i of the hand-off, and creates it again from parts when it is gone;
// lost reports it gone with no content to create it from.
func (c *Cluster) ensurePart(ctx context.Context, comp domain.Composition, slice string, h domain.Handoff, parts [][]domain.SliceResource, i int) (lost bool, err error) {
	key := objectKey{comp.Namespace, slice}
	if err := c.runBeforeWrite(ctx, OpEnsureTombstones, key); err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.slices[key]; ok {
		if cur.slice.Deleting {
			return false, fmt.Errorf("checking resource slice %s: it is being deleted; it is created again once it is gone", key)
		}
		return false, nil
	}
	if parts == nil {
		return true, nil
	}
	// The synthesis names it: created sealed, so that no publish ever rewrites it.
	again := recoverySlice(comp, slice, h, parts[i])
	again.Annotations[domain.AnnotationRecoverySealed] = comp.ResourceVersion
	c.slices[key] = storedSlice{slice: again, owner: comp.UID, resourceVersion: c.nextVersion()}
	return false, nil
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

func recoverySlice(comp domain.Composition, name string, h domain.Handoff, part []domain.SliceResource) domain.ResourceSlice {
	return domain.ResourceSlice{Namespace: comp.Namespace, Name: name, SynthesisUUID: h.SynthesisUUID(),
		Annotations: h.SliceAnnotations(),
		Resources:   slices.Clone(part)}
}

func sameSlice(a, b domain.ResourceSlice) bool {
	return a.SynthesisUUID == b.SynthesisUUID && maps.Equal(a.Annotations, b.Annotations) && slices.Equal(a.Resources, b.Resources)
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

// ListSlices lists every stored slice, in every namespace, in the order of Slices.
func (c *Cluster) ListSlices(ctx context.Context) ([]domain.ResourceSlice, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("listing resource slices: %w", err)
	}
	return c.Slices(""), nil
}
