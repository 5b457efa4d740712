package app_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
	"github.com/Azure/eno-tombstone-recovery/ports/portsfakes"
)

// pruneSecrets records one chunk each for team-a/<names>, every lineage its own, written at
// historyWritten.
func pruneSecrets(t *testing.T, names ...string) []domain.ChunkSecret {
	t.Helper()
	var out []domain.ChunkSecret
	for i, name := range names {
		inv, err := domain.NewInventory([]domain.Entry{{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: name}})
		require.NoError(t, err)
		chunks, err := domain.SplitInventory(inv, 1000, 0)
		require.NoError(t, err)
		meta := domain.SnapshotMeta{Lineage: domain.DefaultLineage("team-a", name), CompositionNamespace: "team-a", CompositionName: name,
			CompositionUID: "uid-" + name, SynthesisUUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), SynthesisTime: historyWritten, ChunkCount: 1, Digest: inv.Digest()}
		s := domain.DesiredChunkSecret(domain.DefaultInventoryNamespace, meta, chunks[0])
		s.UID, s.ResourceVersion, s.DataWrittenAt = "secret-uid-"+name, strconv.Itoa(i+1), historyWritten
		out = append(out, s)
	}
	return out
}

type pruneFixture struct {
	live      *portsfakes.FakeLiveReader
	lister    *portsfakes.FakeCompositionLister
	inventory *portsfakes.FakeInventoryPruner
}

// newPruneFixture: team-a/live exists, team-a/gone and team-a/gone2 do not, and their Secrets
// are two hours old against --older-than 1h.
func newPruneFixture(t *testing.T) (pruneFixture, *app.Pruner) {
	t.Helper()
	f := pruneFixture{live: &portsfakes.FakeLiveReader{}, lister: &portsfakes.FakeCompositionLister{}, inventory: &portsfakes.FakeInventoryPruner{}}
	secrets := pruneSecrets(t, "live", "gone", "gone2")
	f.inventory.ListInventoryReturns(secrets, nil)
	f.inventory.ListChunksCalls(func(_ context.Context, l domain.Lineage) ([]domain.ChunkSecret, error) {
		var out []domain.ChunkSecret
		for _, s := range secrets {
			if s.Labels[domain.LabelLineage] == l.String() {
				out = append(out, s)
			}
		}
		return out, nil
	})
	f.live.LiveCompositionCalls(func(_ context.Context, ref domain.CompositionRef) (domain.Composition, error) {
		if ref.Name == "live" {
			return domain.Composition{Namespace: ref.Namespace, Name: ref.Name, UID: "uid-live"}, nil
		}
		return domain.Composition{}, fmt.Errorf("composition %s: %w", ref, errNotFound)
	})
	p, err := app.NewPruner(app.PruneConfig{InventoryNamespace: domain.DefaultInventoryNamespace, OlderThan: time.Hour, ControlPlane: thisControlPlane,
		Now: func() time.Time { return historyWritten.Add(2 * time.Hour) }},
		app.PruneDeps{Compositions: f.live, Lister: f.lister, Inventory: f.inventory})
	require.NoError(t, err)
	return f, p
}

func TestPrunePlansGoneLineagesAndReadsEachCompositionOnce(t *testing.T) {
	f, p := newPruneFixture(t)
	report, _, err := p.Plan(ctx(t))
	require.NoError(t, err)
	require.Equal(t, 2, report.Total)
	for _, s := range report.Secrets {
		assert.Equal(t, domain.PruneLineageGone.String(), s.Reason)
		assert.Equal(t, app.PruneWouldDelete, s.Result)
	}
	assert.Equal(t, 3, f.live.LiveCompositionCallCount(), "each recorded Composition is read once")
	assert.Zero(t, f.inventory.DeleteChunkCallCount(), "planning deletes nothing")
}

