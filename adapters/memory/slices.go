package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
	return cloneSlice(s.slice), nil
}

// PublishTombstones writes the recovery slice of comp's current synthesis, owned by comp.
// A retry for the same synthesis and owner reuses the slice; a slice of that name holding
// another synthesis or owned by another Composition is refused with ErrAlreadyExists.
func (c *Cluster) PublishTombstones(ctx context.Context, comp domain.Composition, tombstones []domain.Tombstone) (string, error) {
	uuid := comp.SynthesisUUID()
	if uuid == "" {
		return "", fmt.Errorf("publishing tombstones for composition %s: it has no current synthesis", comp.Ref())
	}
	if comp.UID == "" {
		return "", errors.New("publishing tombstones for composition " + comp.Ref().String() + ": it has no UID to own the slice")
	}
	key := objectKey{comp.Namespace, domain.RecoverySliceName(comp.Name, uuid)}
	if err := c.runBeforeWrite(ctx, OpPublishTombstones, key); err != nil {
		return "", err
	}
	want := domain.ResourceSlice{Namespace: key.namespace, Name: key.name, SynthesisUUID: uuid,
		Resources: make([]domain.SliceResource, len(tombstones))}
	for i, t := range tombstones {
		want.Resources[i] = domain.SliceResource{Manifest: t.Manifest(), Deleted: true}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.slices[key]; ok {
		switch {
		case cur.slice.Deleting:
			return "", fmt.Errorf("publishing tombstones to resource slice %s: it is being deleted; retry once it is gone", key)
		case cur.slice.SynthesisUUID != uuid || cur.owner != comp.UID:
			return "", fmt.Errorf("publishing tombstones to resource slice %s: it holds synthesis %q owned by %q, not %q owned by %q: %w",
				key, cur.slice.SynthesisUUID, cur.owner, uuid, comp.UID, ports.ErrAlreadyExists)
		case slices.Equal(cur.slice.Resources, want.Resources):
			return key.name, nil // an earlier attempt wrote exactly this
		}
	}
	c.slices[key] = storedSlice{slice: want, owner: comp.UID, resourceVersion: c.nextVersion()}
	return key.name, nil
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
			out = append(out, cloneSlice(s.slice))
		}
	}
	slices.SortFunc(out, func(a, b domain.ResourceSlice) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}
