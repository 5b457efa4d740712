package enomodel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/adapters/memory/apiserver"
	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// The model of Eno as the demo drives it (Env): what the hand-off of tombstones relies on. The
// simulation (test/sim) checks the same model step by step, interleaved with the controller.

var ref = domain.CompositionRef{Namespace: "team-a", Name: "web"}

func cm(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ref.Namespace}}}
}

func patchOf(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "eno.azure.io/v1", "kind": "Patch",
		"metadata": map[string]any{"name": name, "namespace": ref.Namespace},
		"patch":    map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "ops": []any{}}}}
}

func cmID(name string) domain.ResourceID {
	return domain.ResourceID{Kind: "ConfigMap", Namespace: ref.Namespace, Name: name}
}

// world is an Env whose clock moves a second per tick, with the controller's k8s adapters on it.
type world struct {
	env   *enomodel.Env
	now   time.Time
	comps *k8s.Compositions
	sink  *k8s.TombstoneSink
	dyn   dynamic.Interface
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	w.env = enomodel.NewEnv(func() time.Time { return w.now })
	var err error
	w.dyn, err = dynamic.NewForConfig(w.env.Server.RESTConfig("tombstone-recovery"))
	require.NoError(t, err)
	w.comps, err = k8s.NewCompositions(w.dyn, nil)
	require.NoError(t, err)
	w.sink, err = k8s.NewTombstoneSink(w.dyn)
	require.NoError(t, err)
	require.NoError(t, w.env.CreateComposition(t.Context(), ref, map[string]string{domain.AnnotationOptIn: domain.OptInValue}))
	return w
}

func (w *world) live(t *testing.T) domain.Composition {
	t.Helper()
	comp, err := w.comps.LiveComposition(t.Context(), ref)
	require.NoError(t, err)
	return comp
}

// synthesize lets Eno synthesize outputs, a second after the last change, and, if reconcile,
// reconcile it.
func (w *world) synthesize(t *testing.T, reconcile bool, outputs ...*unstructured.Unstructured) domain.Composition {
	t.Helper()
	w.now = w.now.Add(time.Second)
	require.NoError(t, w.env.Synthesize(t.Context(), ref, outputs...))
	if reconcile {
		require.NoError(t, w.env.Reconcile(t.Context(), ref))
	}
	return w.live(t)
}

// content is what a synthesis's slices hold: names of produced ConfigMaps (and Patches, as
// "patch:<name>") and of tombstones, in slice order.
type content struct {
	produced, tombstones []string
}

func (w *world) content(t *testing.T, comp domain.Composition) content {
	t.Helper()
	var out content
	for _, name := range comp.Synthesis.Slices {
		s, err := w.env.Server.Get(apiserver.ResourceSlices, ref.Namespace, name)
		require.NoError(t, err)
		items, _, _ := unstructured.NestedSlice(s.Object, "spec", "resources")
		for _, it := range items {
			r := it.(map[string]any)
			m := &unstructured.Unstructured{}
			require.NoError(t, m.UnmarshalJSON([]byte(r["manifest"].(string))))
			n := m.GetName()
			if m.GetKind() == "Patch" {
				n = "patch:" + n
			}
			if deleted, _ := r["deleted"].(bool); deleted {
				out.tombstones = append(out.tombstones, n)
			} else {
				out.produced = append(out.produced, n)
			}
		}
	}
	return out
}

// handOff hands tombstones of the named ConfigMaps to the current synthesis as recovery does
// (design §6.2): armed, published, committed, then a resynthesis requested.
func (w *world) handOff(t *testing.T, names ...string) string {
	t.Helper()
	ctx := t.Context()
	comp := w.live(t)
	ts := make([]domain.Tombstone, len(names))
	for i, n := range names {
		ts[i] = domain.Tombstone{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: ref.Namespace, Name: n}}
		if obj, err := w.env.Server.Get(apiserver.ConfigMaps, ref.Namespace, n); err == nil {
			ts[i].UID = string(obj.GetUID())
		}
	}
	h, err := domain.NewHandoff(domain.RecoveryPlan{
		Decision:       domain.Decision{SynthesisUUID: comp.SynthesisUUID(), Outcome: domain.OutcomeRecovered, Tombstones: len(ts)},
		Tombstones:     ts,
		HistoryWritten: w.now,
	})
	require.NoError(t, err)
	armed, err := w.sink.ArmTombstones(ctx, comp, h.Digest)
	require.NoError(t, err)
	name, err := w.sink.CreateRecoverySlice(ctx, armed, h, 0)
	require.NoError(t, err)
	committed, err := w.sink.AppendRecoverySlice(ctx, armed, name)
	require.NoError(t, err)
	require.NoError(t, w.sink.RequestResynthesis(ctx, committed))
	return name
}