func TestPruneKeepsALineageWhoseCompositionCannotBeRead(t *testing.T) {
	f, p := newPruneFixture(t)
	live := f.live.LiveCompositionStub
	f.live.LiveCompositionCalls(func(c context.Context, ref domain.CompositionRef) (domain.Composition, error) {
		if ref.Name == "gone2" {
			return domain.Composition{}, fmt.Errorf("composition %s: %w", ref, ports.ErrForbidden)
		}
		return live(c, ref)
	})
	report, _, err := p.Plan(ctx(t))
	require.NoError(t, err)
	require.Equal(t, 1, report.Total)
	assert.Equal(t, "gone-"+domain.DefaultLineage("team-a", "gone").String()+"-0", report.Secrets[0].Name)
	require.Len(t, report.Kept, 1)
	assert.Contains(t, report.Kept[0].Why, "whether Composition team-a/gone2 exists is not known")
}

func TestPruneConfirmStopsAtAFailedDelete(t *testing.T) {
	f, p := newPruneFixture(t)
	f.inventory.DeleteChunkReturnsOnCall(0, nil)
	f.inventory.DeleteChunkReturnsOnCall(1, fmt.Errorf("deleting inventory secret kube-system/x: %w", ports.ErrForbidden))
	report, sel, err := p.Plan(ctx(t))
	require.NoError(t, err)
	err = p.Confirm(ctx(t), sel, report)
	require.ErrorIs(t, err, ports.ErrForbidden)
	assert.Contains(t, err.Error(), "1 deleted and 0 skipped before it; nothing else was deleted: fix the cause and run prune again")
	assert.Equal(t, 1, report.Deleted)
	assert.Equal(t, app.PruneDeleted, report.Secrets[0].Result)
	assert.Equal(t, app.PruneWouldDelete, report.Secrets[1].Result)
}

func TestPruneConfirmSkipsWhatIsGoneOrChanged(t *testing.T) {
	f, p := newPruneFixture(t)
	f.inventory.DeleteChunkReturnsOnCall(0, fmt.Errorf("x: %w", ports.ErrConflict))
	f.inventory.DeleteChunkReturnsOnCall(1, fmt.Errorf("x: %w", ports.ErrNotFound))
	report, sel, err := p.Plan(ctx(t))
	require.NoError(t, err)
	require.NoError(t, p.Confirm(ctx(t), sel, report))
	assert.Equal(t, 2, report.Skipped)
	assert.Contains(t, report.Secrets[0].SkipReason, "precondition failed")
	assert.Equal(t, "already gone", report.Secrets[1].SkipReason)
	_, deleted := f.inventory.DeleteChunkArgsForCall(0)
	assert.Equal(t, "secret-uid-gone", deleted.UID, "deleted with the UID listed")
}

func TestPruneSaysWhatItCouldNotRead(t *testing.T) {
	t.Run("the inventory", func(t *testing.T) {
		f, p := newPruneFixture(t)
		f.inventory.ListInventoryReturns(nil, errors.New("listing inventory secrets in namespace kube-system: forbidden"))
		_, _, err := p.Plan(ctx(t))
		assert.ErrorContains(t, err, "listing inventory secrets in namespace kube-system: forbidden")
	})
	t.Run("the Compositions", func(t *testing.T) {
		f, p := newPruneFixture(t)
		f.lister.ListCompositionsReturns(nil, errors.New("connection refused"))
		_, _, err := p.Plan(ctx(t))
		assert.ErrorContains(t, err, "listing the Compositions of the control plane: connection refused")
	})
	t.Run("settings", func(t *testing.T) {
		_, err := app.NewPruner(app.PruneConfig{OlderThan: 0}, app.PruneDeps{Compositions: &portsfakes.FakeLiveReader{},
			Lister: &portsfakes.FakeCompositionLister{}, Inventory: &portsfakes.FakeInventoryPruner{}})
		assert.ErrorContains(t, err, "must be positive")
		_, err = app.NewPruner(app.PruneConfig{OlderThan: time.Hour}, app.PruneDeps{})
		assert.ErrorContains(t, err, "prune needs")
	})
}
