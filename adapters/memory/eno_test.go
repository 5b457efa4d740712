package memory_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

var (
	enoRef   = domain.CompositionRef{Namespace: "team-a", Name: "web"}
	enoClock = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
)

func cm(name string) string {
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": enoRef.Namespace}})
	return string(b)
}

func cmID(name string) domain.ResourceID {
	return domain.ResourceID{Kind: "ConfigMap", Namespace: enoRef.Namespace, Name: name}
}

func patchOf(name string) string {
	b, _ := json.Marshal(map[string]any{"apiVersion": "eno.azure.io/v1", "kind": "Patch",
		"metadata": map[string]any{"name": name, "namespace": enoRef.Namespace},
		"patch":    map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "ops": []any{}}})
	return string(b)
}

// newEno is an empty Cluster with one opted-in Composition that has never synthesized.
func newEno(t *testing.T) (*memory.Cluster, *memory.Eno) {
	t.Helper()
	c := memory.NewCluster(inventoryNamespace)
	c.PutComposition(domain.Composition{Namespace: enoRef.Namespace, Name: enoRef.Name,
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue}})
	return c, memory.NewEno(c, func() time.Time { return enoClock })
}

// content is what a synthesis's slices hold: names of produced ConfigMaps (and Patches, as
// "patch:<name>") and of tombstones, in slice order.
type content struct {
	produced, tombstones []string
}

func contentOf(t *testing.T, c *memory.Cluster, comp domain.Composition) content {
	t.Helper()
	var out content
	for _, name := range comp.Synthesis.Slices {
		s, err := c.GetSlice(t.Context(), comp.Namespace, name)
		require.NoError(t, err)
		for _, r := range s.Resources {
			var m struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.Manifest), &m))
			n := m.Metadata.Name
			if m.Kind == "Patch" {
				n = "patch:" + n
			}
			if r.Deleted {
				out.tombstones = append(out.tombstones, n)
			} else {
				out.produced = append(out.produced, n)
			}
		}
	}
	return out
}

func TestEnoSynthesizeStampsSlicesLikeEno(t *testing.T) {
	c, eno := newEno(t)
	first, err := eno.Synthesize(enoRef, cm("a"), cm("b"))
	require.NoError(t, err)
	second, err := eno.Synthesize(enoRef, cm("a"))
	require.NoError(t, err)

	tests := []struct {
		name      string
		comp      domain.Composition
		wantStamp string
	}{
		{"a Composition's first synthesis is stamped empty", first, ""},
		{"a later synthesis is stamped with the previous UUID", second, first.SynthesisUUID()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NotNil(t, tt.comp.Synthesis)
			require.NotEmpty(t, tt.comp.Synthesis.Slices)
			assert.Equal(t, enoClock, tt.comp.Synthesis.Synthesized)
			assert.False(t, tt.comp.Synthesis.Ready, "a new synthesis is not Ready until reconciled")
			for _, name := range tt.comp.Synthesis.Slices {
				s, err := c.GetSlice(t.Context(), enoRef.Namespace, name)
				require.NoError(t, err)
				assert.Equal(t, tt.wantStamp, s.SynthesisUUID)
				assert.Equal(t, tt.comp.UID, c.SliceOwner(enoRef.Namespace, name), "Eno's slices are owned by the Composition")
			}
		})
	}
	assert.Equal(t, "00000001-e0e0-4000-8000-000000000001", first.SynthesisUUID(), "UUIDs come from a counter")
	assert.Equal(t, "00000002-e0e0-4000-8000-000000000002", second.SynthesisUUID())
}