// create makes a ConfigMap by hand.
func (w *world) create(t *testing.T, name string) {
	t.Helper()
	_, err := w.env.Server.Create("kubectl", cm(name))
	require.NoError(t, err)
}

// follow is Eno acting on force-resynthesis, a second later.
func (w *world) follow(t *testing.T) bool {
	t.Helper()
	w.now = w.now.Add(time.Second)
	did, err := w.env.Follow(t.Context(), ref)
	require.NoError(t, err)
	return did
}

// recreate deletes the Composition orphaning its objects and creates it again.
func (w *world) recreate(t *testing.T) {
	t.Helper()
	require.NoError(t, w.env.DeleteOrphaning(t.Context(), ref))
	require.NoError(t, w.env.CreateComposition(t.Context(), ref, map[string]string{domain.AnnotationOptIn: domain.OptInValue}))
}

func TestSynthesisStampsSlicesLikeEno(t *testing.T) {
	w := newWorld(t)
	first := w.synthesize(t, false, cm("a"), cm("b"))
	second := w.synthesize(t, false, cm("a"))
	for _, tt := range []struct {
		name      string
		comp      domain.Composition
		wantStamp string
	}{
		{"a Composition's first synthesis is stamped empty", first, ""},
		{"a later synthesis is stamped with the previous UUID", second, first.SynthesisUUID()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.NotEmpty(t, tt.comp.Synthesis.Slices)
			assert.False(t, tt.comp.Synthesis.Ready, "a new synthesis is not Ready until reconciled")
			for _, name := range tt.comp.Synthesis.Slices {
				s, err := w.env.Server.Get(apiserver.ResourceSlices, ref.Namespace, name)
				require.NoError(t, err)
				stamp, _, _ := unstructured.NestedString(s.Object, "spec", "synthesisUUID")
				assert.Equal(t, tt.wantStamp, stamp)
				assert.Equal(t, tt.comp.UID, string(metav1.GetControllerOf(s).UID), "Eno's slices are owned by the Composition")
			}
		})
	}
	assert.Equal(t, first.SynthesisUUID(), second.PreviousSynthesis.UUID)
}

