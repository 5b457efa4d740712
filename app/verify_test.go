package app_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// design §6.3: each tombstone's object is read downstream just before publishing; what the read
// finds decides what is published.
func TestRecoverChecksEachTombstoneDownstream(t *testing.T) {
	rs := resources(9)
	old := domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour)}
	tests := []struct {
		name      string
		observe   func(domain.Entry) (domain.Observation, error)
		outcome   domain.Outcome
		reason    string
		published []string
		wantErr   bool
	}{
		{"every object older than the history", func(domain.Entry) (domain.Observation, error) { return old, nil },
			domain.OutcomeRecovered, "", []string{"cm-07", "cm-08"}, false},
		{"one object disappeared since the history", func(e domain.Entry) (domain.Observation, error) {
			if e.Name == "cm-07" {
				return domain.Observation{State: domain.ObjectAbsent}, nil
			}
			return old, nil
		}, domain.OutcomeRecovered, "", []string{"cm-08"}, false},
		{"one object re-created by hand after the history", func(e domain.Entry) (domain.Observation, error) {
			if e.Name == "cm-08" {
				return domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(time.Minute)}, nil
			}
			return old, nil
		}, domain.OutcomeRecovered, "", []string{"cm-07"}, false},
		{"every object unreadable: Unverified, nothing published", func(domain.Entry) (domain.Observation, error) {
			return domain.Observation{State: domain.ObjectUnreadable, Detail: "forbidden"}, nil
		}, domain.OutcomeNothingToRecover, domain.ReasonUnverified, nil, false},
		{"every object gone: NoOrphans", func(domain.Entry) (domain.Observation, error) {
			return domain.Observation{State: domain.ObjectAbsent}, nil
		}, domain.OutcomeNothingToRecover, domain.ReasonNoOrphans, nil, false},
		{"a read that fails decides nothing", func(domain.Entry) (domain.Observation, error) {
			return domain.Observation{}, errors.New("500 internal error")
		}, domain.Outcome{}, "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := recoveryFixture(t, rs, rs[:7])
			f.cfg.MaxTombstoneFraction = 1
			f.downstream.ObserveObjectCalls(func(_ context.Context, e domain.Entry) (domain.Observation, error) { return tt.observe(e) })
			res, err := f.service(t).Recover(ctx(t), f.comp)
			if tt.wantErr {
				require.Error(t, err)
				assert.Zero(t, f.decisions.WriteDecisionCallCount())
				assert.Zero(t, f.sink.PublishTombstonesCallCount())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 2, f.downstream.ObserveObjectCallCount(), "each absent entry is read once")
			d := writtenDecision(t, f)
			assert.Equal(t, tt.outcome, d.Outcome, d.Message)
			assert.Equal(t, tt.reason, d.Reason)
			if tt.published == nil {
				assert.Zero(t, f.sink.PublishTombstonesCallCount())
				return
			}
			var got []string
			for _, ts := range res.Plan.Tombstones {
				got = append(got, ts.Entry.Name)
			}
			assert.Equal(t, tt.published, got)
			_, _, h := f.sink.PublishTombstonesArgsForCall(0)
			assert.Len(t, h.Resources, len(tt.published))
			assert.Equal(t, len(tt.published), d.Tombstones)
		})
	}
	t.Run("the history's write time is unknown: everything is kept", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		secrets := snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, rs)
		secrets[1].DataWrittenAt = time.Time{}
		f.store.ListChunksReturns(secrets, nil)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome)
		assert.Equal(t, domain.ReasonUnverified, d.Reason)
		assert.Zero(t, f.sink.PublishTombstonesCallCount())
		assert.Empty(t, d.RecoveredFrom)
		// A warning: recording will replace the only history that names the kept objects.
		require.Equal(t, 1, f.events.EventCallCount())
		_, warning, reason, msg := f.events.EventArgsForCall(0)
		assert.True(t, warning)
		assert.Equal(t, "NothingToRecover", reason)
		assert.Contains(t, msg, "check them by hand")
		assert.Equal(t, 1, f.metrics.RefusalCallCount())
	})
	t.Run("an approval re-plans and re-checks: it never publishes a stored set", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:2]) // 7 of 9 absent: over the default guard
		f.comp.Annotations[domain.AnnotationReview] = "approve:" + synthID
		f.downstream.ObserveObjectCalls(func(_ context.Context, e domain.Entry) (domain.Observation, error) {
			if e.Name == "cm-02" {
				return domain.Observation{State: domain.ObjectAbsent}, nil
			}
			return old, nil
		})
		res, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeRecovered, d.Outcome)
		assert.Equal(t, domain.ReasonApproved, d.Reason)
		assert.Len(t, res.Plan.Tombstones, 6, "the object that is gone is dropped at approval")
	})
}