func TestEnoSynthesizeCarriesAndWritesTombstones(t *testing.T) {
	tests := []struct {
		name string
		// setup runs after a first synthesis producing a, b and patch:p; downstream holds a and b.
		setup func(t *testing.T, c *memory.Cluster, comp domain.Composition)
		next  []string
		want  content
	}{
		{
			name: "a resource the new output lacks is tombstoned; a Patch is not",
			next: []string{cm("a")},
			want: content{produced: []string{"a"}, tombstones: []string{"b"}},
		},
		{
			name: "everything kept: no tombstone",
			next: []string{cm("a"), cm("b"), patchOf("p")},
			want: content{produced: []string{"a", "b", "patch:p"}},
		},
		{
			name: "a tombstone in a recovery slice the synthesis names is carried while its object exists",
			setup: func(t *testing.T, c *memory.Cluster, comp domain.Composition) {
				_, err := c.PutDownstream(cm("orphan"))
				require.NoError(t, err)
				commitRecoverySlice(t, c, comp, "orphan")
			},
			next: []string{cm("a"), cm("b"), patchOf("p")},
			want: content{produced: []string{"a", "b", "patch:p"}, tombstones: []string{"orphan"}},
		},
		{
			name: "a reconciled tombstone (object gone) is dropped",
			setup: func(t *testing.T, c *memory.Cluster, comp domain.Composition) {
				commitRecoverySlice(t, c, comp, "orphan")
			},
			next: []string{cm("a"), cm("b"), patchOf("p")},
			want: content{produced: []string{"a", "b", "patch:p"}},
		},
		{
			name: "the new output wins over a tombstone of the same identity",
			setup: func(t *testing.T, c *memory.Cluster, comp domain.Composition) {
				_, err := c.PutDownstream(cm("orphan"))
				require.NoError(t, err)
				commitRecoverySlice(t, c, comp, "orphan")
			},
			next: []string{cm("a"), cm("b"), cm("orphan")},
			want: content{produced: []string{"a", "b", "orphan"}},
		},
		{
			name: "an empty synthesis tombstones everything",
			next: nil,
			want: content{tombstones: []string{"a", "b"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, eno := newEno(t)
			comp, err := eno.Synthesize(enoRef, cm("a"), cm("b"), patchOf("p"))
			require.NoError(t, err)
			comp, err = eno.Reconcile(enoRef)
			require.NoError(t, err)
			if tt.setup != nil {
				tt.setup(t, c, comp)
				comp, err = c.LiveComposition(t.Context(), enoRef)
				require.NoError(t, err)
			}
			next, err := eno.Synthesize(enoRef, tt.next...)
			require.NoError(t, err)
			assert.NotEqual(t, comp.SynthesisUUID(), next.SynthesisUUID())
			assert.Equal(t, tt.want, contentOf(t, c, next))
		})
	}
}

// commitRecoverySlice hands tombstones of the named ConfigMaps to comp's current synthesis
// through the Cluster's sink, as recovery does (design §6.2): each names the UID it has now, the
// history is as new as the newest of them, and the Composition is armed before the commit.
func commitRecoverySlice(t *testing.T, c *memory.Cluster, comp domain.Composition, names ...string) string {
	t.Helper()
	ts := make([]domain.Tombstone, len(names))
	written := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	for i, n := range names {
		e := domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: enoRef.Namespace, Name: n}
		o, err := c.ObserveObject(t.Context(), e)
		require.NoError(t, err)
		ts[i] = domain.Tombstone{Entry: e, UID: testUID} // an absent object's tombstone deletes nothing
		if o.State == domain.ObjectPresent {
			ts[i].UID = o.UID
		}
		for _, w := range o.Writes {
			if w.Time.After(written) {
				written = w.Time
			}
		}
	}
	h, err := domain.NewHandoff(domain.RecoveryPlan{
		Decision:       domain.Decision{SynthesisUUID: comp.SynthesisUUID(), Outcome: domain.OutcomeRecovered, Tombstones: len(ts)},
		Tombstones:     ts,
		HistoryWritten: written,
	})
	require.NoError(t, err)
	armed, err := c.ArmTombstones(t.Context(), comp, h.Digest)
	require.NoError(t, err)
	name, err := c.CreateRecoverySlice(t.Context(), armed, h, 0)
	require.NoError(t, err)
	_, err = c.AppendRecoverySlice(t.Context(), armed, name)
	require.NoError(t, err)
	return name
}

