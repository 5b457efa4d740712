package app_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

func TestRecordWritesEveryChunkAfterALiveRecheck(t *testing.T) {
	f := newFixture(t)
	res, err := f.service(t).Record(ctx(t), f.comp)
	require.NoError(t, err)
	assert.Equal(t, 3, res.Chunks)
	assert.Equal(t, 3, res.Created)
	require.Equal(t, 3, f.store.CreateChunkCallCount())
	assert.Equal(t, 3, f.guard.LiveCompositionCallCount(), "one live recheck per write")
	assert.Equal(t, 2, f.reader.GetSliceCallCount())

	want := snapshotSecrets(t, uid, synthID, synthTime, chunkLimit, resources(9))
	for i := range 3 {
		_, got := f.store.CreateChunkArgsForCall(i)
		want[i].ResourceVersion, want[i].DataWrittenAt = "", time.Time{} // both are the API server's to set
		assert.Equal(t, want[i], got, "chunk %d", i)
	}
	// Every write is preceded by its recheck.
	order := f.guard.Invocations()
	assert.Len(t, order["LiveComposition"], 3)
}

func TestRecordAbortsOnTheFirstFailedWrite(t *testing.T) {
	for _, op := range []string{"create", "update"} {
		for _, pos := range []int{0, 1, 2} {
			for _, fault := range []error{ports.ErrConflict, ports.ErrAlreadyExists, errors.New("etcdserver: request timed out")} {
				t.Run(fmt.Sprintf("%s/chunk%d/%v", op, pos, fault), func(t *testing.T) {
					f := newFixture(t)
					if op == "update" {
						// An older snapshot of the same names exists: every chunk is an update.
						f.store.ListChunksReturns(snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, resources(9)), nil)
						f.store.UpdateChunkReturnsOnCall(pos, domain.ChunkSecret{}, fault)
						f.store.UpdateChunkStub = nil
					} else {
						f.store.CreateChunkReturnsOnCall(pos, domain.ChunkSecret{}, fault)
						f.store.CreateChunkStub = nil
						// A race: another writer stored our Secret at that name meanwhile.
						raced := snapshotSecrets(t, uid, synthID, synthTime, chunkLimit, resources(9))[pos]
						f.store.GetChunkStub = nil
						f.store.GetChunkReturns(raced, nil)
					}
					_, err := f.service(t).Record(ctx(t), f.comp)
					require.Error(t, err)
					assert.ErrorIs(t, err, fault)
					assert.Equal(t, pos+1, f.writes(), "no write after the failed one")
					if op == "create" && errors.Is(fault, ports.ErrAlreadyExists) {
						require.Equal(t, 1, f.store.GetChunkCallCount(), "the taken name is read")
						_, name := f.store.GetChunkArgsForCall(0)
						_, tried := f.store.CreateChunkArgsForCall(pos)
						assert.Equal(t, tried.Name, name)
					} else {
						assert.Zero(t, f.store.GetChunkCallCount())
					}
					assert.Zero(t, f.metrics.RefusalCallCount(), "a failed write is no refusal")
					assert.Zero(t, f.events.EventCallCount())

					// The next pass, on a healthy store holding what was written, converges.
					g := newFixture(t)
					var stored []domain.ChunkSecret
					for i := range pos {
						if op == "update" {
							_, s := f.store.UpdateChunkArgsForCall(i)
							stored = append(stored, s)
						} else {
							_, s := f.store.CreateChunkArgsForCall(i)
							stored = append(stored, s)
						}
					}
					if op == "update" {
						stored = append(stored, snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, resources(9))[pos:]...)
					}
					g.store.ListChunksReturns(stored, nil)
					res, err := g.service(t).Record(ctx(t), g.comp)
					require.NoError(t, err)
					assert.Equal(t, pos, res.Reused, "chunks written before the fault are reused")
					assert.Equal(t, 3-pos, g.writes())
				})
			}
		}
	}
}

