package reliability_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// hostileChunkBytes splits the old incarnation's 5 resources over 2 chunks.
const hostileChunkBytes = 512

// boundedText is the most any decision or event may carry, however large the hostile input.
const boundedText = 4 << 10

var (
	hostileRef     = domain.CompositionRef{Namespace: "team-h", Name: "web"}
	hostileLineage = domain.DefaultLineage(hostileRef.Namespace, hostileRef.Name)
	// The old incarnation deployed these; the recreated one drops a-2 and a-3 (2 of 5, under
	// the deletion guard), so a trustworthy history yields exactly those two tombstones.
	hostileOld = []string{"a-0", "a-1", "a-2", "a-3", "shared"}
	hostileNew = []string{"a-0", "a-1", "b-0", "shared"}
)

// objects is every stored object of both clusters.
type objects struct {
	Compositions []domain.Composition
	Slices       []domain.ResourceSlice
	Secrets      []domain.ChunkSecret
	Downstream   []domain.ResourceID
}

func stored(c *cluster) objects {
	return objects{Compositions: c.Compositions(), Slices: c.Slices(""), Secrets: c.Secrets(), Downstream: c.DownstreamObjects()}
}

// withoutDecision drops the decision annotation and the resourceVersion it bumped.
func withoutDecision(o objects, before objects) objects {
	return withoutAnnotation(o, before, domain.AnnotationDecision)
}

// withoutAnnotation drops the Compositions' annotation key and the resourceVersion it bumped.
func withoutAnnotation(o objects, before objects, key string) objects {
	out := o
	out.Compositions = make([]domain.Composition, len(o.Compositions))
	for i, c := range o.Compositions {
		c.Annotations = make(map[string]string, len(c.Annotations))
		for k, v := range o.Compositions[i].Annotations {
			if k != key {
				c.Annotations[k] = v
			}
		}
		if i < len(before.Compositions) {
			c.ResourceVersion = before.Compositions[i].ResourceVersion
		}
		out.Compositions[i] = c
	}
	return out
}

// hostileWorld: the old incarnation recorded its inventory, then the Composition was deleted
// and recreated. The new synthesis is synthesized but not yet Ready, so a pass runs recovery
// only: the one moment recovery reads the history without recording overwriting it after.
func hostileWorld(t *testing.T, ready bool) (*world, domain.Composition, []domain.ChunkSecret) {
	t.Helper()
	w := newWorld(t, hostileChunkBytes, domain.DefaultMaxTombstoneFraction)
	w.create(hostileRef, true, hostileOld...)
	_, err := w.service().Reconcile(logr.NewContext(t.Context(), testr.New(t)), hostileRef)
	require.NoError(t, err)
	secrets, err := w.cluster.ListChunks(t.Context(), hostileLineage)
	require.NoError(t, err)
	require.Len(t, secrets, 2, "the old snapshot spans two chunks")
	comp := w.recreate(hostileRef, ready, hostileNew...)
	return w, comp, secrets
}

// replaceSecrets swaps the lineage's Secrets for the given ones, as another client would.
func replaceSecrets(t *testing.T, w *world, old, replacement []domain.ChunkSecret) {
	t.Helper()
	for _, s := range old {
		require.NoError(t, w.cluster.DeleteSecret(s.Namespace, s.Name))
	}
	for _, s := range replacement {
		s.ResourceVersion = ""
		_, err := w.cluster.PutSecret(s)
		require.NoError(t, err)
	}
}

func eachChunk(change func(s *domain.ChunkSecret)) func([]domain.ChunkSecret) []domain.ChunkSecret {
	return func(in []domain.ChunkSecret) []domain.ChunkSecret {
		for i := range in {
			change(&in[i])
		}
		return in
	}
}

func oneChunk(index int, change func(s *domain.ChunkSecret)) func([]domain.ChunkSecret) []domain.ChunkSecret {
	return func(in []domain.ChunkSecret) []domain.ChunkSecret {
		change(&in[index])
		return in
	}
}