func TestEnoSlicesPerSynthesis(t *testing.T) {
	tests := []struct {
		name      string
		per       int
		manifests []string
		want      int
	}{
		{"no limit: one slice", 0, []string{cm("a"), cm("b"), cm("c")}, 1},
		{"two per slice", 2, []string{cm("a"), cm("b"), cm("c")}, 2},
		{"exactly full", 3, []string{cm("a"), cm("b"), cm("c")}, 1},
		{"an empty synthesis has no slices", 2, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, eno := newEno(t)
			eno.ResourcesPerSlice = tt.per
			comp, err := eno.Synthesize(enoRef, tt.manifests...)
			require.NoError(t, err)
			assert.Len(t, comp.Synthesis.Slices, tt.want)
			assert.Len(t, contentOf(t, c, comp).produced, len(tt.manifests))
		})
	}
}

func TestEnoReconcile(t *testing.T) {
	c, eno := newEno(t)
	_, err := c.PutDownstream(cm("by-hand"))
	require.NoError(t, err)
	_, err = eno.Synthesize(enoRef, cm("a"), cm("b"), patchOf("p"))
	require.NoError(t, err)
	comp, err := eno.Reconcile(enoRef)
	require.NoError(t, err)
	assert.True(t, comp.Synthesis.Ready)
	assert.Equal(t, []domain.ResourceID{cmID("a"), cmID("b"), cmID("by-hand")}, c.DownstreamObjects(), "a Patch creates nothing")

	_, err = eno.Synthesize(enoRef, cm("a"))
	require.NoError(t, err)
	assert.True(t, c.DownstreamExists(cmID("b")), "nothing is deleted before reconciliation")
	comp, err = eno.Reconcile(enoRef)
	require.NoError(t, err)
	assert.True(t, comp.Synthesis.Ready)
	assert.Equal(t, []domain.ResourceID{cmID("a"), cmID("by-hand")}, c.DownstreamObjects(),
		"the tombstone's object is deleted; an object Eno never tombstoned stays")

	t.Run("a missing slice changes nothing", func(t *testing.T) {
		c, eno := newEno(t)
		comp, err := eno.Synthesize(enoRef, cm("a"))
		require.NoError(t, err)
		require.NoError(t, c.DeleteSlice(enoRef.Namespace, comp.Synthesis.Slices[0]))
		_, err = eno.Reconcile(enoRef)
		require.ErrorIs(t, err, ports.ErrNotFound)
		assert.Empty(t, c.DownstreamObjects())
		live, err := c.LiveComposition(t.Context(), enoRef)
		require.NoError(t, err)
		assert.False(t, live.Synthesis.Ready)
	})
	t.Run("no synthesis or no Composition", func(t *testing.T) {
		c, eno := newEno(t)
		_, err := eno.Reconcile(enoRef)
		require.Error(t, err)
		require.NoError(t, c.DeleteComposition(enoRef))
		_, err = eno.Reconcile(enoRef)
		require.ErrorIs(t, err, ports.ErrNotFound)
		_, err = eno.Synthesize(enoRef, cm("a"))
		require.ErrorIs(t, err, ports.ErrNotFound)
		_, _, err = eno.ResynthesizeIfForced(enoRef)
		require.ErrorIs(t, err, ports.ErrNotFound)
	})
}