func TestRecordLiveRecheckAbortsBeforeAnyWrite(t *testing.T) {
	cases := map[string]func(c *domain.Composition){
		"recreated with a new UID": func(c *domain.Composition) { c.UID = "uid-newer" },
		"synthesis changed": func(c *domain.Composition) {
			c.Synthesis = &domain.Synthesis{UUID: "other", Synthesized: now, Ready: true}
		},
		"opt-in removed":   func(c *domain.Composition) { delete(c.Annotations, domain.AnnotationOptIn) },
		"deletion started": func(c *domain.Composition) { c.Deleting = true },
		"no longer ready":  func(c *domain.Composition) { c.Synthesis.Ready = false },
		// A lineage override added under the same synthesis: the names, labels and Secret list
		// of the old lineage must not be written to (design §4, "lineage unchanged").
		"lineage override added": func(c *domain.Composition) { c.Annotations[domain.AnnotationLineageOverride] = "fresh-start" },
		"a slice committed to the synthesis": func(c *domain.Composition) {
			c.Synthesis.Slices = append(slices.Clone(c.Synthesis.Slices), "web-recovery-11111111")
		},
	}
	for desc, mutate := range cases {
		for _, pos := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s/at chunk %d", desc, pos), func(t *testing.T) {
				f := newFixture(t)
				changed := f.comp
				changed.Annotations = map[string]string{}
				for k, v := range f.comp.Annotations {
					changed.Annotations[k] = v
				}
				s := *f.comp.Synthesis
				changed.Synthesis = &s
				mutate(&changed)
				f.guard.LiveCompositionStub = nil
				for i := range pos {
					f.guard.LiveCompositionReturnsOnCall(i, f.comp, nil)
				}
				f.guard.LiveCompositionReturnsOnCall(pos, changed, nil)
				_, err := f.service(t).Record(ctx(t), f.comp)
				var stale *app.StaleCompositionError
				require.ErrorAs(t, err, &stale)
				assert.Equal(t, pos, f.writes(), "nothing written from the changed recheck on")
			})
		}
	}
	t.Run("deleted", func(t *testing.T) {
		f := newFixture(t)
		f.guard.LiveCompositionStub = nil
		f.guard.LiveCompositionReturns(domain.Composition{}, fmt.Errorf("gone: %w", ports.ErrNotFound))
		_, err := f.service(t).Record(ctx(t), f.comp)
		var stale *app.StaleCompositionError
		require.ErrorAs(t, err, &stale)
		assert.Zero(t, f.writes())
	})
	t.Run("guard API error", func(t *testing.T) {
		f := newFixture(t)
		f.guard.LiveCompositionStub = nil
		boom := errors.New("429 too many requests")
		f.guard.LiveCompositionReturns(domain.Composition{}, boom)
		_, err := f.service(t).Record(ctx(t), f.comp)
		require.ErrorIs(t, err, boom)
		assert.Zero(t, f.writes())
	})
}

func TestRecordRefusesUnusableSlices(t *testing.T) {
	bad := func(mutate func(s *domain.ResourceSlice)) func(f *fixture) {
		return func(f *fixture) {
			byName := map[string]domain.ResourceSlice{}
			for i, s := range f.slices {
				if i == 1 {
					mutate(&s)
				}
				byName[s.Name] = s
			}
			f.reader.GetSliceCalls(func(_ context.Context, _, n string) (domain.ResourceSlice, error) { return byName[n], nil })
		}
	}
	cases := []struct {
		name    string
		setup   func(f *fixture)
		problem domain.SliceProblem
	}{
		{"missing", func(f *fixture) {
			f.reader.GetSliceStub = nil
			f.reader.GetSliceReturnsOnCall(0, f.slices[0], nil)
			f.reader.GetSliceReturnsOnCall(1, domain.ResourceSlice{}, fmt.Errorf("x: %w", ports.ErrNotFound))
		}, domain.SliceMissing},
		{"unreadable", func(f *fixture) {
			f.reader.GetSliceStub = nil
			f.reader.GetSliceReturns(domain.ResourceSlice{}, errors.New("500 internal error"))
		}, domain.SliceUnreadable},
		{"terminating", bad(func(s *domain.ResourceSlice) { s.Deleting = true }), domain.SliceTerminating},
		{"manifest not JSON", bad(func(s *domain.ResourceSlice) { s.Resources[0].Manifest = "{not json" }), domain.SliceMalformed},
		{"manifest without kind", bad(func(s *domain.ResourceSlice) { s.Resources[0].Manifest = `{"apiVersion":"v1","metadata":{"name":"x"}}` }), domain.SliceMalformed},
		{"manifest without name", bad(func(s *domain.ResourceSlice) { s.Resources[0].Manifest = `{"apiVersion":"v1","kind":"ConfigMap"}` }), domain.SliceMalformed},
		{"duplicate identity", bad(func(s *domain.ResourceSlice) { s.Resources = append(s.Resources, s.Resources[0]) }), domain.SliceMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.setup(f)
			_, err := f.service(t).Record(ctx(t), f.comp)
			var se *domain.SliceError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tc.problem, se.Problem)
			assert.Zero(t, f.store.ListChunksCallCount(), "slices are read before anything is prepared")
			assert.Zero(t, f.writes())
			assert.Equal(t, 1, f.events.EventCallCount())
		})
	}
}

func TestRecordFastPathReadsAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.store.ListCachedChunksReturns(snapshotSecrets(t, uid, synthID, synthTime, chunkLimit, resources(9)), nil)
	res, err := f.service(t).Record(ctx(t), f.comp)
	require.NoError(t, err)
	assert.True(t, res.Unchanged)
	assert.Zero(t, f.reader.GetSliceCallCount())
	assert.Zero(t, f.store.ListChunksCallCount())
	assert.Zero(t, f.guard.LiveCompositionCallCount())
	assert.Zero(t, f.writes())
}

func TestRecordFastPathNeedsTheSameIncarnationAndSynthesis(t *testing.T) {
	for desc, secrets := range map[string]func(t *testing.T) []domain.ChunkSecret{
		"other incarnation": func(t *testing.T) []domain.ChunkSecret {
			return snapshotSecrets(t, oldUID, synthID, synthTime, chunkLimit, resources(9))
		},
		"other synthesis": func(t *testing.T) []domain.ChunkSecret {
			return snapshotSecrets(t, uid, oldSynth, oldTime, chunkLimit, resources(9))
		},
		"incomplete": func(t *testing.T) []domain.ChunkSecret {
			return snapshotSecrets(t, uid, synthID, synthTime, chunkLimit, resources(9))[:2]
		},
	} {
		t.Run(desc, func(t *testing.T) {
			f := newFixture(t)
			f.store.ListCachedChunksReturns(secrets(t), nil)
			res, err := f.service(t).Record(ctx(t), f.comp)
			require.NoError(t, err)
			assert.False(t, res.Unchanged)
			assert.Equal(t, 2, f.reader.GetSliceCallCount())
			assert.Equal(t, 3, f.writes())
		})
	}
}

func TestRecordUnchangedLiveSnapshotWritesNothing(t *testing.T) {
	f := newFixture(t)
	// The cache lags, but the live list already holds exactly this snapshot.
	f.store.ListChunksReturns(snapshotSecrets(t, uid, synthID, synthTime, chunkLimit, resources(9)), nil)
	res, err := f.service(t).Record(ctx(t), f.comp)
	require.NoError(t, err)
	assert.Equal(t, 3, res.Reused)
	assert.Zero(t, f.writes())
	assert.Zero(t, f.guard.LiveCompositionCallCount())
}

func TestRecordHalfWrittenSnapshotWritesOnlyDifferingChunks(t *testing.T) {
	f := newFixture(t)
	current := snapshotSecrets(t, uid, synthID, synthTime, chunkLimit, resources(9))
	older := snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, resources(9))
	f.store.ListChunksReturns([]domain.ChunkSecret{current[0], older[1], older[2]}, nil)
	res, err := f.service(t).Record(ctx(t), f.comp)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Reused)
	assert.Equal(t, 2, f.store.UpdateChunkCallCount())
	_, first := f.store.UpdateChunkArgsForCall(0)
	assert.Equal(t, current[1].Name, first.Name)
	assert.Equal(t, older[1].ResourceVersion, first.ResourceVersion, "updates carry the resourceVersion read")
}

func TestRecordPreservesLabelsAndAnnotationsOthersAdded(t *testing.T) {
	f := newFixture(t)
	older := snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, resources(9))
	older[0].Labels["team"] = "platform"
	older[0].Annotations["backup.example.com/policy"] = "keep"
	f.store.ListChunksReturns(older, nil)
	_, err := f.service(t).Record(ctx(t), f.comp)
	require.NoError(t, err)
	_, written := f.store.UpdateChunkArgsForCall(0)
	assert.Equal(t, "platform", written.Labels["team"])
	assert.Equal(t, "keep", written.Annotations["backup.example.com/policy"])
	assert.Equal(t, uid, written.Annotations[domain.AnnotationCompositionUID])
}

func TestRecordRefusesForeignSecretsAndTouchesNothing(t *testing.T) {
	for desc, mutate := range map[string]func(s *domain.ChunkSecret){
		"no managed-by label": func(s *domain.ChunkSecret) { delete(s.Labels, domain.LabelManagedBy) },
		"foreign type":        func(s *domain.ChunkSecret) { s.Type = "Opaque" },
	} {
		t.Run(desc, func(t *testing.T) {
			f := newFixture(t)
			existing := snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, resources(9))
			mutate(&existing[2])
			f.store.ListChunksReturns(existing, nil)
			_, err := f.service(t).Record(ctx(t), f.comp)
			var foreign *app.ForeignSecretError
			require.ErrorAs(t, err, &foreign)
			assert.Equal(t, existing[2].Name, foreign.Name)
			assert.Zero(t, f.writes(), "not even the chunks before the foreign one")
		})
	}
}