// design §6 "A lineage that a living Composition shares is not ours to clean": the live read of
// the Composition the selected snapshot was recorded for.
func TestRecoverSharedLineage(t *testing.T) {
	rs := resources(9)
	sibling := domain.CompositionRef{Namespace: ns, Name: "east"}
	siblingSnapshot := func(t *testing.T) []domain.ChunkSecret {
		secrets := snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, rs)
		for i := range secrets {
			secrets[i].Annotations = maps.Clone(secrets[i].Annotations)
			secrets[i].Annotations[domain.AnnotationCompositionName] = sibling.Name
		}
		return secrets
	}
	tests := []struct {
		name    string
		source  func() (domain.Composition, error)
		outcome domain.Outcome
		reason  string
		errAs   any
		wantErr bool
	}{
		{"the sibling lives: SharedLineage", func() (domain.Composition, error) {
			return domain.Composition{Namespace: ns, Name: sibling.Name, UID: "uid-east"}, nil
		}, domain.OutcomeInventoryInvalid, "SharedLineage", nil, false},
		{"the sibling lives under another UID: still SharedLineage", func() (domain.Composition, error) {
			return domain.Composition{Namespace: ns, Name: sibling.Name, UID: "uid-other"}, nil
		}, domain.OutcomeInventoryInvalid, "SharedLineage", nil, false},
		{"the source is gone: a rename, recovered", func() (domain.Composition, error) {
			return domain.Composition{}, fmt.Errorf("x: %w", ports.ErrNotFound)
		}, domain.OutcomeRecovered, "", nil, false},
		{"the source is being deleted: nothing decided", func() (domain.Composition, error) {
			return domain.Composition{Namespace: ns, Name: sibling.Name, UID: "uid-east", Deleting: true}, nil
		}, domain.Outcome{}, "", new(*app.SourceDeletingError), true},
		{"the source cannot be read (Forbidden): it counts as living", func() (domain.Composition, error) {
			return domain.Composition{}, fmt.Errorf("compositions %q is forbidden: %w", sibling, ports.ErrForbidden)
		}, domain.OutcomeInventoryInvalid, "SharedLineage", nil, false},
		{"the source cannot be read (another error): nothing decided", func() (domain.Composition, error) {
			return domain.Composition{}, errors.New("etcdserver: request timed out")
		}, domain.Outcome{}, "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := recoveryFixture(t, rs, rs[:7])
			f.cfg.MaxTombstoneFraction = 1
			f.store.ListChunksReturns(siblingSnapshot(t), nil)
			self := f.comp
			f.guard.LiveCompositionCalls(func(_ context.Context, ref domain.CompositionRef) (domain.Composition, error) {
				if ref == sibling {
					return tt.source()
				}
				return self, nil
			})
			_, err := f.service(t).Recover(ctx(t), f.comp)
			if tt.wantErr {
				require.Error(t, err)
				if tt.errAs != nil {
					assert.ErrorAs(t, err, tt.errAs)
				}
				assert.Zero(t, f.decisions.WriteDecisionCallCount())
				assert.Zero(t, f.sink.PublishTombstonesCallCount())
				return
			}
			require.NoError(t, err)
			d := writtenDecision(t, f)
			assert.Equal(t, tt.outcome, d.Outcome, d.Message)
			assert.Equal(t, tt.reason, d.Reason)
			if tt.outcome != domain.OutcomeRecovered {
				assert.Zero(t, f.sink.PublishTombstonesCallCount())
			}
		})
	}
}

