package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

var (
	_ ports.CompositionReader = (*Cluster)(nil)
	_ ports.LiveReader        = (*Cluster)(nil)
	_ ports.DecisionWriter    = (*Cluster)(nil)
	_ ports.SliceReader       = (*Cluster)(nil)
	_ ports.TombstoneSink     = (*Cluster)(nil)
	_ ports.SnapshotStore     = (*Cluster)(nil)
	_ ports.EventRecorder     = (*Cluster)(nil)
)

// Operations passed to the BeforeWrite hook. Only writes through the ports run the hook;
// the admin helpers (Put*, Update*, Mark*, Delete*, SetAnnotation) never do.
const (
	OpCreateChunk         = "CreateChunk"
	OpUpdateChunk         = "UpdateChunk"
	OpWriteDecision       = "WriteDecision"
	OpCreateRecoverySlice = "CreateRecoverySlice"
	OpAppendRecoverySlice = "AppendRecoverySlice"
	OpRequestResynthesis  = "RequestResynthesis"
	OpArmTombstones       = "ArmTombstones"
	OpDisarmTombstones    = "DisarmTombstones"
)

// BeforeWrite is a fault-injection hook. It runs before every port write with the operation
// and the object's name ("namespace/name"), without the Cluster's lock held, so it may change
// the Cluster (e.g. recreate the Composition between a guard read and a write). A non-nil
// error fails the write unchanged and nothing is stored.
type BeforeWrite func(op, name string) error

// Cluster holds the objects of both clusters. The zero value is not usable; call NewCluster.
type Cluster struct {
	inventoryNamespace string

	mu           sync.Mutex
	version      uint64 // the last resourceVersion handed out, shared by every object
	uids         uint64
	objectUIDs   uint64
	compositions map[objectKey]domain.Composition
	created      map[objectKey]time.Time // each Composition's creation, by the clock
	slices       map[objectKey]storedSlice
	secrets      map[objectKey]domain.ChunkSecret
	downstream   map[domain.ResourceID]downstreamObject // the downstream cluster's objects
	unreadable   map[domain.ResourceID]string           // objects reads of which fail, and why
	EventLog
	beforeWrite BeforeWrite
	clock       func() time.Time // the downstream API server's clock
	// fleet is what the fleet index holds while frozen (FreezeFleetIndex); nil: every write.
	fleet *fleetView
}

type objectKey struct{ namespace, name string }

func (k objectKey) String() string { return k.namespace + "/" + k.name }

type storedSlice struct {
	slice           domain.ResourceSlice
	owner           string // UID of the owning Composition, "" when none
	resourceVersion string
}

// NewCluster returns an empty Cluster whose SnapshotStore is bound to inventoryNamespace.
func NewCluster(inventoryNamespace string) *Cluster {
	return &Cluster{
		inventoryNamespace: inventoryNamespace,
		compositions:       map[objectKey]domain.Composition{},
		created:            map[objectKey]time.Time{},
		slices:             map[objectKey]storedSlice{},
		secrets:            map[objectKey]domain.ChunkSecret{},
		downstream:         map[domain.ResourceID]downstreamObject{},
		unreadable:         map[domain.ResourceID]string{},
		clock:              time.Now,
	}
}

// SetClock sets the downstream API server's clock, which stamps creation times of downstream
// objects and the data write times of Secrets.
func (c *Cluster) SetClock(now func() time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock = now
}

// now reads the clock in whole seconds, as an API server's timestamps are. Callers hold the lock.
func (c *Cluster) now() time.Time { return c.clock().UTC().Truncate(time.Second) }

// InventoryNamespace is the namespace the SnapshotStore reads and writes.
func (c *Cluster) InventoryNamespace() string { return c.inventoryNamespace }

// SetBeforeWrite installs (or, with nil, removes) the fault-injection hook.
func (c *Cluster) SetBeforeWrite(hook BeforeWrite) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.beforeWrite = hook
}

// runBeforeWrite calls the hook, if any, without holding the lock.
func (c *Cluster) runBeforeWrite(ctx context.Context, op string, key objectKey) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", op, key, err)
	}
	c.mu.Lock()
	hook := c.beforeWrite
	c.mu.Unlock()
	if hook == nil {
		return nil
	}
	if err := hook(op, key.String()); err != nil {
		return fmt.Errorf("%s %s: %w", op, key, err)
	}
	return nil
}

// nextVersion bumps the shared counter. Callers hold the lock.
func (c *Cluster) nextVersion() string {
	c.version++
	return strconv.FormatUint(c.version, 10)
}

// nextObjectUID returns a downstream object's UID, from a counter of its own so that the
// Compositions' UIDs do not depend on how many objects Eno applied. Callers hold the lock.
func (c *Cluster) nextObjectUID() string {
	c.objectUIDs++
	return fmt.Sprintf("00000000-0000-4000-9000-%012d", c.objectUIDs)
}

// nextUID returns a UID unique within this Cluster, deterministic so demo runs repeat.
func (c *Cluster) nextUID() string {
	c.uids++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", c.uids)
}

func cloneComposition(comp domain.Composition) domain.Composition {
	out := comp
	out.Labels = maps.Clone(comp.Labels)
	out.Annotations = maps.Clone(comp.Annotations)
	if comp.Synthesis != nil {
		s := *comp.Synthesis
		s.Slices = slices.Clone(comp.Synthesis.Slices)
		out.Synthesis = &s
	}
	if comp.PreviousSynthesis != nil {
		s := *comp.PreviousSynthesis
		s.Slices = slices.Clone(comp.PreviousSynthesis.Slices)
		out.PreviousSynthesis = &s
	}
	return out
}

func cloneSlice(s domain.ResourceSlice) domain.ResourceSlice {
	out := s
	out.Annotations = maps.Clone(s.Annotations)
	out.Resources = slices.Clone(s.Resources)
	return out
}
