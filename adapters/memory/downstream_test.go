package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// clock is a settable downstream API server clock.
type clock struct{ at time.Time }

func (c *clock) now() time.Time { return c.at }

// design §6.3's downstream read: Present with the UID and the creation time (whole seconds,
// both kept across re-applies) and the last write, NotFound, or Unreadable while MarkUnreadable names the object.
func TestObserveObject(t *testing.T) {
	created := time.Date(2025, 6, 1, 11, 0, 0, 0, time.UTC)
	cm := domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "cm"}
	const cmManifest = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","name":"cm"},"data":{"k":"v"}}`
	tests := []struct {
		name  string
		setup func(t *testing.T, c *memory.Cluster, clk *clock)
		want  domain.Observation
	}{
		{"never created", func(*testing.T, *memory.Cluster, *clock) {}, domain.Observation{State: domain.ObjectAbsent}},
		{"present, creation time in whole seconds", func(t *testing.T, c *memory.Cluster, clk *clock) {
			clk.at = created.Add(700 * time.Millisecond)
			put(t, c, cmManifest)
		}, domain.Observation{State: domain.ObjectPresent, Created: created, Writes: enoWrote(created), UID: firstUID}},
		{"no field to own: bare, with no managedFields entry", func(t *testing.T, c *memory.Cluster, _ *clock) {
			put(t, c, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","name":"cm"}}`)
		}, domain.Observation{State: domain.ObjectPresent, Created: created, Bare: true, UID: firstUID}},
		{"a re-apply keeps the creation time", func(t *testing.T, c *memory.Cluster, clk *clock) {
			put(t, c, cmManifest)
			clk.at = created.Add(time.Hour)
			put(t, c, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","name":"cm","labels":{"a":"b"}}}`)
		}, domain.Observation{State: domain.ObjectPresent, Created: created, Writes: enoWrote(created.Add(time.Hour)), UID: firstUID}},
		{"an apply that changes nothing is no write", func(t *testing.T, c *memory.Cluster, clk *clock) {
			put(t, c, cmManifest)
			clk.at = created.Add(time.Hour)
			put(t, c, cmManifest)
		}, domain.Observation{State: domain.ObjectPresent, Created: created, Writes: enoWrote(created), UID: firstUID}},
		{"deleted and re-created by hand: the new creation time", func(t *testing.T, c *memory.Cluster, clk *clock) {
			id := put(t, c, cmManifest)
			c.DeleteDownstream(id)
			clk.at = created.Add(time.Hour)
			put(t, c, cmManifest)
		}, domain.Observation{State: domain.ObjectPresent, Created: created.Add(time.Hour), Writes: enoWrote(created.Add(time.Hour)), UID: "00000000-0000-4000-9000-000000000002"}},
		{"deleted", func(t *testing.T, c *memory.Cluster, _ *clock) {
			c.DeleteDownstream(put(t, c, cmManifest))
		}, domain.Observation{State: domain.ObjectAbsent}},
		{"unreadable though present", func(t *testing.T, c *memory.Cluster, _ *clock) {
			c.MarkUnreadable(put(t, c, cmManifest), "forbidden")
		}, domain.Observation{State: domain.ObjectUnreadable, Detail: "forbidden"}},
		{"unreadable hides NotFound too", func(_ *testing.T, c *memory.Cluster, _ *clock) {
			c.MarkUnreadable(cm.ID(), "no kind ConfigMap")
		}, domain.Observation{State: domain.ObjectUnreadable, Detail: "no kind ConfigMap"}},
		{"readable again", func(t *testing.T, c *memory.Cluster, _ *clock) {
			id := put(t, c, cmManifest)
			c.MarkUnreadable(id, "forbidden")
			c.MarkUnreadable(id, "")
		}, domain.Observation{State: domain.ObjectPresent, Created: created, Writes: enoWrote(created), UID: firstUID}},
		{"another object's mark does not apply", func(t *testing.T, c *memory.Cluster, _ *clock) {
			put(t, c, cmManifest)
			c.MarkUnreadable(domain.ResourceID{Kind: "ConfigMap", Namespace: "other", Name: "cm"}, "forbidden")
		}, domain.Observation{State: domain.ObjectPresent, Created: created, Writes: enoWrote(created), UID: firstUID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{at: created}
			c := memory.NewCluster(inventoryNamespace)
			c.SetClock(clk.now)
			tt.setup(t, c, clk)
			got, err := c.ObserveObject(t.Context(), cm)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	t.Run("a cancelled context reads nothing", func(t *testing.T) {
		c := memory.NewCluster(inventoryNamespace)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := c.ObserveObject(ctx, cm)
		assert.ErrorIs(t, err, context.Canceled)
	})
}

func enoWrote(at time.Time) []domain.ObjectWrite {
	return []domain.ObjectWrite{{Manager: "eno", Time: at}}
}

func put(t *testing.T, c *memory.Cluster, manifest string) domain.ResourceID {
	t.Helper()
	id, err := c.PutDownstream(manifest)
	require.NoError(t, err)
	return id
}

// A Secret's DataWrittenAt is the time of our write that last changed its data, as our
// managedFields' f:data entry says (design §6.3): a write of labels or annotations only keeps it,
// another client's write of the data makes it unknown.
func TestSecretDataWrittenAt(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 11, 0, 0, 0, time.UTC)
	chunk := domain.ChunkSecret{
		Namespace:   inventoryNamespace,
		Name:        "web-a6d6889313c2-0",
		Type:        domain.SecretType,
		Labels:      map[string]string{domain.LabelManagedBy: domain.ManagedByValue},
		Annotations: map[string]string{domain.AnnotationChunkIndex: "0"},
		Data:        map[string][]byte{domain.SecretDataKey: []byte(`[]`)},
		// Whatever a writer claims is not what the API server records.
		DataWrittenAt: t0.Add(-24 * time.Hour),
	}
	tests := []struct {
		name   string
		change func(s *domain.ChunkSecret)
		moves  bool
	}{
		{"labels only", func(s *domain.ChunkSecret) { s.Labels["x"] = "y" }, false},
		{"annotations only", func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationChunkCount] = "1" }, false},
		{"nothing", func(*domain.ChunkSecret) {}, false},
		{"a claimed write time only", func(s *domain.ChunkSecret) { s.DataWrittenAt = t0.Add(time.Hour) }, false},
		{"the data", func(s *domain.ChunkSecret) { s.Data[domain.SecretDataKey] = []byte(`[{}]`) }, true},
		{"another data key", func(s *domain.ChunkSecret) { s.Data["other"] = []byte(`x`) }, true},
		{"a data key removed", func(s *domain.ChunkSecret) { delete(s.Data, domain.SecretDataKey) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{at: t0.Add(400 * time.Millisecond)}
			c := memory.NewCluster(inventoryNamespace)
			c.SetClock(clk.now)
			created, err := c.CreateChunk(t.Context(), chunk.Clone())
			require.NoError(t, err)
			assert.Equal(t, t0, created.DataWrittenAt, "the create wrote the data, in whole seconds")

			clk.at = t0.Add(time.Minute)
			next := created.Clone()
			tt.change(&next)
			updated, err := c.UpdateChunk(t.Context(), next)
			require.NoError(t, err)
			want := t0
			if tt.moves {
				want = t0.Add(time.Minute)
			}
			assert.Equal(t, want, updated.DataWrittenAt)
			read, err := c.GetChunk(t.Context(), chunk.Name)
			require.NoError(t, err)
			assert.Equal(t, want, read.DataWrittenAt, "what is read back")

			// Another client's write (PutSecret) counts the same way.
			clk.at = t0.Add(time.Hour)
			again := read.Clone()
			again.Labels["by"] = "hand"
			put, err := c.PutSecret(again)
			require.NoError(t, err)
			assert.Equal(t, want, put.DataWrittenAt, "a label write by hand keeps it")
			again.Data[domain.SecretDataKey] = []byte(`[{"by":"hand"}]`)
			put, err = c.PutSecret(again)
			require.NoError(t, err)
			assert.True(t, put.DataWrittenAt.IsZero(), "a data write by hand makes it unknown (design §6.3, stripped history)")
		})
	}
}

// A manifest without an identity is refused; a cluster-scoped one has no namespace.
func TestPutDownstream(t *testing.T) {
	c := memory.NewCluster(domain.DefaultInventoryNamespace)
	_, err := c.PutDownstream(`{"kind":"ConfigMap"}`)
	require.Error(t, err)
	assert.Equal(t, domain.ResourceID{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "r"},
		put(t, c, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r"}}`))
}
