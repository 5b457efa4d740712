package memory

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

var _ ports.FleetIndex = (*Cluster)(nil)

// fleetView is the slices and Compositions a frozen fleet index holds.
type fleetView struct {
	slices       map[objectKey]storedSlice
	compositions map[objectKey]domain.Composition
}

// FreezeFleetIndex makes the fleet index answer from the slices and Compositions stored now,
// as a watch that lags: later writes are unseen until ThawFleetIndex. A watch delivers events in
// order, so what it holds is always a prefix of the writes.
func (c *Cluster) FreezeFleetIndex() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fleet = &fleetView{slices: maps.Clone(c.slices), compositions: maps.Clone(c.compositions)}
}

// ThawFleetIndex lets the fleet index catch up with every write.
func (c *Cluster) ThawFleetIndex() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fleet = nil
}

// view is what the fleet index holds; c.mu is held.
func (c *Cluster) view() fleetView {
	if c.fleet != nil {
		return *c.fleet
	}
	return fleetView{slices: c.slices, compositions: c.compositions}
}

// ProducedElsewhere is domain.ProducedElsewhere over the slices the index holds.
func (c *Cluster) ProducedElsewhere(ctx context.Context, ids []domain.ResourceID, excluded ...string) (map[domain.ResourceID]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reading the fleet index: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var all []domain.Production
	for _, s := range c.view().slices {
		all = append(all, domain.ProductionOf(s.read()))
	}
	return domain.ProducedElsewhere(all, ids, excluded...), nil
}

// LineageMembers lists the Compositions the index holds, other than ref, that carry lineage.
func (c *Cluster) LineageMembers(ctx context.Context, ref domain.CompositionRef, lineage domain.Lineage) ([]domain.CompositionRef, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reading the fleet index: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	all := make([]domain.Composition, 0, len(c.view().compositions))
	for _, comp := range c.view().compositions {
		all = append(all, comp)
	}
	return domain.LineageMembers(domain.Composition{Namespace: ref.Namespace, Name: ref.Name}, lineage, all), nil
}

// WaitForSlice is ErrIndexBehind at once when the index does not hold the slice: a frozen index
// never catches up by waiting.
func (c *Cluster) WaitForSlice(ctx context.Context, namespace, name string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("waiting for the fleet index: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.view().slices[objectKey{namespace, name}]; !ok {
		return fmt.Errorf("resource slice %s/%s: %w", namespace, name, ports.ErrIndexBehind)
	}
	return nil
}

// Unsynthesized maps each Composition the index holds that Eno has not synthesized yet to its
// creation time.
func (c *Cluster) Unsynthesized(ctx context.Context) (map[domain.CompositionRef]time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reading the fleet index: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[domain.CompositionRef]time.Time{}
	for k, comp := range c.view().compositions {
		if comp.Unsynthesized() {
			out[comp.Ref()] = c.created[k]
		}
	}
	return out, nil
}
