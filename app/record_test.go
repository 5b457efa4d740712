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
	assert.Equal(t, 3, f.live.LiveCompositionCallCount(), "one live recheck per write")
	assert.Equal(t, 2, f.reader.GetSliceCallCount())

	want := snapshotSecrets(t, uid, synthID, synthTime, chunkLimit, resources(9))
	for i := range 3 {
		_, got := f.store.CreateChunkArgsForCall(i)
		want[i].ResourceVersion, want[i].DataWrittenAt = "", time.Time{} // both are the API server's to set
		assert.Equal(t, want[i], got, "chunk %d", i)
	}
	// Every write is preceded by its recheck.
	order := f.live.Invocations()
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
					assert.Zero(t, f.events.Count())

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
				f.live.LiveCompositionStub = nil
				for i := range pos {
					f.live.LiveCompositionReturnsOnCall(i, f.comp, nil)
				}
				f.live.LiveCompositionReturnsOnCall(pos, changed, nil)
				_, err := f.service(t).Record(ctx(t), f.comp)
				var stale *app.StaleCompositionError
				require.ErrorAs(t, err, &stale)
				assert.Equal(t, pos, f.writes(), "nothing written from the changed recheck on")
			})
		}
	}
	t.Run("deleted", func(t *testing.T) {
		f := newFixture(t)
		f.live.LiveCompositionStub = nil
		f.live.LiveCompositionReturns(domain.Composition{}, fmt.Errorf("gone: %w", ports.ErrNotFound))
		_, err := f.service(t).Record(ctx(t), f.comp)
		var stale *app.StaleCompositionError
		require.ErrorAs(t, err, &stale)
		assert.Zero(t, f.writes())
	})
	t.Run("guard API error", func(t *testing.T) {
		f := newFixture(t)
		f.live.LiveCompositionStub = nil
		boom := errors.New("429 too many requests")
		f.live.LiveCompositionReturns(domain.Composition{}, boom)
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
			assert.Equal(t, 1, f.events.Count())
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
	assert.Zero(t, f.live.LiveCompositionCallCount())
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
	assert.Zero(t, f.live.LiveCompositionCallCount())
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

// TestRecordReportsChunksUsedAndLargestEntry: every pass reports the chunks the inventory takes
// against --max-chunks (the fast path from the cached metadata, a refused inventory what it
// would take), and every pass that builds the inventory its largest entry against
// --max-chunk-bytes; neither is a chunk's own fill, which is close to the limit by design.
func TestRecordReportsChunksUsedAndLargestEntry(t *testing.T) {
	lineage := domain.DefaultLineage(ns, name)
	contents, err := domain.ReadSynthesis(composition(uid, synthID, slicesOf("", resources(9)), false), slicesOf("", resources(9)))
	require.NoError(t, err)
	largest := contents.Inventory().LargestEntryBytes()
	require.Positive(t, largest)
	type report struct{ n, limit int }
	for _, tc := range []struct {
		name        string
		setup       func(f *fixture)
		wantErr     bool
		wantChunks  []report
		wantLargest []report
	}{
		{name: "written", wantChunks: []report{{3, 64}}, wantLargest: []report{{largest, chunkLimit}}},
		{name: "fast path: no data read, so no entry size", setup: func(f *fixture) {
			f.store.ListCachedChunksReturns(snapshotSecrets(t, uid, synthID, synthTime, chunkLimit, resources(9)), nil)
		}, wantChunks: []report{{3, 64}}},
		{name: "over the chunk cap: what it would take", setup: func(f *fixture) { f.cfg.MaxChunks = 2 },
			wantErr: true, wantChunks: []report{{3, 2}}, wantLargest: []report{{largest, chunkLimit}}},
		{name: "an entry over the chunk limit", setup: func(f *fixture) { f.cfg.MaxChunkBytes = 100 },
			wantErr: true, wantLargest: []report{{largest, 100}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.cfg.MaxChunks = 64
			if tc.setup != nil {
				tc.setup(f)
			}
			_, err := f.service(t).Record(ctx(t), f.comp)
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			var chunks, entries []report
			for i := range f.metrics.ChunksUsedCallCount() {
				l, n, limit := f.metrics.ChunksUsedArgsForCall(i)
				assert.Equal(t, lineage, l)
				chunks = append(chunks, report{n, limit})
			}
			for i := range f.metrics.LargestEntryCallCount() {
				l, n, limit := f.metrics.LargestEntryArgsForCall(i)
				assert.Equal(t, lineage, l)
				entries = append(entries, report{n, limit})
			}
			assert.Equal(t, tc.wantChunks, chunks)
			assert.Equal(t, tc.wantLargest, entries)
		})
	}
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

// sibling is a Composition of the same name in another namespace that shares team-a/web's
// lineage (a copied lineage override), so its chunks sit at the same Secret names.
var sibling = domain.CompositionRef{Namespace: "team-b", Name: name}

// siblingSecrets is the sibling's recorded snapshot at team-a/web's chunk names.
func siblingSecrets(t *testing.T) []domain.ChunkSecret {
	out := snapshotSecrets(t, "uid-sibling", oldSynth, oldTime, chunkLimit, resources(9))
	for i := range out {
		out[i].Annotations[domain.AnnotationCompositionNamespace] = sibling.Namespace
	}
	return out
}

// refusalsOf returns the reasons of every Refusal metric and warning event.
func refusalsOf(f *fixture) (metrics, events []string) {
	for i := range f.metrics.RefusalCallCount() {
		metrics = append(metrics, f.metrics.RefusalArgsForCall(i))
	}
	for i := range f.events.Count() {
		_, warning, reason, _ := f.events.At(i)
		if warning {
			events = append(events, reason)
		}
	}
	return metrics, events
}

func chunkWrites(f *fixture) []string {
	var out []string
	for i := range f.metrics.ChunkWriteCallCount() {
		out = append(out, f.metrics.ChunkWriteArgsForCall(i))
	}
	return out
}

// adoptingAcrossNamespaces allows adoption across namespaces, so that another namespace's
// Secret is judged by whether its Composition lives (design §4).
func adoptingAcrossNamespaces(f *fixture) *fixture {
	f.cfg.AllowCrossNamespaceLineage = true
	return f
}

// design §4, LineageCollision: an existing Secret of ours recorded for another Composition is
// refused while that Composition exists live, and replaced once it is NotFound. The sibling is
// in another namespace, so this holds with adoption across namespaces allowed; without it,
// another namespace's Secret is refused whatever its Composition is.
func TestRecordLineageCollision(t *testing.T) {
	t.Run("the other Composition exists: refused, nothing written", func(t *testing.T) {
		for desc, live := range map[string]domain.Composition{
			"with its own UID":          {Namespace: sibling.Namespace, Name: sibling.Name, UID: "uid-sibling"},
			"recreated with a new UID":  {Namespace: sibling.Namespace, Name: sibling.Name, UID: "uid-sibling-2"},
			"being deleted":             {Namespace: sibling.Namespace, Name: sibling.Name, UID: "uid-sibling", Deleting: true},
			"not opted in, not decided": {Namespace: sibling.Namespace, Name: sibling.Name, UID: "uid-x", Annotations: map[string]string{}},
		} {
			t.Run(desc, func(t *testing.T) {
				f := adoptingAcrossNamespaces(newFixture(t))
				f.store.ListChunksReturns(siblingSecrets(t), nil)
				f.live.LiveCompositionStub = nil
				f.live.LiveCompositionReturnsOnCall(0, live, nil)
				_, err := f.service(t).Record(ctx(t), f.comp)
				var lc *app.LineageCollisionError
				require.ErrorAs(t, err, &lc)
				assert.Equal(t, sibling, lc.Other)
				assert.Equal(t, siblingSecrets(t)[0].Name, lc.Name)
				assert.Equal(t, "kube-system", lc.Namespace)
				assert.Contains(t, err.Error(), domain.AnnotationLineageOverride, "the error says what to do")
				assert.Zero(t, f.writes(), "touch nothing")
				require.Equal(t, 1, f.live.LiveCompositionCallCount())
				_, asked := f.live.LiveCompositionArgsForCall(0)
				assert.Equal(t, sibling, asked, "the Composition the Secret names is read live")
				metrics, events := refusalsOf(f)
				assert.Equal(t, []string{"LineageCollision"}, metrics)
				assert.Equal(t, []string{"LineageCollision"}, events)
				assert.Equal(t, []string{"refused"}, chunkWrites(f))
			})
		}
	})

	t.Run("a collision at the last chunk name stops the pass before the first write", func(t *testing.T) {
		f := adoptingAcrossNamespaces(newFixture(t))
		existing := snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, resources(9))
		existing[2] = siblingSecrets(t)[2]
		f.store.ListChunksReturns(existing, nil)
		f.live.LiveCompositionStub = nil
		f.live.LiveCompositionReturnsOnCall(0, domain.Composition{Namespace: sibling.Namespace, Name: sibling.Name, UID: "uid-sibling"}, nil)
		_, err := f.service(t).Record(ctx(t), f.comp)
		var lc *app.LineageCollisionError
		require.ErrorAs(t, err, &lc)
		assert.Equal(t, existing[2].Name, lc.Name)
		assert.Zero(t, f.writes())
	})

	t.Run("the other Composition is NotFound: a predecessor's history, replaced as usual", func(t *testing.T) {
		f := adoptingAcrossNamespaces(newFixture(t))
		f.store.ListChunksReturns(siblingSecrets(t), nil)
		f.live.LiveCompositionStub = nil
		f.live.LiveCompositionReturnsOnCall(0, domain.Composition{}, fmt.Errorf("compositions %q not found: %w", sibling, ports.ErrNotFound))
		for i := 1; i <= 3; i++ {
			f.live.LiveCompositionReturnsOnCall(i, f.comp, nil) // the rechecks
		}
		res, err := f.service(t).Record(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, 3, res.Updated)
		assert.Equal(t, 4, f.live.LiveCompositionCallCount(), "one lookup for the three chunks, then a recheck per write")
		for i := range 3 {
			_, written := f.store.UpdateChunkArgsForCall(i)
			assert.Equal(t, ns, written.Annotations[domain.AnnotationCompositionNamespace], "now recorded for this Composition")
			assert.Equal(t, siblingSecrets(t)[i].ResourceVersion, written.ResourceVersion, "updated with the read resourceVersion")
		}
		metrics, events := refusalsOf(f)
		assert.Empty(t, metrics)
		assert.Empty(t, events)
	})

	t.Run("any other error reading it: no decision, nothing written, retried", func(t *testing.T) {
		for _, fault := range []error{errors.New(`compositions.eno.azure.io "web" is forbidden`), errors.New("etcdserver: request timed out"), context.DeadlineExceeded} {
			t.Run(fault.Error(), func(t *testing.T) {
				f := adoptingAcrossNamespaces(newFixture(t))
				f.store.ListChunksReturns(siblingSecrets(t), nil)
				f.live.LiveCompositionStub = nil
				f.live.LiveCompositionReturnsOnCall(0, domain.Composition{}, fault)
				_, err := f.service(t).Record(ctx(t), f.comp)
				require.ErrorIs(t, err, fault)
				var lc *app.LineageCollisionError
				assert.False(t, errors.As(err, &lc), "not a refusal")
				assert.Zero(t, f.writes())
				metrics, events := refusalsOf(f)
				assert.Empty(t, metrics)
				assert.Empty(t, events)
			})
		}
	})

	t.Run("adoption across namespaces off: another namespace's Secret is refused without a lookup, even when its Composition is NotFound", func(t *testing.T) {
		f := newFixture(t)
		f.store.ListChunksReturns(siblingSecrets(t), nil)
		f.live.LiveCompositionStub = nil
		f.live.LiveCompositionReturns(domain.Composition{}, fmt.Errorf("compositions %q not found: %w", sibling, ports.ErrNotFound))
		_, err := f.service(t).Record(ctx(t), f.comp)
		var lc *app.LineageCollisionError
		require.ErrorAs(t, err, &lc)
		assert.Equal(t, sibling, lc.Other)
		assert.True(t, lc.OtherNamespace)
		assert.Contains(t, err.Error(), "another namespace")
		assert.Contains(t, err.Error(), "--allow-cross-namespace-lineage", "the error says what to do")
		assert.Zero(t, f.writes(), "touch nothing")
		assert.Zero(t, f.live.LiveCompositionCallCount(), "nothing to ask: another namespace's history is never ours")
		metrics, events := refusalsOf(f)
		assert.Equal(t, []string{"LineageCollision"}, metrics)
		assert.Equal(t, []string{"LineageCollision"}, events)
		assert.Equal(t, []string{"refused"}, chunkWrites(f))
	})

	t.Run("adoption across namespaces off: another Composition of the same namespace is still looked up", func(t *testing.T) {
		sameNS := domain.CompositionRef{Namespace: ns, Name: "web-other"}
		secrets := snapshotSecrets(t, "uid-other", oldSynth, oldTime, chunkLimit, resources(9))
		for i := range secrets {
			secrets[i].Annotations[domain.AnnotationCompositionName] = sameNS.Name // names that collide after the cut
		}
		for desc, lookup := range map[string]error{"it lives: refused": nil, "it is NotFound: replaced": fmt.Errorf("gone: %w", ports.ErrNotFound)} {
			t.Run(desc, func(t *testing.T) {
				f := newFixture(t)
				f.store.ListChunksReturns(secrets, nil)
				self := f.comp
				f.live.LiveCompositionCalls(func(_ context.Context, ref domain.CompositionRef) (domain.Composition, error) {
					if ref == sameNS {
						return domain.Composition{Namespace: ns, Name: sameNS.Name, UID: "uid-other"}, lookup
					}
					return self, nil
				})
				_, err := f.service(t).Record(ctx(t), f.comp)
				_, asked := f.live.LiveCompositionArgsForCall(0)
				assert.Equal(t, sameNS, asked)
				var lc *app.LineageCollisionError
				if lookup == nil {
					require.ErrorAs(t, err, &lc)
					assert.False(t, lc.OtherNamespace)
					assert.Zero(t, f.writes())
					return
				}
				require.NoError(t, err)
				assert.Equal(t, 3, f.writes())
			})
		}
	})

	t.Run("Secrets recorded for this Composition, or naming none, ask nothing", func(t *testing.T) {
		f := newFixture(t)
		existing := snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, resources(9))
		delete(existing[1].Annotations, domain.AnnotationCompositionNamespace)
		f.store.ListChunksReturns(existing, nil)
		res, err := f.service(t).Record(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, 3, res.Updated)
		assert.Equal(t, 3, f.live.LiveCompositionCallCount(), "only the rechecks")
		for i := range 3 {
			_, ref := f.live.LiveCompositionArgsForCall(i)
			assert.Equal(t, f.comp.Ref(), ref)
		}
	})
}

// design §4: Secrets are matched by name, not only by label. A Secret without our labels makes
// CreateChunk fail with AlreadyExists; the name is read and refused as any foreign Secret.
func TestRecordReadsANameFoundTaken(t *testing.T) {
	foreign := map[string]domain.ChunkSecret{
		"no labels at all": {Namespace: "kube-system", Type: "Opaque", Data: map[string][]byte{"token": []byte("x")}},
		"our type, no managed-by label": {Namespace: "kube-system", Type: domain.SecretType,
			Labels: map[string]string{"app": "other"}},
		"managed-by label, another type": {Namespace: "kube-system", Type: "Opaque",
			Labels: map[string]string{domain.LabelManagedBy: domain.ManagedByValue}},
	}
	for desc, occupant := range foreign {
		for _, pos := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s at chunk %d: ForeignSecret", desc, pos), func(t *testing.T) {
				f := newFixture(t)
				f.store.CreateChunkStub = nil
				f.store.CreateChunkCalls(func(_ context.Context, s domain.ChunkSecret) (domain.ChunkSecret, error) {
					if f.store.CreateChunkCallCount() == pos+1 {
						return domain.ChunkSecret{}, fmt.Errorf("secrets %q: %w", s.Name, ports.ErrAlreadyExists)
					}
					return s, nil
				})
				f.store.GetChunkStub = nil
				f.store.GetChunkCalls(func(_ context.Context, n string) (domain.ChunkSecret, error) {
					s := occupant.Clone()
					s.Name = n
					return s, nil
				})
				_, err := f.service(t).Record(ctx(t), f.comp)
				var fs *app.ForeignSecretError
				require.ErrorAs(t, err, &fs)
				_, tried := f.store.CreateChunkArgsForCall(pos)
				assert.Equal(t, tried.Name, fs.Name)
				assert.Equal(t, "kube-system", fs.Namespace)
				assert.Equal(t, pos+1, f.store.CreateChunkCallCount(), "no write after it")
				assert.Zero(t, f.store.UpdateChunkCallCount(), "the foreign Secret is never touched")
				require.Equal(t, 1, f.store.GetChunkCallCount())
				metrics, events := refusalsOf(f)
				assert.Equal(t, []string{"ForeignSecret"}, metrics)
				assert.Equal(t, []string{"ForeignSecret"}, events)
				writes := chunkWrites(f)
				assert.Equal(t, "refused", writes[len(writes)-1], "counted as refused, not alreadyExists")
			})
		}
	}

	taken := func(t *testing.T, occupant domain.ChunkSecret, getErr error) *fixture {
		f := newFixture(t)
		f.store.CreateChunkStub = nil
		f.store.CreateChunkReturnsOnCall(0, domain.ChunkSecret{}, fmt.Errorf("secrets: %w", ports.ErrAlreadyExists))
		f.store.GetChunkStub = nil
		f.store.GetChunkReturns(occupant, getErr)
		return f
	}
	ours := snapshotSecrets(t, uid, synthID, synthTime, chunkLimit, resources(9))[0]

	t.Run("ours (a race): the conflict path, aborted and retried, no refusal", func(t *testing.T) {
		f := taken(t, ours, nil)
		_, err := f.service(t).Record(ctx(t), f.comp)
		require.ErrorIs(t, err, ports.ErrAlreadyExists)
		var fs *app.ForeignSecretError
		assert.False(t, errors.As(err, &fs))
		assert.Equal(t, 1, f.writes())
		metrics, events := refusalsOf(f)
		assert.Empty(t, metrics)
		assert.Empty(t, events)
		assert.Equal(t, []string{"alreadyExists"}, chunkWrites(f))
	})

	t.Run("gone again, or unreadable: the conflict path", func(t *testing.T) {
		for _, getErr := range []error{fmt.Errorf("secrets: %w", ports.ErrNotFound), errors.New("503 service unavailable")} {
			f := taken(t, domain.ChunkSecret{}, getErr)
			_, err := f.service(t).Record(ctx(t), f.comp)
			require.ErrorIs(t, err, ports.ErrAlreadyExists)
			assert.Equal(t, 1, f.writes())
			metrics, _ := refusalsOf(f)
			assert.Empty(t, metrics)
		}
	})

	siblings := siblingSecrets(t)[0]
	t.Run("ours, recorded for another Composition that exists: LineageCollision", func(t *testing.T) {
		f := adoptingAcrossNamespaces(taken(t, siblings, nil))
		f.live.LiveCompositionStub = nil
		f.live.LiveCompositionReturnsOnCall(0, f.comp, nil) // the recheck before the create
		f.live.LiveCompositionReturnsOnCall(1, domain.Composition{Namespace: sibling.Namespace, Name: sibling.Name, UID: "uid-sibling"}, nil)
		_, err := f.service(t).Record(ctx(t), f.comp)
		var lc *app.LineageCollisionError
		require.ErrorAs(t, err, &lc)
		assert.Equal(t, sibling, lc.Other)
		_, asked := f.live.LiveCompositionArgsForCall(1)
		assert.Equal(t, sibling, asked)
		metrics, events := refusalsOf(f)
		assert.Equal(t, []string{"LineageCollision"}, metrics)
		assert.Equal(t, []string{"LineageCollision"}, events)
		assert.Equal(t, 1, f.writes())
	})

	t.Run("ours, recorded for another Composition that is NotFound: the conflict path", func(t *testing.T) {
		f := adoptingAcrossNamespaces(taken(t, siblings, nil))
		f.live.LiveCompositionStub = nil
		f.live.LiveCompositionReturnsOnCall(0, f.comp, nil)
		f.live.LiveCompositionReturnsOnCall(1, domain.Composition{}, fmt.Errorf("gone: %w", ports.ErrNotFound))
		_, err := f.service(t).Record(ctx(t), f.comp)
		require.ErrorIs(t, err, ports.ErrAlreadyExists)
		metrics, _ := refusalsOf(f)
		assert.Empty(t, metrics)
	})
	t.Run("ours, recorded in another namespace, adoption off: LineageCollision without a lookup", func(t *testing.T) {
		f := taken(t, siblings, nil)
		f.live.LiveCompositionStub = nil
		f.live.LiveCompositionReturnsOnCall(0, f.comp, nil) // the recheck before the create
		f.live.LiveCompositionReturnsOnCall(1, domain.Composition{}, fmt.Errorf("gone: %w", ports.ErrNotFound))
		_, err := f.service(t).Record(ctx(t), f.comp)
		var lc *app.LineageCollisionError
		require.ErrorAs(t, err, &lc)
		assert.True(t, lc.OtherNamespace)
		assert.Equal(t, 1, f.live.LiveCompositionCallCount(), "only the recheck")
		metrics, _ := refusalsOf(f)
		assert.Equal(t, []string{"LineageCollision"}, metrics)
	})
}