func TestHostileInventorySecrets(t *testing.T) {
	cases := []struct {
		name   string
		mutate func([]domain.ChunkSecret) []domain.ChunkSecret
		reason domain.InvalidReason // zero: the history is trustworthy (the control case)
	}{
		{"trustworthy history (control)", nil, domain.InvalidReason{}},
		{"our lineage label but a foreign type", oneChunk(0, func(s *domain.ChunkSecret) { s.Type = "Opaque" }), domain.ReasonMalformed},
		{"our lineage label but no managed-by label", oneChunk(1, func(s *domain.ChunkSecret) { delete(s.Labels, domain.LabelManagedBy) }), domain.ReasonMalformed},
		{"truncated inventory.json", oneChunk(0, func(s *domain.ChunkSecret) {
			s.Data[domain.SecretDataKey] = s.Data[domain.SecretDataKey][:len(s.Data[domain.SecretDataKey])/2]
		}), domain.ReasonMalformed},
		{"garbage inventory.json", oneChunk(1, func(s *domain.ChunkSecret) {
			s.Data[domain.SecretDataKey] = []byte("\x00\xff{]garbage")
		}), domain.ReasonMalformed},
		{"inventory.json missing", oneChunk(1, func(s *domain.ChunkSecret) {
			s.Data = map[string][]byte{"other.json": []byte("[]")}
		}), domain.ReasonMalformed},
		{"chunk count 10^9", eachChunk(func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationChunkCount] = "1000000000" }), domain.ReasonMalformed},
		{"negative chunk index", oneChunk(1, func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationChunkIndex] = "-1" }), domain.ReasonMalformed},
		{"duplicated chunk index", func(in []domain.ChunkSecret) []domain.ChunkSecret {
			// A second, identical chunk 1 under another name: every index is present, one twice.
			dup := in[1].Clone()
			dup.Name += "-copy"
			return append(in, dup)
		}, domain.ReasonMissingChunk},
		{"digest of the wrong length", eachChunk(func(s *domain.ChunkSecret) {
			s.Annotations[domain.AnnotationDigest] = s.Annotations[domain.AnnotationDigest][:len("sha256:")+62]
		}), domain.ReasonMalformed},
		{"timestamps in the future", eachChunk(func(s *domain.ChunkSecret) {
			s.Annotations[domain.AnnotationSourceSynthesisTime] = now.Add(time.Hour).Format(time.RFC3339)
		}), domain.ReasonMalformed},
		{"900 KiB label value", oneChunk(0, func(s *domain.ChunkSecret) {
			s.Labels[domain.LabelManagedBy] = strings.Repeat("x", 900<<10)
		}), domain.ReasonMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := logr.NewContext(t.Context(), testr.New(t))
			w, comp, secrets := hostileWorld(t, false)
			if tc.mutate != nil {
				mutated := make([]domain.ChunkSecret, len(secrets))
				for i, s := range secrets {
					mutated[i] = s.Clone()
				}
				replaceSecrets(t, w, secrets, tc.mutate(mutated))
			}
			before := stored(w.cluster)
			eventsBefore := len(w.cluster.Events())

			res, err := w.service().Reconcile(ctx, hostileRef)
			require.NoError(t, err, "an untrustworthy history is a decision, not a failure")
			require.NotNil(t, res.Recovery)
			after := stored(w.cluster)
			d, ok := w.live(hostileRef).FinishedDecision()
			require.True(t, ok)
			require.Equal(t, comp.SynthesisUUID(), d.SynthesisUUID)
			assert.LessOrEqual(t, len(w.live(hostileRef).Annotations[domain.AnnotationDecision]), boundedText)
			events := w.cluster.Events()[eventsBefore:]
			for _, e := range events {
				assert.LessOrEqual(t, len(e.Message), boundedText, "event %s", e.Reason)
			}

			if tc.reason.String() == "" {
				assert.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
				require.Len(t, w.recoverySlices(), 1)
				assert.Equal(t, cmIDs(hostileRef.Namespace, "a-2", "a-3"), tombstoneIDs(t, w.recoverySlices()[0]))
				// Eno's next synthesis carries them and deletes exactly those two downstream.
				w.settle(ctx, w.service(), hostileRef)
				assert.Equal(t, cmIDs(hostileRef.Namespace, hostileNew...), w.downstream(hostileRef.Namespace))
				assert.Empty(t, w.badDeletions())
				return
			}
			// A clear typed error from the history...
			_, readErr := w.readSnapshot(hostileLineage)
			var invalid *domain.InventoryInvalidError
			require.ErrorAs(t, readErr, &invalid)
			assert.Equal(t, tc.reason, invalid.Reason)
			// ...recorded as the decision, announced, and nothing else written.
			assert.Equal(t, domain.OutcomeInventoryInvalid, d.Outcome)
			assert.Equal(t, tc.reason.String(), d.Reason)
			assert.Zero(t, d.Tombstones)
			assert.Empty(t, res.Recovery.Plan.Tombstones)
			assert.Empty(t, w.recoverySlices())
			assert.Equal(t, before, withoutDecision(after, before), "only the decision annotation was written")
			require.Len(t, events, 1)
			assert.True(t, events[0].Warning)
			assert.Equal(t, domain.OutcomeInventoryInvalid.String(), events[0].Reason)
			assert.Contains(t, events[0].Message, tc.reason.String())
		})
	}
}