// design §6 "Decide from what is live": every input of the plan is rechecked before each write.
func TestRecoverRechecksEveryPlanInputBeforeEachWrite(t *testing.T) {
	rs := resources(9)
	changes := map[string]func(c domain.Composition) domain.Composition{
		"review turned to reject": func(c domain.Composition) domain.Composition {
			c.Annotations = maps.Clone(c.Annotations)
			c.Annotations[domain.AnnotationReview] = "reject:" + synthID
			return c
		},
		"lineage override added": func(c domain.Composition) domain.Composition {
			c.Annotations = maps.Clone(c.Annotations)
			c.Annotations[domain.AnnotationLineageOverride] = "fresh-start"
			return c
		},
		"another pass committed its hand-off": committedHandoff,
	}
	for desc, change := range changes {
		for at, step := range []string{"publish", "commit"} {
			t.Run(desc+"/before "+step, func(t *testing.T) {
				f := recoveryFixture(t, rs, rs[:7])
				f.cfg.MaxTombstoneFraction = 1
				f.guard.LiveCompositionStub = nil
				for i := range at {
					f.guard.LiveCompositionReturnsOnCall(i, f.comp, nil)
				}
				f.guard.LiveCompositionReturnsOnCall(at, change(f.comp), nil)
				_, err := f.service(t).Recover(ctx(t), f.comp)
				var stale *app.StaleCompositionError
				require.ErrorAs(t, err, &stale)
				assert.Zero(t, f.decisions.WriteDecisionCallCount())
				assert.Equal(t, min(at, 1), f.sink.PublishTombstonesCallCount())
				assert.Equal(t, max(at-1, 0), f.sink.CommitTombstonesCallCount())
			})
		}
	}
	// Past the commit point the tombstones are Eno's: the plan is fixed, and the decision records
	// what was handed over (design §6.2 resumes rather than plans again).
	t.Run("after the commit point the decision is written whatever the inputs", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		f.cfg.MaxTombstoneFraction = 1
		f.guard.LiveCompositionStub = nil
		f.guard.LiveCompositionReturnsOnCall(0, f.comp, nil)
		f.guard.LiveCompositionReturnsOnCall(1, f.comp, nil)
		f.guard.LiveCompositionReturns(changes["review turned to reject"](f.comp), nil)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, domain.OutcomeRecovered, writtenDecision(t, f).Outcome)
	})
	// Another pass committed its hand-off while this one read the orphans, and Eno deleted them
	// at once: this pass finds nothing to recover, but the synthesis is the hand-off's now.
	t.Run("another pass committed its hand-off before a NothingToRecover decision", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		f.cfg.MaxTombstoneFraction = 1
		f.downstream.ObserveObjectReturns(domain.Observation{State: domain.ObjectAbsent}, nil)
		f.guard.LiveCompositionStub = nil
		f.guard.LiveCompositionReturns(committedHandoff(f.comp), nil)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		var stale *app.StaleCompositionError
		require.ErrorAs(t, err, &stale)
		assert.Contains(t, err.Error(), "the slices its synthesis names changed")
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
	})
	t.Run("a cached approve never publishes what the live object rejects", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:2])
		f.comp.Annotations[domain.AnnotationReview] = "approve:" + synthID
		cached := f.comp
		live := cached
		live.Annotations = maps.Clone(cached.Annotations)
		live.Annotations[domain.AnnotationReview] = "reject:" + synthID
		f.guard.LiveCompositionStub = nil
		f.guard.LiveCompositionReturns(live, nil)
		_, err := f.service(t).Recover(ctx(t), cached)
		var stale *app.StaleCompositionError
		require.ErrorAs(t, err, &stale)
		assert.Zero(t, f.sink.PublishTombstonesCallCount())
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
	})
}

// committedHandoff is c once another pass appended its recovery slice to the synthesis.
func committedHandoff(c domain.Composition) domain.Composition {
	s := *c.Synthesis
	s.Slices = append(slices.Clone(s.Slices), domain.RecoverySliceNames(c.Name, s.UUID)[0])
	c.Synthesis = &s
	return c
}