func TestEnoResynthesizeIfForced(t *testing.T) {
	tests := []struct {
		name string
		// force sets the annotation (and maybe an in-flight synthesis) on the Composition
		// whose current synthesis is current and whose previous one is previous.
		force func(t *testing.T, c *memory.Cluster, previous, current string)
		want  bool
	}{
		{"no annotation", func(*testing.T, *memory.Cluster, string, string) {}, false},
		{"the current synthesis", func(t *testing.T, c *memory.Cluster, _, current string) {
			annotate(t, c, current)
		}, true},
		{"an older synthesis: nothing, Eno never clears the annotation", func(t *testing.T, c *memory.Cluster, previous, _ string) {
			annotate(t, c, previous)
		}, false},
		{"the in-flight synthesis", func(t *testing.T, c *memory.Cluster, _, _ string) {
			annotate(t, c, "in-flight")
			setInFlight(t, c, "in-flight")
		}, true},
		{"the current synthesis while another is in flight", func(t *testing.T, c *memory.Cluster, _, current string) {
			annotate(t, c, current)
			setInFlight(t, c, "in-flight")
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, eno := newEno(t)
			previous, err := eno.Synthesize(enoRef, cm("a"), cm("b"))
			require.NoError(t, err)
			current, err := eno.Synthesize(enoRef, cm("a"))
			require.NoError(t, err)
			tt.force(t, c, previous.SynthesisUUID(), current.SynthesisUUID())
			before, err := c.LiveComposition(t.Context(), enoRef)
			require.NoError(t, err)

			got, did, err := eno.ResynthesizeIfForced(enoRef)
			require.NoError(t, err)
			require.Equal(t, tt.want, did)
			if !tt.want {
				assert.Equal(t, before, got, "nothing changed")
				return
			}
			assert.NotEqual(t, current.SynthesisUUID(), got.SynthesisUUID())
			assert.Empty(t, got.InFlightSynthesis)
			assert.Equal(t, content{produced: []string{"a"}}, contentOf(t, c, got), "the same synthesizer output")
			s, err := c.GetSlice(t.Context(), enoRef.Namespace, got.Synthesis.Slices[0])
			require.NoError(t, err)
			assert.Equal(t, current.SynthesisUUID(), s.SynthesisUUID)

			// The annotation stays, and names an older synthesis now: no loop.
			again, did, err := eno.ResynthesizeIfForced(enoRef)
			require.NoError(t, err)
			assert.False(t, did)
			assert.Equal(t, got.SynthesisUUID(), again.SynthesisUUID())
		})
	}

	t.Run("a recreated Composition that Eno never synthesized has no known output", func(t *testing.T) {
		c, eno := newEno(t)
		_, err := eno.Synthesize(enoRef, cm("a"))
		require.NoError(t, err)
		require.NoError(t, c.DeleteComposition(enoRef))
		c.PutComposition(domain.Composition{Namespace: enoRef.Namespace, Name: enoRef.Name,
			Synthesis: &domain.Synthesis{UUID: "by-hand", Synthesized: enoClock}})
		annotate(t, c, "by-hand")
		_, _, err = eno.ResynthesizeIfForced(enoRef)
		require.Error(t, err)
	})
}

func annotate(t *testing.T, c *memory.Cluster, uuid string) {
	t.Helper()
	_, err := c.SetAnnotation(enoRef, domain.AnnotationForceResynthesis, uuid)
	require.NoError(t, err)
}

func setInFlight(t *testing.T, c *memory.Cluster, uuid string) {
	t.Helper()
	comp, err := c.LiveComposition(t.Context(), enoRef)
	require.NoError(t, err)
	comp.InFlightSynthesis = uuid
	_, err = c.UpdateComposition(comp)
	require.NoError(t, err)
}