// A Secret of a foreign type at a chunk's name survives recording too: the pass stops with a
// typed error before any write.
func TestForeignSecretAtAChunkNameIsNeverOverwritten(t *testing.T) {
	ctx := logr.NewContext(t.Context(), testr.New(t))
	w, _, secrets := hostileWorld(t, true)
	foreign := secrets[0].Clone()
	foreign.Type = "kubernetes.io/tls"
	foreign.Data = map[string][]byte{"tls.crt": []byte("not ours"), "tls.key": []byte("not ours either")}
	replaceSecrets(t, w, secrets[:1], []domain.ChunkSecret{foreign})
	before := stored(w.cluster)

	_, err := w.service().Reconcile(ctx, hostileRef)
	var fse *app.ForeignSecretError
	require.ErrorAs(t, err, &fse)
	assert.Equal(t, domain.ChunkName(hostileRef.Name, hostileLineage, 0), fse.Name)
	assert.Equal(t, before.Secrets, stored(w.cluster).Secrets, "no Secret was written")
	assert.Empty(t, w.recoverySlices())
	d, ok := w.live(hostileRef).FinishedDecision()
	require.True(t, ok)
	assert.Equal(t, domain.OutcomeInventoryInvalid, d.Outcome)
	assert.Equal(t, domain.ReasonMalformed.String(), d.Reason)
	assert.True(t, hasEvent(w.cluster.Events(), "ForeignSecret"), "an event says why")

	// Retrying changes nothing.
	before = stored(w.cluster)
	_, err = w.service().Reconcile(ctx, hostileRef)
	require.ErrorAs(t, err, &fse)
	assert.Equal(t, before, stored(w.cluster))
}

func hasEvent(events []memory.Event, reason string) bool {
	for _, e := range events {
		if e.Warning && e.Reason == reason {
			return true
		}
	}
	return false
}