func TestSynthesisCarriesAndWritesTombstones(t *testing.T) {
	for _, tt := range []struct {
		name string
		// setup runs after a first synthesis producing a, b and patch:p, reconciled.
		setup func(t *testing.T, w *world)
		next  []*unstructured.Unstructured
		want  content
	}{
		{name: "a resource the new output lacks is tombstoned; a Patch is not",
			next: []*unstructured.Unstructured{cm("a")},
			want: content{produced: []string{"a"}, tombstones: []string{"b"}}},
		{name: "everything kept: no tombstone",
			next: []*unstructured.Unstructured{cm("a"), cm("b"), patchOf("p")},
			want: content{produced: []string{"a", "b", "patch:p"}}},
		{name: "an unreconciled tombstone of a slice the synthesis names is carried, its object gone or not",
			setup: func(t *testing.T, w *world) {
				w.create(t, "orphan")
				w.handOff(t, "orphan")
				_, err := w.env.Server.Delete("kubectl", apiserver.ConfigMaps, ref.Namespace, "orphan", metav1.DeleteOptions{})
				require.NoError(t, err)
			},
			next: []*unstructured.Unstructured{cm("a"), cm("b"), patchOf("p")},
			want: content{produced: []string{"a", "b", "patch:p"}, tombstones: []string{"orphan"}}},
		{name: "the new output wins over a tombstone of the same identity",
			setup: func(t *testing.T, w *world) {
				w.create(t, "orphan")
				w.handOff(t, "orphan")
			},
			next: []*unstructured.Unstructured{cm("a"), cm("b"), cm("orphan")},
			want: content{produced: []string{"a", "b", "orphan"}}},
		{name: "an empty synthesis tombstones everything",
			want: content{tombstones: []string{"a", "b"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			before := w.synthesize(t, true, cm("a"), cm("b"), patchOf("p"))
			if tt.setup != nil {
				tt.setup(t, w)
			}
			next := w.synthesize(t, false, tt.next...)
			assert.NotEqual(t, before.SynthesisUUID(), next.SynthesisUUID())
			assert.Equal(t, tt.want, w.content(t, next))
		})
	}
}

// The executor cuts a synthesis's slices at its JSON budget; an empty synthesis has none.
func TestSlicesPerSynthesis(t *testing.T) {
	big := func(name string) *unstructured.Unstructured {
		u := cm(name)
		u.Object["data"] = map[string]any{"k": strings.Repeat("x", enomodel.MaxSliceJSONBytes/2)}
		return u
	}
	for _, tt := range []struct {
		name    string
		outputs []*unstructured.Unstructured
		want    int
	}{
		{"small: one slice", []*unstructured.Unstructured{cm("a"), cm("b"), cm("c")}, 1},
		{"over the budget: cut", []*unstructured.Unstructured{big("a"), big("b"), big("c")}, 2},
		{"an empty synthesis has no slices", nil, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			comp := w.synthesize(t, false, tt.outputs...)
			assert.Len(t, comp.Synthesis.Slices, tt.want)
			assert.Len(t, w.content(t, comp).produced, len(tt.outputs))
		})
	}
}

func TestReconcile(t *testing.T) {
	w := newWorld(t)
	w.create(t, "by-hand")
	w.synthesize(t, true, cm("a"), cm("b"), patchOf("p"))
	assert.Equal(t, []domain.ResourceID{cmID("a"), cmID("b"), cmID("by-hand")}, w.env.Objects(), "a Patch creates nothing")

	w.synthesize(t, false, cm("a"))
	assert.Contains(t, w.env.Objects(), cmID("b"), "nothing is deleted before reconciliation")
	require.NoError(t, w.env.Reconcile(t.Context(), ref))
	assert.True(t, w.live(t).Synthesis.Ready)
	assert.Equal(t, []domain.ResourceID{cmID("a"), cmID("by-hand")}, w.env.Objects(),
		"the tombstone's object is deleted; an object Eno never tombstoned stays")

	// The next synthesis drops the reconciled tombstone.
	assert.Equal(t, content{produced: []string{"a"}}, w.content(t, w.synthesize(t, false, cm("a"))))
}

// A named slice gone: eno-reconciler loads nothing of that synthesis, and Eno's slice status
// forces a resynthesis once the synthesis is 5 s old, which writes the slices again.
func TestAMissingSliceIsResynthesized(t *testing.T) {
	w := newWorld(t)
	comp := w.synthesize(t, false, cm("a"))
	_, err := w.env.Server.Patch("kubectl", apiserver.ResourceSlices, ref.Namespace, comp.Synthesis.Slices[0], "application/json-patch+json",
		[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), "")
	require.NoError(t, err)
	_, err = w.env.Server.Delete("kubectl", apiserver.ResourceSlices, ref.Namespace, comp.Synthesis.Slices[0], metav1.DeleteOptions{})
	require.NoError(t, err)
	require.NoError(t, w.env.Reconcile(t.Context(), ref))
	assert.Empty(t, w.env.Objects())
	assert.False(t, w.live(t).Synthesis.Ready)
	assert.Empty(t, w.live(t).Annotations[domain.AnnotationForceResynthesis], "not within 5 s of the synthesis")

	w.now = w.now.Add(enomodel.CleanupMinAge)
	require.NoError(t, w.env.Reconcile(t.Context(), ref))
	assert.Equal(t, comp.SynthesisUUID(), w.live(t).Annotations[domain.AnnotationForceResynthesis])
	require.True(t, w.follow(t))
	require.NoError(t, w.env.Reconcile(t.Context(), ref))
	assert.True(t, w.live(t).Synthesis.Ready)
	assert.Equal(t, []domain.ResourceID{cmID("a")}, w.env.Objects())
}

