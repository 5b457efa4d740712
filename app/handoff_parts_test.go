package app_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// largeOrphans is how many orphans largeRecoveryFixture hands over: with names of 200
// characters, more than Eno's slice budget of manifest JSON twice over.
const largeOrphans = 2500

// largeRecoveryFixture is a recreated Composition whose old incarnation had largeOrphans
// ConfigMaps with long names that the current synthesis no longer produces: the hand-off spans
// several recovery slices (design §6.2 step 1).
func largeRecoveryFixture(t *testing.T) *fixture {
	t.Helper()
	old := make([]res, largeOrphans)
	for i := range old {
		old[i] = cm(fmt.Sprintf("cm-%04d-%s", i, strings.Repeat("x", 192)))
	}
	f := newFixture(t)
	f.setSynthesis(synthID, []res{cm("kept")})
	f.comp = composition(uid, synthID, f.slices, false)
	f.comp.Synthesis.Ready = false
	f.cfg.MaxChunkBytes = domain.SecretDataLimit
	f.cfg.MaxTombstoneFraction = 1
	f.store.ListChunksReturns(snapshotSecrets(t, oldUID, oldSynth, oldTime, domain.SecretDataLimit, old), nil)
	return f
}

// publishedParts are the hand-off of the first publish and its recovery slices' names.
func publishedParts(t *testing.T, f *fixture) (domain.Handoff, []string) {
	t.Helper()
	_, _, h := f.sink.PublishTombstonesArgsForCall(0)
	parts, err := h.Parts()
	require.NoError(t, err)
	require.Greater(t, len(parts), 2, "the hand-off spans several recovery slices")
	return h, domain.RecoverySliceSeriesOf(name, synthID)[0].Names(len(parts))
}