func TestRecordWaitsForAFinishedDecision(t *testing.T) {
	held := domain.Decision{SynthesisUUID: synthID, Outcome: domain.OutcomeHeldForReview, DecidedAt: now}.Encode()
	other := domain.Decision{SynthesisUUID: oldSynth, Outcome: domain.OutcomeRecovered, DecidedAt: now}.Encode()
	for desc, value := range map[string]string{"no decision": "", "held for review": held, "decision for another synthesis": other, "garbage": "{"} {
		t.Run(desc, func(t *testing.T) {
			f := newFixture(t)
			if value == "" {
				delete(f.comp.Annotations, domain.AnnotationDecision)
			} else {
				f.comp.Annotations[domain.AnnotationDecision] = value
			}
			_, err := f.service(t).Record(ctx(t), f.comp)
			var ie *domain.IneligibleError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, domain.IneligibleAwaitsDecision, ie.Reason)
			assert.Zero(t, f.reader.GetSliceCallCount())
			assert.Zero(t, f.writes())
		})
	}
}

func TestRecordIneligible(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(f *fixture)
		reason domain.IneligibleReason
	}{
		{"disabled", func(f *fixture) { f.cfg.Enabled = false }, domain.IneligibleDisabled},
		{"other namespace", func(f *fixture) { f.cfg.Scope.Namespace = "team-b" }, domain.IneligibleOutOfScope},
		{"not opted in", func(f *fixture) { f.comp.Annotations[domain.AnnotationOptIn] = "disabled" }, domain.IneligibleNotOptedIn},
		{"deleting", func(f *fixture) { f.comp.Deleting = true }, domain.IneligibleDeleting},
		{"not ready", func(f *fixture) { f.comp.Synthesis.Ready = false }, domain.IneligibleNotReady},
		{"invalid lineage", func(f *fixture) { f.comp.Annotations[domain.AnnotationLineageOverride] = "UPPER" }, domain.IneligibleInvalidLineage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.mutate(f)
			_, err := f.service(t).Record(ctx(t), f.comp)
			var ie *domain.IneligibleError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, tc.reason, ie.Reason)
			assert.Zero(t, f.writes())
		})
	}
}

func TestRecordInventoryTooLargeWritesNothing(t *testing.T) {
	t.Run("entry over the limit", func(t *testing.T) {
		f := newFixture(t)
		f.cfg.MaxChunkBytes = 100
		_, err := f.service(t).Record(ctx(t), f.comp)
		var tooLarge *domain.EntryTooLargeError
		require.ErrorAs(t, err, &tooLarge)
		assert.Zero(t, f.writes())
	})
	t.Run("chunks over the cap", func(t *testing.T) {
		f := newFixture(t)
		f.cfg.MaxChunks = 2
		_, err := f.service(t).Record(ctx(t), f.comp)
		var tooMany *domain.TooManyChunksError
		require.ErrorAs(t, err, &tooMany)
		assert.Zero(t, f.writes())
	})
}

func TestRecordEmptyInventoryIsOneChunk(t *testing.T) {
	f := newFixture(t)
	f.setSynthesis(synthID, nil)
	f.comp = composition(uid, synthID, f.slices, true)
	res, err := f.service(t).Record(ctx(t), f.comp)
	require.NoError(t, err)
	require.Equal(t, 1, f.store.CreateChunkCallCount())
	_, s := f.store.CreateChunkArgsForCall(0)
	assert.Equal(t, "[]", string(s.Data[domain.SecretDataKey]))
	assert.Equal(t, 1, res.Chunks)
}

// The fast path is judged on labels and annotations only, so a cache that holds the inventory
// Secrets' metadata without their data serves it.
func TestRecordFastPathNeedsNoData(t *testing.T) {
	f := newFixture(t)
	cached := snapshotSecrets(t, uid, synthID, synthTime, chunkLimit, resources(9))
	for i := range cached {
		cached[i].Data = nil
	}
	f.store.ListCachedChunksReturns(cached, nil)
	res, err := f.service(t).Record(ctx(t), f.comp)
	require.NoError(t, err)
	assert.True(t, res.Unchanged)
	assert.Len(t, cached, res.Chunks)
	assert.Zero(t, f.store.ListChunksCallCount())
	assert.Zero(t, f.writes())
}
