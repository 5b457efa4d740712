package app_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

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
	for i := range f.events.EventCallCount() {
		_, warning, reason, _ := f.events.EventArgsForCall(i)
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
				f.guard.LiveCompositionStub = nil
				f.guard.LiveCompositionReturnsOnCall(0, live, nil)
				_, err := f.service(t).Record(ctx(t), f.comp)
				var lc *app.LineageCollisionError
				require.ErrorAs(t, err, &lc)
				assert.Equal(t, sibling, lc.Other)
				assert.Equal(t, siblingSecrets(t)[0].Name, lc.Name)
				assert.Equal(t, "kube-system", lc.Namespace)
				assert.Contains(t, err.Error(), domain.AnnotationLineageOverride, "the error says what to do")
				assert.Zero(t, f.writes(), "touch nothing")
				require.Equal(t, 1, f.guard.LiveCompositionCallCount())
				_, asked := f.guard.LiveCompositionArgsForCall(0)
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
		f.guard.LiveCompositionStub = nil
		f.guard.LiveCompositionReturnsOnCall(0, domain.Composition{Namespace: sibling.Namespace, Name: sibling.Name, UID: "uid-sibling"}, nil)
		_, err := f.service(t).Record(ctx(t), f.comp)
		var lc *app.LineageCollisionError
		require.ErrorAs(t, err, &lc)
		assert.Equal(t, existing[2].Name, lc.Name)
		assert.Zero(t, f.writes())
	})

	t.Run("the other Composition is NotFound: a predecessor's history, replaced as usual", func(t *testing.T) {
		f := adoptingAcrossNamespaces(newFixture(t))
		f.store.ListChunksReturns(siblingSecrets(t), nil)
		f.guard.LiveCompositionStub = nil
		f.guard.LiveCompositionReturnsOnCall(0, domain.Composition{}, fmt.Errorf("compositions %q not found: %w", sibling, ports.ErrNotFound))
		for i := 1; i <= 3; i++ {
			f.guard.LiveCompositionReturnsOnCall(i, f.comp, nil) // the rechecks
		}
		res, err := f.service(t).Record(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, 3, res.Updated)
		assert.Equal(t, 4, f.guard.LiveCompositionCallCount(), "one lookup for the three chunks, then a recheck per write")
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
				f.guard.LiveCompositionStub = nil
				f.guard.LiveCompositionReturnsOnCall(0, domain.Composition{}, fault)
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
		f.guard.LiveCompositionStub = nil
		f.guard.LiveCompositionReturns(domain.Composition{}, fmt.Errorf("compositions %q not found: %w", sibling, ports.ErrNotFound))
		_, err := f.service(t).Record(ctx(t), f.comp)
		var lc *app.LineageCollisionError
		require.ErrorAs(t, err, &lc)
		assert.Equal(t, sibling, lc.Other)
		assert.True(t, lc.OtherNamespace)
		assert.Contains(t, err.Error(), "another namespace")
		assert.Contains(t, err.Error(), "--allow-cross-namespace-lineage", "the error says what to do")
		assert.Zero(t, f.writes(), "touch nothing")
		assert.Zero(t, f.guard.LiveCompositionCallCount(), "nothing to ask: another namespace's history is never ours")
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
				f.guard.LiveCompositionCalls(func(_ context.Context, ref domain.CompositionRef) (domain.Composition, error) {
					if ref == sameNS {
						return domain.Composition{Namespace: ns, Name: sameNS.Name, UID: "uid-other"}, lookup
					}
					return self, nil
				})
				_, err := f.service(t).Record(ctx(t), f.comp)
				_, asked := f.guard.LiveCompositionArgsForCall(0)
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
		assert.Equal(t, 3, f.guard.LiveCompositionCallCount(), "only the rechecks")
		for i := range 3 {
			_, ref := f.guard.LiveCompositionArgsForCall(i)
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
		f.guard.LiveCompositionStub = nil
		f.guard.LiveCompositionReturnsOnCall(0, f.comp, nil) // the recheck before the create
		f.guard.LiveCompositionReturnsOnCall(1, domain.Composition{Namespace: sibling.Namespace, Name: sibling.Name, UID: "uid-sibling"}, nil)
		_, err := f.service(t).Record(ctx(t), f.comp)
		var lc *app.LineageCollisionError
		require.ErrorAs(t, err, &lc)
		assert.Equal(t, sibling, lc.Other)
		_, asked := f.guard.LiveCompositionArgsForCall(1)
		assert.Equal(t, sibling, asked)
		metrics, events := refusalsOf(f)
		assert.Equal(t, []string{"LineageCollision"}, metrics)
		assert.Equal(t, []string{"LineageCollision"}, events)
		assert.Equal(t, 1, f.writes())
	})

	t.Run("ours, recorded for another Composition that is NotFound: the conflict path", func(t *testing.T) {
		f := adoptingAcrossNamespaces(taken(t, siblings, nil))
		f.guard.LiveCompositionStub = nil
		f.guard.LiveCompositionReturnsOnCall(0, f.comp, nil)
		f.guard.LiveCompositionReturnsOnCall(1, domain.Composition{}, fmt.Errorf("gone: %w", ports.ErrNotFound))
		_, err := f.service(t).Record(ctx(t), f.comp)
		require.ErrorIs(t, err, ports.ErrAlreadyExists)
		metrics, _ := refusalsOf(f)
		assert.Empty(t, metrics)
	})
	t.Run("ours, recorded in another namespace, adoption off: LineageCollision without a lookup", func(t *testing.T) {
		f := taken(t, siblings, nil)
		f.guard.LiveCompositionStub = nil
		f.guard.LiveCompositionReturnsOnCall(0, f.comp, nil) // the recheck before the create
		f.guard.LiveCompositionReturnsOnCall(1, domain.Composition{}, fmt.Errorf("gone: %w", ports.ErrNotFound))
		_, err := f.service(t).Record(ctx(t), f.comp)
		var lc *app.LineageCollisionError
		require.ErrorAs(t, err, &lc)
		assert.True(t, lc.OtherNamespace)
		assert.Equal(t, 1, f.guard.LiveCompositionCallCount(), "only the recheck")
		metrics, _ := refusalsOf(f)
		assert.Equal(t, []string{"LineageCollision"}, metrics)
	})
}