func TestHostileSlices(t *testing.T) {
	cases := []struct {
		name     string
		manifest string
		// duplicate: the manifest repeats an identity the synthesis already produces.
		duplicate bool
	}{
		{name: "manifest is not JSON", manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":`},
		{name: "manifest is a JSON string, not an object", manifest: `"ConfigMap/a-9"`},
		{name: "manifest lacks kind", manifest: `{"apiVersion":"v1","metadata":{"name":"a-9","namespace":"team-h"}}`},
		{name: "manifest lacks name", manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"team-h"}}`},
		{name: "manifest lacks apiVersion", manifest: `{"kind":"ConfigMap","metadata":{"name":"a-9","namespace":"team-h"}}`},
		{name: "duplicate identity", manifest: configMap(hostileRef.Namespace, "a-0"), duplicate: true},
	}
	for _, tc := range cases {
		for _, phase := range []string{"recovery", "recording"} {
			t.Run(tc.name+"/"+phase, func(t *testing.T) {
				ctx := logr.NewContext(t.Context(), testr.New(t))
				w, _, _ := hostileWorld(t, false)
				if phase == "recording" {
					// Recovery decided on sound slices and handed the tombstones to Eno; Eno's
					// next synthesis, carrying them, was decided and reconciled. Then one of its
					// slices turned hostile before recording read it.
					_, err := w.service().Reconcile(ctx, hostileRef)
					require.NoError(t, err)
					d, decided := w.live(hostileRef).FinishedDecision()
					require.True(t, decided)
					require.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
					forced, err := w.enoFollowsOnly(hostileRef)
					require.NoError(t, err)
					require.True(t, forced, "the hand-off asked Eno for a new synthesis")
					res, err := w.service().Reconcile(ctx, hostileRef)
					require.NoError(t, err)
					require.NotNil(t, res.Skipped, "Eno's next synthesis is not Ready yet")
					assert.Equal(t, domain.IneligibleNotReady, res.Skipped.Reason)
					_, err = w.enoReconcile(hostileRef)
					require.NoError(t, err)
				}
				// The second slice of the current synthesis gains the hostile manifest.
				name := w.live(hostileRef).Synthesis.Slices[1]
				sl, err := w.cluster.GetSlice(ctx, hostileRef.Namespace, name)
				require.NoError(t, err)
				sl.Resources = append(sl.Resources, domain.SliceResource{Manifest: tc.manifest})
				w.cluster.PutSlice(sl)
				before := stored(w.cluster)
				eventsBefore := len(w.cluster.Events())

				_, err = w.service().Reconcile(ctx, hostileRef)
				var se *domain.SliceError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, domain.SliceMalformed, se.Problem)
				if tc.duplicate {
					var dup *domain.DuplicateEntryError
					require.ErrorAs(t, err, &dup)
					assert.Equal(t, "a-0", dup.ID.Name)
				} else {
					assert.Equal(t, name, se.Slice)
				}
				after := stored(w.cluster)
				if phase == "recording" {
					// The carrying synthesis is Ready: the hand-off ends, whatever recording meets.
					assert.Equal(t, domain.ArmedDone, w.live(hostileRef).Annotations[domain.AnnotationArmed])
					before, after = withoutAnnotation(before, before, domain.AnnotationArmed), withoutAnnotation(after, before, domain.AnnotationArmed)
				}
				assert.Equal(t, before, after, "nothing else was written")
				events := w.cluster.Events()[eventsBefore:]
				require.Len(t, events, 1)
				assert.True(t, events[0].Warning)
				assert.Equal(t, "SliceMalformed", events[0].Reason)
				if phase == "recovery" {
					_, decided := w.live(hostileRef).Decision()
					assert.False(t, decided, "no decision from a synthesis that cannot be read")
				}
			})
		}
	}
}

func TestInvalidLineageOverride(t *testing.T) {
	for name, value := range map[string]string{"uppercase": "Web-Lineage", "200 characters": strings.Repeat("a", 200)} {
		t.Run(name, func(t *testing.T) {
			ctx := logr.NewContext(t.Context(), testr.New(t))
			// A trustworthy history exists under the default lineage: ignoring the override
			// would recover from it.
			w, _, _ := hostileWorld(t, true)
			comp, err := w.cluster.SetAnnotation(hostileRef, domain.AnnotationLineageOverride, value)
			require.NoError(t, err)
			before := stored(w.cluster)
			eventsBefore := len(w.cluster.Events())

			_, lineageErr := domain.LineageOf(comp)
			var ile *domain.InvalidLineageError
			require.ErrorAs(t, lineageErr, &ile)

			res, err := w.service().Reconcile(ctx, hostileRef)
			require.NoError(t, err)
			require.NotNil(t, res.Skipped)
			assert.Equal(t, domain.IneligibleInvalidLineage, res.Skipped.Reason)
			_, err = w.service().Record(ctx, comp)
			var ie *domain.IneligibleError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, domain.IneligibleInvalidLineage, ie.Reason)

			assert.Equal(t, before, stored(w.cluster), "no Secret, slice or decision annotation was written")
			events := w.cluster.Events()[eventsBefore:]
			require.Len(t, events, 1)
			assert.True(t, events[0].Warning)
			assert.Equal(t, domain.IneligibleInvalidLineage.String(), events[0].Reason)
			assert.Contains(t, events[0].Message, domain.AnnotationLineageOverride, "the event says which annotation to fix")
			assert.LessOrEqual(t, len(events[0].Message), boundedText)
		})
	}
}
