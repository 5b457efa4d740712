package contract

import (
	"bytes"
	"crypto/rand"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// concurrentWriters is how many goroutines race to update one Secret.
const concurrentWriters = 8

// RunSnapshotStore checks ports.SnapshotStore.
func RunSnapshotStore(t *testing.T, newHarness NewHarness) {
	t.Run("ListChunks returns every Secret with the lineage label, ours or not, and no other lineage", func(t *testing.T) {
		h := newHarness(t)
		store, ctx := h.Store(), t.Context()
		mine, other := uniqueLineage(t), uniqueLineage(t)
		a0 := create(t, h, ourChunk(h, uniqueName("a"), mine, []byte(`[]`)))
		a1 := create(t, h, ourChunk(h, uniqueName("a"), mine, []byte(`[{"version":"v1"}]`)))
		b0 := create(t, h, ourChunk(h, uniqueName("b"), other, []byte(`[]`)))
		foreign := h.PutForeignSecret(t, domain.ChunkSecret{
			Namespace: h.InventoryNamespace(), Name: uniqueName("foreign"), Type: "Opaque",
			Labels: map[string]string{domain.LabelLineage: mine.String()},
			Data:   map[string][]byte{"token": []byte("not an inventory")},
		})
		h.PutForeignSecret(t, domain.ChunkSecret{
			Namespace: h.InventoryNamespace(), Name: uniqueName("unlabelled"), Type: domain.SecretType,
			Labels: map[string]string{domain.LabelManagedBy: domain.ManagedByValue},
			Data:   map[string][]byte{domain.SecretDataKey: []byte(`[]`)},
		})

		got, err := store.ListChunks(ctx, mine)
		require.NoError(t, err)
		assertSecrets(t, []domain.ChunkSecret{a0, a1, foreign}, got)
		got, err = store.ListChunks(ctx, other)
		require.NoError(t, err)
		assertSecrets(t, []domain.ChunkSecret{b0}, got)
		got, err = store.ListChunks(ctx, uniqueLineage(t))
		require.NoError(t, err)
		assert.Empty(t, got)
	})

	t.Run("CreateChunk returns the stored Secret with a resourceVersion", func(t *testing.T) {
		h := newHarness(t)
		want := ourChunk(h, uniqueName("c"), uniqueLineage(t), []byte(`[]`))
		got, err := h.Store().CreateChunk(t.Context(), want)
		require.NoError(t, err)
		assert.NotEmpty(t, got.ResourceVersion)
		want.ResourceVersion = got.ResourceVersion
		assertSecret(t, want, got)
	})

	t.Run("CreateChunk on a taken name is ErrAlreadyExists and changes nothing", func(t *testing.T) {
		h := newHarness(t)
		lineage := uniqueLineage(t)
		first := create(t, h, ourChunk(h, uniqueName("c"), lineage, []byte(`[]`)))
		second := ourChunk(h, first.Name, lineage, []byte(`[{"version":"v2"}]`))
		_, err := h.Store().CreateChunk(t.Context(), second)
		require.ErrorIs(t, err, ports.ErrAlreadyExists)
		assertStored(t, h, lineage, first)
	})

	t.Run("GetChunk reads a name live, ours or not, with or without labels; ErrNotFound when absent", func(t *testing.T) {
		h := newHarness(t)
		store, ctx := h.Store(), t.Context()
		ours := create(t, h, ourChunk(h, uniqueName("g"), uniqueLineage(t), []byte(`[]`)))
		got, err := store.GetChunk(ctx, ours.Name)
		require.NoError(t, err)
		assertSecret(t, ours, got)
		// A Secret without any of our labels is found by its name alone.
		bare := h.PutForeignSecret(t, domain.ChunkSecret{
			Namespace: h.InventoryNamespace(), Name: uniqueName("bare"), Type: "Opaque",
			Data: map[string][]byte{"token": []byte("not an inventory")},
		})
		got, err = store.GetChunk(ctx, bare.Name)
		require.NoError(t, err)
		assertSecret(t, bare, got)
		assert.False(t, got.Owned())
		// Live: a change another client made is seen at once, not after a cache lag.
		changed := bare.Clone()
		changed.Data["token"] = []byte("changed")
		changed = h.PutForeignSecret(t, changed)
		got, err = store.GetChunk(ctx, bare.Name)
		require.NoError(t, err)
		assertSecret(t, changed, got)
		_, err = store.GetChunk(ctx, uniqueName("absent"))
		require.ErrorIs(t, err, ports.ErrNotFound)
	})

	t.Run("UpdateChunk at the current resourceVersion writes and bumps it", func(t *testing.T) {
		h := newHarness(t)
		lineage := uniqueLineage(t)
		old := create(t, h, ourChunk(h, uniqueName("c"), lineage, []byte(`[]`)))
		next := old.Clone()
		next.Data[domain.SecretDataKey] = []byte(`[{"version":"v2"}]`)
		next.Annotations[domain.AnnotationChunkIndex] = "0"
		got, err := h.Store().UpdateChunk(t.Context(), next)
		require.NoError(t, err)
		assert.NotEqual(t, old.ResourceVersion, got.ResourceVersion)
		next.ResourceVersion = got.ResourceVersion
		assertSecret(t, next, got)
		assertStored(t, h, lineage, next)
	})

	t.Run("UpdateChunk at a stale resourceVersion is ErrConflict and changes nothing", func(t *testing.T) {
		h := newHarness(t)
		lineage := uniqueLineage(t)
		stale := create(t, h, ourChunk(h, uniqueName("c"), lineage, []byte(`[]`)))
		current := update(t, h, stale, []byte(`[{"version":"v2"}]`))
		late := stale.Clone()
		late.Data[domain.SecretDataKey] = []byte(`[{"version":"v3"}]`)
		_, err := h.Store().UpdateChunk(t.Context(), late)
		require.ErrorIs(t, err, ports.ErrConflict)
		assertStored(t, h, lineage, current)
	})

	t.Run("UpdateChunk without a resourceVersion is ErrConflict, never an unconditional write", func(t *testing.T) {
		h := newHarness(t)
		lineage := uniqueLineage(t)
		stored := create(t, h, ourChunk(h, uniqueName("c"), lineage, []byte(`[]`)))
		blind := stored.Clone()
		blind.ResourceVersion = ""
		blind.Data[domain.SecretDataKey] = []byte(`[{"version":"v2"}]`)
		_, err := h.Store().UpdateChunk(t.Context(), blind)
		require.ErrorIs(t, err, ports.ErrConflict)
		assertStored(t, h, lineage, stored)
	})

	t.Run("UpdateChunk of a missing Secret is ErrNotFound", func(t *testing.T) {
		h := newHarness(t)
		missing := ourChunk(h, uniqueName("missing"), uniqueLineage(t), []byte(`[]`))
		missing.ResourceVersion = "1"
		_, err := h.Store().UpdateChunk(t.Context(), missing)
		require.ErrorIs(t, err, ports.ErrNotFound)
	})

	t.Run("UpdateChunk cannot change the Secret type", func(t *testing.T) {
		h := newHarness(t)
		lineage := uniqueLineage(t)
		stored := create(t, h, ourChunk(h, uniqueName("c"), lineage, []byte(`[]`)))
		retyped := stored.Clone()
		retyped.Type = "Opaque"
		_, err := h.Store().UpdateChunk(t.Context(), retyped)
		require.Error(t, err)
		assertStored(t, h, lineage, stored)
	})

	t.Run("labels and annotations others added survive a MergeDesired update", func(t *testing.T) {
		h := newHarness(t)
		lineage := uniqueLineage(t)
		desired := ourChunk(h, uniqueName("c"), lineage, []byte(`[]`))
		tagged := create(t, h, desired).Clone()
		tagged.Labels["example.com/team"] = "platform"
		tagged.Annotations["example.com/note"] = "kept by backup tooling"
		h.PutForeignSecret(t, tagged)
		listed, err := h.Store().ListChunks(t.Context(), lineage)
		require.NoError(t, err)
		require.Len(t, listed, 1)

		desired.Data[domain.SecretDataKey] = []byte(`[{"version":"v2"}]`)
		got, err := h.Store().UpdateChunk(t.Context(), listed[0].MergeDesired(desired))
		require.NoError(t, err)
		assert.Equal(t, "platform", got.Labels["example.com/team"])
		assert.Equal(t, "kept by backup tooling", got.Annotations["example.com/note"])
		assert.True(t, got.MatchesDesired(desired), "the update must hold the desired chunk")
		assertStored(t, h, lineage, got)
	})

	t.Run("writes outside the inventory namespace are refused", func(t *testing.T) {
		h := newHarness(t)
		outside := ourChunk(h, uniqueName("c"), uniqueLineage(t), []byte(`[]`))
		outside.Namespace = h.InventoryNamespace() + "-elsewhere"
		_, err := h.Store().CreateChunk(t.Context(), outside)
		require.ErrorIs(t, err, ports.ErrOutsideInventoryNamespace)
		outside.ResourceVersion = "1"
		_, err = h.Store().UpdateChunk(t.Context(), outside)
		require.ErrorIs(t, err, ports.ErrOutsideInventoryNamespace)
	})

	t.Run("data of exactly 1048576 bytes round-trips byte for byte", func(t *testing.T) {
		h := newHarness(t)
		lineage := uniqueLineage(t)
		data := randomBytes(domain.SecretDataLimit)
		stored := create(t, h, ourChunk(h, uniqueName("big"), lineage, data))
		assertStored(t, h, lineage, stored)

		replacement := randomBytes(domain.SecretDataLimit)
		assertStored(t, h, lineage, update(t, h, stored, replacement))
	})

	t.Run("data over 1048576 bytes is refused and nothing is stored", func(t *testing.T) {
		h := newHarness(t)
		lineage := uniqueLineage(t)
		_, err := h.Store().CreateChunk(t.Context(), ourChunk(h, uniqueName("huge"), lineage, randomBytes(domain.SecretDataLimit+1)))
		require.Error(t, err)
		got, err := h.Store().ListChunks(t.Context(), lineage)
		require.NoError(t, err)
		assert.Empty(t, got)
	})

	t.Run("ListCachedChunks eventually reflects creates and updates, metadata only", func(t *testing.T) {
		h := newHarness(t)
		lineage := uniqueLineage(t)
		cachedHolds := func(want domain.ChunkSecret) func() bool {
			return func() bool {
				got, err := h.Store().ListCachedChunks(t.Context(), lineage)
				return err == nil && len(got) == 1 && got[0].ResourceVersion == want.ResourceVersion &&
					got[0].Type == want.Type && maps.Equal(got[0].Annotations, want.Annotations) && got[0].Data == nil
			}
		}
		stored := create(t, h, ourChunk(h, uniqueName("c"), lineage, []byte(`[]`)))
		h.Eventually(t, cachedHolds(stored))
		h.Eventually(t, cachedHolds(update(t, h, stored, []byte(`[{"version":"v2"}]`))))
	})

	t.Run("concurrent updates from one resourceVersion: exactly one wins", func(t *testing.T) {
		h := newHarness(t)
		lineage := uniqueLineage(t)
		base := create(t, h, ourChunk(h, uniqueName("race"), lineage, []byte(`[]`)))
		var (
			start   = make(chan struct{})
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []domain.ChunkSecret
			errs    []error
		)
		for i := range concurrentWriters {
			s := base.Clone()
			s.Data[domain.SecretDataKey] = []byte(`[{"version":"v` + string(rune('a'+i)) + `"}]`)
			wg.Go(func() {
				<-start
				got, err := h.Store().UpdateChunk(t.Context(), s)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				winners = append(winners, got)
			})
		}
		close(start)
		wg.Wait()
		require.Len(t, winners, 1, "exactly one writer must win; errors: %v", errs)
		for _, err := range errs {
			assert.ErrorIs(t, err, ports.ErrConflict)
		}
		assertStored(t, h, lineage, winners[0])
	})
}

// create stores s through the port and fails t otherwise.
func create(t testing.TB, h Harness, s domain.ChunkSecret) domain.ChunkSecret {
	t.Helper()
	got, err := h.Store().CreateChunk(t.Context(), s)
	require.NoError(t, err, "creating secret %s", s.Name)
	return got
}

// update replaces the chunk data of s at its resourceVersion and fails t otherwise.
func update(t testing.TB, h Harness, s domain.ChunkSecret, data []byte) domain.ChunkSecret {
	t.Helper()
	next := s.Clone()
	next.Data[domain.SecretDataKey] = data
	got, err := h.Store().UpdateChunk(t.Context(), next)
	require.NoError(t, err, "updating secret %s", s.Name)
	return got
}

// assertStored checks that the live list of the lineage holds exactly want.
func assertStored(t testing.TB, h Harness, lineage domain.Lineage, want domain.ChunkSecret) {
	t.Helper()
	got, err := h.Store().ListChunks(t.Context(), lineage)
	require.NoError(t, err)
	assertSecrets(t, []domain.ChunkSecret{want}, got)
}

// assertSecrets compares by name, ignoring order.
func assertSecrets(t testing.TB, want, got []domain.ChunkSecret) {
	t.Helper()
	names := func(ss []domain.ChunkSecret) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Name)
		}
		slices.Sort(out)
		return out
	}
	require.Equal(t, names(want), names(got))
	byName := map[string]domain.ChunkSecret{}
	for _, s := range got {
		byName[s.Name] = s
	}
	for _, w := range want {
		assertSecret(t, w, byName[w.Name])
	}
}

// assertSecret compares every field; nil and empty maps are equal, data is compared by bytes.
func assertSecret(t testing.TB, want, got domain.ChunkSecret) {
	t.Helper()
	assert.Equal(t, want.Namespace, got.Namespace, "namespace of %s", want.Name)
	assert.Equal(t, want.Name, got.Name)
	assert.Equal(t, want.Type, got.Type, "type of %s", want.Name)
	assert.Equal(t, want.ResourceVersion, got.ResourceVersion, "resourceVersion of %s", want.Name)
	assert.True(t, maps.Equal(want.Labels, got.Labels), "labels of %s: want %v, got %v", want.Name, want.Labels, got.Labels)
	assert.True(t, maps.Equal(want.Annotations, got.Annotations), "annotations of %s: want %v, got %v", want.Name, want.Annotations, got.Annotations)
	assert.True(t, maps.EqualFunc(want.Data, got.Data, bytes.Equal), "data of %s differs (%d bytes wanted, %d stored)", want.Name, want.DataSize(), got.DataSize())
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}