// The story the hand-off relies on (design §6.2): a tombstone in the committed recovery slice
// becomes Eno's own at the next synthesis, and Eno deletes the orphan downstream.
func TestEnoDeletesAHandedOffOrphan(t *testing.T) {
	c, eno := newEno(t)
	_, err := eno.Synthesize(enoRef, cm("a"), cm("orphan"))
	require.NoError(t, err)
	_, err = eno.Reconcile(enoRef)
	require.NoError(t, err)
	// Deleted with an orphaning strategy and recreated without the orphan.
	require.NoError(t, c.DeleteComposition(enoRef))
	c.PutComposition(domain.Composition{Namespace: enoRef.Namespace, Name: enoRef.Name})
	recreated, err := eno.Synthesize(enoRef, cm("a"))
	require.NoError(t, err)
	recreated, err = eno.Reconcile(enoRef)
	require.NoError(t, err)
	assert.Equal(t, []domain.ResourceID{cmID("a"), cmID("orphan")}, c.DownstreamObjects(), "orphaned")

	slice := commitRecoverySlice(t, c, recreated, "orphan")
	live, err := c.LiveComposition(t.Context(), enoRef)
	require.NoError(t, err)
	require.NoError(t, c.RequestResynthesis(t.Context(), live))

	next, did, err := eno.ResynthesizeIfForced(enoRef)
	require.NoError(t, err)
	require.True(t, did)
	assert.NotContains(t, next.Synthesis.Slices, slice)
	assert.Equal(t, content{produced: []string{"a"}, tombstones: []string{"orphan"}}, contentOf(t, c, next))
	_, err = eno.Reconcile(enoRef)
	require.NoError(t, err)
	assert.Equal(t, []domain.ResourceID{cmID("a")}, c.DownstreamObjects(), "Eno deleted the orphan, and only it")

	// The next synthesis drops the reconciled tombstone.
	after, err := eno.Synthesize(enoRef, cm("a"))
	require.NoError(t, err)
	assert.Equal(t, content{produced: []string{"a"}}, contentOf(t, c, after))
}

func TestDownstreamObjects(t *testing.T) {
	c := memory.NewCluster(inventoryNamespace)
	for _, m := range []string{cm("b"), cm("a"),
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r"}}`} {
		_, err := c.PutDownstream(m)
		require.NoError(t, err)
	}
	_, err := c.PutDownstream(`{"kind":"ConfigMap"}`)
	require.Error(t, err)
	role := domain.ResourceID{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "r"}
	assert.Equal(t, []domain.ResourceID{cmID("a"), cmID("b"), role}, c.DownstreamObjects(), "canonical order")
	assert.True(t, c.DownstreamExists(role))
	c.DeleteDownstream(role)
	assert.False(t, c.DownstreamExists(role))
}

// As stock Eno, the model evaluates a tombstone's precondition on its live read: a disarmed
// hand-off, or an object re-created since (another UID), deletes nothing (design §6.2).
func TestEnoKeepsWhatATombstonesPreconditionProtects(t *testing.T) {
	for name, tt := range map[string]struct {
		act  func(t *testing.T, c *memory.Cluster)
		want []domain.ResourceID
	}{
		"armed: the orphan goes": {act: func(*testing.T, *memory.Cluster) {}, want: []domain.ResourceID{cmID("a")}},
		"disarmed: both stay": {act: func(t *testing.T, c *memory.Cluster) {
			live, err := c.LiveComposition(t.Context(), enoRef)
			require.NoError(t, err)
			require.NoError(t, c.DisarmTombstones(t.Context(), live))
			require.ErrorIs(t, c.DisarmTombstones(t.Context(), live), ports.ErrConflict, "guarded by the resourceVersion read")
		}, want: []domain.ResourceID{cmID("a"), cmID("orphan")}},
		"re-created by hand: it stays": {act: func(t *testing.T, c *memory.Cluster) {
			c.DeleteDownstream(cmID("orphan"))
			_, err := c.PutDownstream(cm("orphan"))
			require.NoError(t, err)
		}, want: []domain.ResourceID{cmID("a"), cmID("orphan")}},
	} {
		t.Run(name, func(t *testing.T) {
			c, eno := newEno(t)
			_, err := eno.Synthesize(enoRef, cm("a"), cm("orphan"))
			require.NoError(t, err)
			_, err = eno.Reconcile(enoRef)
			require.NoError(t, err)
			require.NoError(t, c.DeleteComposition(enoRef))
			c.PutComposition(domain.Composition{Namespace: enoRef.Namespace, Name: enoRef.Name})
			recreated, err := eno.Synthesize(enoRef, cm("a"))
			require.NoError(t, err)
			recreated, err = eno.Reconcile(enoRef)
			require.NoError(t, err)
			commitRecoverySlice(t, c, recreated, "orphan")
			tt.act(t, c)
			_, err = eno.Reconcile(enoRef)
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.DownstreamObjects())
		})
	}
}