func TestHandoffOfSeveralSlices(t *testing.T) {
	t.Run("every slice is published, then all are committed in one call, and the decision counts every tombstone", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		h, names := publishedParts(t, f)
		assert.Len(t, h.Resources, largeOrphans)

		require.Equal(t, 1, f.sink.PublishTombstonesCallCount())
		require.Equal(t, 1, f.sink.CommitTombstonesCallCount(), "one commit point for every slice")
		_, _, _, committed := f.sink.CommitTombstonesArgsForCall(0)
		assert.Equal(t, names, committed)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeRecovered, d.Outcome)
		assert.Equal(t, names[0], d.TombstoneSlice, "the decision names the first slice")
		assert.Equal(t, largeOrphans, d.Tombstones, "and counts the tombstones of all")
		_, _, ensured, eh := f.sink.EnsureTombstonesArgsForCall(0)
		assert.Equal(t, names, ensured, "step 4 checks every slice")
		assert.Equal(t, h, eh)
		assert.Equal(t, 1, f.sink.RequestResynthesisCallCount())
	})

	t.Run("a conflict at the second slice's publish: nothing committed; the next pass hands off every slice", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		publish := f.sink.PublishTombstonesStub
		f.sink.PublishTombstonesStub = nil
		second := domain.RecoverySliceSeriesOf(name, synthID)[0].Name(1)
		f.sink.PublishTombstonesReturnsOnCall(0, nil, fmt.Errorf("updating resource slice %s: %w", second, ports.ErrConflict))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.ErrorIs(t, err, ports.ErrConflict)
		assert.Zero(t, f.sink.CommitTombstonesCallCount())
		assert.Zero(t, f.decisions.WriteDecisionCallCount())

		h, names := publishedParts(t, f)
		_, err = publish(ctx(t), f.comp, h)
		require.NoError(t, err)
		f.sink.PublishTombstonesReturnsOnCall(1, names, nil)
		_, err = f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		_, _, again := f.sink.PublishTombstonesArgsForCall(1)
		assert.Equal(t, h, again, "the same slices are planned again")
		require.Equal(t, 1, f.sink.CommitTombstonesCallCount())
		_, _, _, committed := f.sink.CommitTombstonesArgsForCall(0)
		assert.Equal(t, names, committed)
		assert.Equal(t, largeOrphans, writtenDecision(t, f).Tombstones)
	})

	t.Run("the second slice terminating at the commit: no decision, retried", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		f.sink.CommitTombstonesStub = nil
		second := domain.RecoverySliceSeriesOf(name, synthID)[0].Name(1)
		f.sink.CommitTombstonesReturnsOnCall(0, fmt.Errorf("recovery slice %s is being deleted", second))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		var stale *app.StaleCompositionError
		assert.False(t, errors.As(err, &stale), "an error, not a Composition that moved on")
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
		assert.Zero(t, f.sink.RequestResynthesisCallCount())

		_, err = f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		_, names := publishedParts(t, f)
		require.Equal(t, 2, f.sink.CommitTombstonesCallCount())
		_, _, _, committed := f.sink.CommitTombstonesArgsForCall(1)
		assert.Equal(t, names, committed)
		assert.Equal(t, names[0], writtenDecision(t, f).TombstoneSlice)
	})

	t.Run("a crash after the commit resumes from every slice's content", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		f.decisions.WriteDecisionStub = nil
		f.decisions.WriteDecisionReturnsOnCall(0, errors.New("the process died"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		h, names := publishedParts(t, f)
		committed, ok := f.comp.CommittedRecoverySlices()
		require.True(t, ok)
		require.Equal(t, names, committed)
		listed, reads := f.store.ListChunksCallCount(), f.reader.GetSliceCallCount()

		res, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.True(t, res.Written)
		assert.Equal(t, listed, f.store.ListChunksCallCount(), "no new plan")
		assert.Equal(t, reads+len(names), f.reader.GetSliceCallCount(), "every slice read")
		assert.Equal(t, 1, f.sink.PublishTombstonesCallCount())
		_, _, d := f.decisions.WriteDecisionArgsForCall(1)
		assert.Equal(t, domain.OutcomeRecovered, d.Outcome)
		assert.Equal(t, names[0], d.TombstoneSlice)
		assert.Equal(t, largeOrphans, d.Tombstones, "written from the content of all")
		_, _, ensured, eh := f.sink.EnsureTombstonesArgsForCall(0)
		assert.Equal(t, names, ensured)
		assert.Equal(t, h, eh, "the resumed pass knows every slice's content")
	})

	t.Run("after the decision, a pass that finds a slice gone knows no content to create it from", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		_, names := publishedParts(t, f)
		delete(f.published, names[1])

		_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		require.Equal(t, 2, f.sink.EnsureTombstonesCallCount())
		_, _, ensured, h := f.sink.EnsureTombstonesArgsForCall(1)
		assert.Equal(t, names, ensured, "every slice is checked")
		assert.Empty(t, h.SynthesisUUID(), "the gone slice's tombstones are known to no one")
	})

	t.Run("a later slice that is no hand-off is never adopted", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		f.decisions.WriteDecisionStub = nil
		f.decisions.WriteDecisionReturnsOnCall(0, errors.New("the process died"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		_, names := publishedParts(t, f)
		spoiled := f.published[names[2]]
		spoiled.ControllerUID = "someone-else"
		f.published[names[2]] = spoiled

		_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
		var invalid *domain.RecoverySliceInvalidError
		require.ErrorAs(t, err, &invalid)
		assert.Equal(t, names[2], invalid.Slice)
		assert.Equal(t, 1, f.decisions.WriteDecisionCallCount(), "no decision written")
		assert.Equal(t, 1, f.sink.PublishTombstonesCallCount(), "nothing planned around it")
	})

	t.Run("a later slice gone before the decision: planned again and published again", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		f.decisions.WriteDecisionStub = nil
		f.decisions.WriteDecisionReturnsOnCall(0, errors.New("the process died"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		h, names := publishedParts(t, f)
		delete(f.published, names[1])
		f.decisions.WriteDecisionReturnsOnCall(1, nil)

		_, err = f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		require.Equal(t, 2, f.sink.PublishTombstonesCallCount())
		_, _, again := f.sink.PublishTombstonesArgsForCall(1)
		assert.Equal(t, h, again, "planned from the synthesis without its recovery slices: the same tombstones, cut the same way")
		assert.Contains(t, f.published, names[1])
		_, _, d := f.decisions.WriteDecisionArgsForCall(1)
		assert.Equal(t, largeOrphans, d.Tombstones)
	})

	t.Run("the pending recheck reads every slice and withdraws where the check fails", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		_, names := publishedParts(t, f)
		last := f.published[names[len(names)-1]]
		recreated, _, err := domain.ParseTombstone(last.Resources[0])
		require.NoError(t, err)
		f.downstream.ObserveObjectCalls(func(_ context.Context, e domain.Entry) (domain.Observation, error) {
			if e.Name == recreated.Name {
				return domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(time.Hour)}, nil
			}
			return domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour)}, nil
		})
		reads, observed := f.reader.GetSliceCallCount(), f.downstream.ObserveObjectCallCount()

		_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		var rechecked []string
		for i := reads; i < f.reader.GetSliceCallCount(); i++ {
			_, _, n := f.reader.GetSliceArgsForCall(i)
			rechecked = append(rechecked, n)
		}
		for _, n := range names {
			assert.Contains(t, rechecked, n)
		}
		assert.Equal(t, observed+largeOrphans, f.downstream.ObserveObjectCallCount(), "every tombstone of every slice is read again")
		require.Equal(t, 1, f.sink.WithdrawTombstonesCallCount())
		_, _, written := f.sink.WithdrawTombstonesArgsForCall(0)
		assert.Equal(t, last.Name, written.Name, "withdrawn in the slice that holds it")
		assert.Equal(t, []string{recreated.Name}, withdrawnNames(t, written))
	})
}