func TestForcedResynthesis(t *testing.T) {
	for _, tt := range []struct {
		name  string
		force func(previous, current string) string
		want  bool
	}{
		{"no annotation", func(string, string) string { return "" }, false},
		{"the current synthesis", func(_, current string) string { return current }, true},
		{"an older synthesis: nothing, Eno never clears the annotation", func(previous, _ string) string { return previous }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			previous := w.synthesize(t, true, cm("a"), cm("b"))
			current := w.synthesize(t, true, cm("a"))
			if v := tt.force(previous.SynthesisUUID(), current.SynthesisUUID()); v != "" {
				require.NoError(t, w.env.Annotate(t.Context(), ref, domain.AnnotationForceResynthesis, v))
			}
			require.Equal(t, tt.want, w.follow(t))
			got := w.live(t)
			if !tt.want {
				assert.Equal(t, current.SynthesisUUID(), got.SynthesisUUID(), "nothing changed")
				return
			}
			assert.NotEqual(t, current.SynthesisUUID(), got.SynthesisUUID())
			assert.Empty(t, got.InFlightSynthesis)
			assert.Equal(t, content{produced: []string{"a"}}, w.content(t, got), "the same synthesizer output")
			// The annotation stays, and names an older synthesis now: no loop.
			assert.False(t, w.follow(t))
		})
	}
}

// The story the hand-off relies on (design §6.2): a tombstone in the committed recovery slice
// becomes Eno's own at the next synthesis, and Eno deletes the orphan downstream; a disarmed
// hand-off, or an object re-created since (another UID), deletes nothing: Eno evaluates the
// tombstone's precondition on its live read.
func TestEnoDeletesAHandedOffOrphan(t *testing.T) {
	for name, tt := range map[string]struct {
		act  func(t *testing.T, w *world)
		want []domain.ResourceID
	}{
		"armed: the orphan goes": {act: func(*testing.T, *world) {}, want: []domain.ResourceID{cmID("a")}},
		"disarmed: both stay": {act: func(t *testing.T, w *world) {
			require.NoError(t, w.sink.DisarmTombstones(t.Context(), w.live(t)))
		}, want: []domain.ResourceID{cmID("a"), cmID("orphan")}},
		"re-created by hand: it stays": {act: func(t *testing.T, w *world) {
			_, err := w.env.Server.Delete("kubectl", apiserver.ConfigMaps, ref.Namespace, "orphan", metav1.DeleteOptions{})
			require.NoError(t, err)
			_, err = w.env.Server.Create("kubectl", cm("orphan"))
			require.NoError(t, err)
		}, want: []domain.ResourceID{cmID("a"), cmID("orphan")}},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			w.synthesize(t, true, cm("a"), cm("orphan"))
			w.recreate(t)
			w.synthesize(t, true, cm("a"))
			assert.Equal(t, []domain.ResourceID{cmID("a"), cmID("orphan")}, w.env.Objects(), "orphaned")

			slice := w.handOff(t, "orphan")
			tt.act(t, w)
			require.True(t, w.follow(t))
			next := w.live(t)
			assert.NotContains(t, next.Synthesis.Slices, slice)
			assert.Equal(t, content{produced: []string{"a"}, tombstones: []string{"orphan"}}, w.content(t, next))
			require.NoError(t, w.env.Reconcile(t.Context(), ref))
			assert.True(t, w.live(t).Synthesis.Ready)
			assert.Equal(t, tt.want, w.env.Objects())
		})
	}
}

// Deleting a Composition with the orphan strategy leaves every object it applied; its slices
// are collected once Eno releases it.
func TestDeleteOrphaning(t *testing.T) {
	w := newWorld(t)
	w.synthesize(t, true, cm("a"))
	w.now = w.now.Add(time.Minute)
	require.NoError(t, w.env.DeleteOrphaning(context.Background(), ref))
	_, err := w.comps.LiveComposition(t.Context(), ref)
	require.Error(t, err)
	assert.Equal(t, []domain.ResourceID{cmID("a")}, w.env.Objects())
	slices, err := w.env.Server.List(apiserver.ResourceSlices, "", metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, slices.Items)
}
