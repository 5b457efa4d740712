package k8s

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

var synthesizedAt = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

func sampleComposition(namespace, name string) domain.Composition {
	return domain.Composition{
		Namespace:   namespace,
		Name:        name,
		Labels:      map[string]string{"example.com/shard": "a"},
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue},
		Synthesis: &domain.Synthesis{
			UUID:        "5f0c8a4e-8e9b-4c3e-9d2a-1b7f6a0e4c21",
			Synthesized: synthesizedAt,
			Ready:       true,
			Slices:      []string{name + "-slice-0", name + "-slice-1"},
		},
	}
}

func mustCreateComposition(t *testing.T, c kubetest.Clients, comp domain.Composition) domain.Composition {
	t.Helper()
	u, err := kubetest.CreateComposition(testContext(t), c.Dynamic, comp)
	require.NoError(t, err)
	got, err := compositionFromUnstructured(u)
	require.NoError(t, err)
	return got
}

func newCompositions(t *testing.T, dyn dynamic.Interface, informer cache.SharedIndexInformer) *Compositions {
	t.Helper()
	var lister cache.GenericLister
	if informer != nil {
		lister = cache.NewGenericLister(informer.GetIndexer(), CompositionGVR.GroupResource())
	}
	comps, err := NewCompositions(dyn, lister)
	require.NoError(t, err)
	return comps
}

func TestLiveCompositionReadsARealComposition(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "comp")
	comps := newCompositions(t, c.Dynamic, nil)

	want := sampleComposition(ns, "web")
	stored, err := kubetest.CreateComposition(ctx, c.Dynamic, want)
	require.NoError(t, err)

	got, err := comps.LiveComposition(ctx, want.Ref())
	require.NoError(t, err)
	want.UID, want.ResourceVersion = string(stored.GetUID()), stored.GetResourceVersion()
	assert.NotEmpty(t, want.UID)
	assert.Equal(t, want, got)

	// Without a lister GetComposition is live too.
	cached, err := comps.GetComposition(ctx, want.Ref())
	require.NoError(t, err)
	assert.Equal(t, want, cached)

	t.Run("a pending synthesis is neither synthesized nor ready", func(t *testing.T) {
		pending := sampleComposition(ns, "pending")
		pending.Synthesis = &domain.Synthesis{UUID: "0a0a0a0a-pending"}
		mustCreateComposition(t, c, pending)
		got, err := comps.LiveComposition(ctx, pending.Ref())
		require.NoError(t, err)
		require.NotNil(t, got.Synthesis)
		assert.Equal(t, domain.Synthesis{UUID: "0a0a0a0a-pending"}, *got.Synthesis)
	})

	t.Run("a Composition with no status has no synthesis", func(t *testing.T) {
		bare := sampleComposition(ns, "bare")
		bare.Synthesis = nil
		mustCreateComposition(t, c, bare)
		got, err := comps.LiveComposition(ctx, bare.Ref())
		require.NoError(t, err)
		assert.Nil(t, got.Synthesis)
	})

	t.Run("a Composition being deleted reads as Deleting", func(t *testing.T) {
		doomed := sampleComposition(ns, "doomed")
		doomed.Synthesis = nil
		client := c.Dynamic.Resource(CompositionGVR).Namespace(ns)
		u, err := kubetest.CreateComposition(ctx, c.Dynamic, doomed)
		require.NoError(t, err)
		u.SetFinalizers([]string{"example.com/hold"})
		_, err = client.Update(ctx, u, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.NoError(t, client.Delete(ctx, doomed.Name, metav1.DeleteOptions{}))

		got, err := comps.LiveComposition(ctx, doomed.Ref())
		require.NoError(t, err)
		assert.True(t, got.Deleting)
	})

	t.Run("a malformed status is an error, not a guess", func(t *testing.T) {
		bad := sampleComposition(ns, "malformed")
		bad.Synthesis = nil
		u, err := kubetest.CreateComposition(ctx, c.Dynamic, bad)
		require.NoError(t, err)
		u.Object["status"] = map[string]any{"currentSynthesis": map[string]any{"uuid": "u", "synthesized": int64(12)}}
		_, err = c.Dynamic.Resource(CompositionGVR).Namespace(ns).UpdateStatus(ctx, u, metav1.UpdateOptions{})
		require.NoError(t, err)

		_, err = comps.LiveComposition(ctx, bad.Ref())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "composition "+ns+"/malformed is malformed")
		assert.Contains(t, err.Error(), "synthesized")
	})
}

// design §6, SharedLineage: a Composition the controller may not read counts as existing, so the
// adapter's refusal must be told apart from NotFound. inventory-writer has no rights on
// Compositions: the real API server answers 403, which LiveComposition wraps as ErrForbidden.
func TestLiveCompositionForbiddenIsTyped(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "forbidden")
	want := sampleComposition(ns, "web")
	mustCreateComposition(t, c, want)

	user := kubetest.NewClients(t, env.UserConfig(inventoryWriter))
	_, err := newCompositions(t, user.Dynamic, nil).LiveComposition(ctx, want.Ref())
	require.ErrorIs(t, err, ports.ErrForbidden)
	assert.NotErrorIs(t, err, ports.ErrNotFound, "a Composition it may not read is not a Composition that is gone")
	assert.True(t, apierrors.IsForbidden(err), "the API server's error stays in the chain")
	assert.Contains(t, err.Error(), "reading composition "+ns+"/web")

	_, err = newCompositions(t, c.Dynamic, nil).LiveComposition(ctx, domain.CompositionRef{Namespace: ns, Name: "gone"})
	require.ErrorIs(t, err, ports.ErrNotFound)
	assert.NotErrorIs(t, err, ports.ErrForbidden)
}

// status.previousSynthesis, as Eno's CRD stores it, is read for the check after a hand-off: its
// UUID and slice names; an unusable one reads as none.
func TestLiveCompositionReadsThePreviousSynthesis(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "previous")
	comps := newCompositions(t, c.Dynamic, nil)
	want := sampleComposition(ns, "web")
	stored, err := kubetest.CreateComposition(ctx, c.Dynamic, want)
	require.NoError(t, err)
	status, _, err := unstructured.NestedMap(stored.Object, "status")
	require.NoError(t, err)
	status["previousSynthesis"] = map[string]any{"uuid": "prev-uuid", "synthesized": "2025-03-14T15:00:00Z",
		"resourceSlices": []any{map[string]any{"name": "web-a"}, map[string]any{"name": "web-recovery-prev-uui"}}}
	stored.Object["status"] = status
	_, err = c.Dynamic.Resource(CompositionGVR).Namespace(ns).UpdateStatus(ctx, stored, metav1.UpdateOptions{})
	require.NoError(t, err)

	got, err := comps.LiveComposition(ctx, want.Ref())
	require.NoError(t, err)
	require.NotNil(t, got.PreviousSynthesis)
	assert.Equal(t, &domain.Synthesis{UUID: "prev-uuid", Slices: []string{"web-a", "web-recovery-prev-uui"}}, got.PreviousSynthesis)
	assert.Equal(t, want.Synthesis.UUID, got.SynthesisUUID(), "the current synthesis is read as before")
}

func TestGetCompositionFromTheCache(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "cache")
	informer, _ := startCompositionInformer(t, c.Dynamic, ns)
	comps := newCompositions(t, c.Dynamic, informer)

	want := mustCreateComposition(t, c, sampleComposition(ns, "web"))
	require.Eventually(t, func() bool {
		got, err := comps.GetComposition(ctx, want.Ref())
		return err == nil && got.ResourceVersion == want.ResourceVersion
	}, eventually, 20*time.Millisecond)
	got, err := comps.GetComposition(ctx, want.Ref())
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// The cache keeps no managedFields. A write that starts from the cached copy sends none, and
	// the API server keeps the stored ones.
	cached, _, err := informer.GetIndexer().GetByKey(ns + "/web")
	require.NoError(t, err)
	assert.Empty(t, cached.(metav1.Object).GetManagedFields())
	require.NoError(t, comps.WriteDecision(ctx, got, sampleDecision(got)))
	stored, err := c.Dynamic.Resource(CompositionGVR).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, stored.GetManagedFields(), "the stored managedFields are kept")
	assert.Equal(t, sampleDecision(got).Encode(), stored.GetAnnotations()[domain.AnnotationDecision])

	_, err = comps.GetComposition(ctx, domain.CompositionRef{Namespace: ns, Name: "missing"})
	require.ErrorIs(t, err, ports.ErrNotFound)
	assert.True(t, apierrors.IsNotFound(err), "the lister's error stays in the chain: %v", err)
}

// typedComposition stands in for Eno's typed Composition, which a host's cache holds.
type typedComposition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              map[string]any `json:"spec,omitempty"`
	Status            map[string]any `json:"status,omitempty"`
}

func (c *typedComposition) DeepCopyObject() runtime.Object {
	out := *c
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec, out.Status = runtime.DeepCopyJSON(c.Spec), runtime.DeepCopyJSON(c.Status)
	return &out
}

// Inside eno-reconciler the lister hands out the host's typed Compositions, without apiVersion
// and kind: they read as the unstructured ones do, and a write that starts from the cached copy
// is accepted.
func TestTypedCompositionsFromAHostCache(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "typed")
	want := mustCreateComposition(t, c, sampleComposition(ns, "web"))
	live, err := c.Dynamic.Resource(CompositionGVR).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	typed := &typedComposition{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, typed))
	typed.TypeMeta = metav1.TypeMeta{}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(typed))
	comps, err := NewCompositions(c.Dynamic, cache.NewGenericLister(indexer, CompositionGVR.GroupResource()))
	require.NoError(t, err)

	got, err := comps.GetComposition(ctx, want.Ref())
	require.NoError(t, err)
	assert.Equal(t, want, got)
	all, err := comps.ListCompositions(ctx)
	require.NoError(t, err)
	assert.Equal(t, []domain.Composition{want}, all)
	require.NoError(t, comps.WriteDecision(ctx, got, sampleDecision(got)))
	stored, err := c.Dynamic.Resource(CompositionGVR).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, sampleDecision(got).Encode(), stored.GetAnnotations()[domain.AnnotationDecision])
}

func TestLiveCompositionBypassesTheCache(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "guard")
	informer, stopInformer := startCompositionInformer(t, c.Dynamic, ns)
	comps := newCompositions(t, c.Dynamic, informer)

	before := mustCreateComposition(t, c, sampleComposition(ns, "web"))
	require.Eventually(t, func() bool {
		got, err := comps.GetComposition(ctx, before.Ref())
		return err == nil && got.ResourceVersion == before.ResourceVersion
	}, eventually, 20*time.Millisecond)
	// Freeze the cache, then change the object behind it.
	stopInformer()

	client := c.Dynamic.Resource(CompositionGVR).Namespace(ns)
	u, err := client.Get(ctx, before.Name, metav1.GetOptions{})
	require.NoError(t, err)
	u.SetAnnotations(map[string]string{domain.AnnotationOptIn: "disabled"})
	changed, err := client.Update(ctx, u, metav1.UpdateOptions{})
	require.NoError(t, err)

	cached, err := comps.GetComposition(ctx, before.Ref())
	require.NoError(t, err)
	assert.Equal(t, before.ResourceVersion, cached.ResourceVersion, "the frozen cache still holds the old object")

	live, err := comps.LiveComposition(ctx, before.Ref())
	require.NoError(t, err)
	assert.Equal(t, changed.GetResourceVersion(), live.ResourceVersion)
	assert.Equal(t, "disabled", live.Annotations[domain.AnnotationOptIn])
}

func sampleDecision(c domain.Composition) domain.Decision {
	return domain.Decision{
		SynthesisUUID: c.SynthesisUUID(),
		Outcome:       domain.OutcomeNoInventory,
		Message:       "no inventory snapshot exists for this lineage; nothing to recover",
		DecidedAt:     time.Date(2025, 3, 14, 15, 10, 0, 0, time.UTC),
	}
}

func TestWriteDecision(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "decision")
	comps := newCompositions(t, c.Dynamic, nil)

	comp := mustCreateComposition(t, c, sampleComposition(ns, "web"))
	first := sampleDecision(comp)
	require.NoError(t, comps.WriteDecision(ctx, comp, first))
	after, err := comps.LiveComposition(ctx, comp.Ref())
	require.NoError(t, err)
	assert.Equal(t, first.Encode(), after.Annotations[domain.AnnotationDecision])
	assert.Equal(t, domain.OptInValue, after.Annotations[domain.AnnotationOptIn], "other annotations are kept")
	assert.Equal(t, comp.Synthesis, after.Synthesis, "status is untouched")

	t.Run("a stale resourceVersion is ErrConflict and changes nothing", func(t *testing.T) {
		second := first
		second.Outcome, second.Reason = domain.OutcomeNothingToRecover, domain.ReasonNoOrphans
		err := comps.WriteDecision(ctx, comp, second) // comp is from before the first write
		require.ErrorIs(t, err, ports.ErrConflict)
		got, err := comps.LiveComposition(ctx, comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, after.ResourceVersion, got.ResourceVersion)
		assert.Equal(t, first.Encode(), got.Annotations[domain.AnnotationDecision])
	})

	t.Run("no resourceVersion is ErrConflict, never a blind write", func(t *testing.T) {
		blind := after
		blind.ResourceVersion = ""
		require.ErrorIs(t, comps.WriteDecision(ctx, blind, first), ports.ErrConflict)
	})

	t.Run("the API server's own conflict check maps to ErrConflict", func(t *testing.T) {
		current, err := comps.LiveComposition(ctx, comp.Ref())
		require.NoError(t, err)
		// Another writer slips in between the adapter's read and its update.
		racing, err := NewCompositions(racingDynamic{Interface: c.Dynamic, beforeWrite: func() {
			u, err := c.Dynamic.Resource(CompositionGVR).Namespace(ns).Get(ctx, comp.Name, metav1.GetOptions{})
			require.NoError(t, err)
			u.SetLabels(map[string]string{"example.com/shard": "b"})
			_, err = c.Dynamic.Resource(CompositionGVR).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{})
			require.NoError(t, err)
		}}, nil)
		require.NoError(t, err)
		err = racing.WriteDecision(ctx, current, sampleDecision(current))
		require.ErrorIs(t, err, ports.ErrConflict)
		assert.True(t, apierrors.IsConflict(err), "the API server's error stays in the chain: %v", err)
	})

	t.Run("a decision made for another incarnation is ErrConflict", func(t *testing.T) {
		previous := mustCreateComposition(t, c, sampleComposition(ns, "recreated"))
		require.NoError(t, c.Dynamic.Resource(CompositionGVR).Namespace(ns).Delete(ctx, previous.Name, metav1.DeleteOptions{}))
		current := mustCreateComposition(t, c, sampleComposition(ns, "recreated"))
		require.ErrorIs(t, comps.WriteDecision(ctx, previous, sampleDecision(previous)), ports.ErrConflict)
		got, err := comps.LiveComposition(ctx, current.Ref())
		require.NoError(t, err)
		assert.Equal(t, current.ResourceVersion, got.ResourceVersion, "the new incarnation is untouched")
	})

	t.Run("a missing Composition is ErrNotFound", func(t *testing.T) {
		missing := sampleComposition(ns, "missing")
		missing.ResourceVersion = "1"
		err := comps.WriteDecision(ctx, missing, sampleDecision(missing))
		require.ErrorIs(t, err, ports.ErrNotFound)
		assert.True(t, apierrors.IsNotFound(err))
	})
}

func TestGetSlice(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "slices")
	slices, err := NewSlices(c.Dynamic)
	require.NoError(t, err)

	want := domain.ResourceSlice{Namespace: ns, Name: "web-abc", SynthesisUUID: "u-1", Resources: []domain.SliceResource{
		{Manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"team-a"}}`},
		{Manifest: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"b","namespace":"team-a"}}`, Deleted: true},
	}}
	_, err = kubetest.CreateSlice(ctx, c.Dynamic, want)
	require.NoError(t, err)
	got, err := slices.GetSlice(ctx, ns, want.Name)
	require.NoError(t, err)
	assert.NotEmpty(t, got.ResourceVersion)
	got.ResourceVersion = ""
	assert.Equal(t, want, got)

	_, err = slices.GetSlice(ctx, ns, "missing")
	require.ErrorIs(t, err, ports.ErrNotFound)
	assert.True(t, apierrors.IsNotFound(err))

	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": enoAPIVersion, "kind": resourceSliceKind,
		"metadata": map[string]any{"name": "malformed", "namespace": ns},
		"spec":     map[string]any{"synthesisUUID": "u-1", "resources": []any{map[string]any{"manifest": int64(3)}}},
	}}
	_, err = c.Dynamic.Resource(ResourceSliceGVR).Namespace(ns).Create(ctx, bad, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = slices.GetSlice(ctx, ns, "malformed")
	var se *domain.SliceError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, domain.SliceMalformed, se.Problem)
}

func sampleTombstones() []domain.Tombstone {
	return []domain.Tombstone{
		{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "web-settings",
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{domain.AnnotationDeletionGroup: "2"}}, UID: testUID},
		{Entry: domain.Entry{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "web-reader"}, UID: testUID},
	}
}

func TestCreateRecoverySlice(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "tombstones")
	sink, err := NewTombstoneSink(c.Dynamic)
	require.NoError(t, err)
	sliceClient := c.Dynamic.Resource(ResourceSliceGVR).Namespace(ns)

	comp := mustCreateComposition(t, c, sampleComposition(ns, "web"))
	tombstones := sampleTombstones()
	h, err := domain.NewHandoff(domain.RecoveryPlan{
		Decision:       domain.Decision{SynthesisUUID: comp.SynthesisUUID(), Outcome: domain.OutcomeRecovered, Tombstones: len(tombstones)},
		Tombstones:     tombstones,
		HistoryWritten: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC),
	})
	require.NoError(t, err)
	name, err := sink.CreateRecoverySlice(ctx, comp, h, 0)
	require.NoError(t, err)
	assert.Equal(t, "web-recovery-5f0c8a4e-"+h.Digest+"-0", name)

	// What eno-controller's slice cleanup needs: a controller reference naming the
	// Composition, and Eno's own finalizer against the cleanup race (design §6.2).
	stored, err := sliceClient.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	yes := true
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "eno.azure.io/v1", Kind: "Composition", Name: "web",
		UID: types.UID(comp.UID), Controller: &yes, BlockOwnerDeletion: &yes}}, stored.GetOwnerReferences())
	assert.Equal(t, []string{"eno.azure.io/cleanup"}, stored.GetFinalizers())
	assert.Equal(t, domain.ManagedByValue, stored.GetLabels()[domain.LabelManagedBy])

	t.Run("creating again reuses the slice without writing", func(t *testing.T) {
		again, err := sink.CreateRecoverySlice(ctx, comp, h, 0)
		require.NoError(t, err)
		assert.Equal(t, name, again)
		after, err := sliceClient.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, stored.GetResourceVersion(), after.GetResourceVersion())
	})

	t.Run("a slice of that name from another incarnation is refused and kept", func(t *testing.T) {
		before, err := sliceClient.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		recreated := comp
		recreated.UID = "00000000-0000-0000-0000-000000000001"
		_, err = sink.CreateRecoverySlice(ctx, recreated, h, 0)
		require.ErrorIs(t, err, ports.ErrAlreadyExists)
		after, err := sliceClient.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, before.GetResourceVersion(), after.GetResourceVersion())
	})
}

// The commit patch itself refuses a Composition written since the read: its test of the
// resourceVersion is what closes the window between the sink's last read and the patch (a
// review flipped to reject, another replica's decision). On kube-apiserver 1.37 a failed test
// operation answers 422, and a resourceVersion tested as a JSON string passes when it matches.
func TestCommitPatchTestsTheResourceVersion(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "commit-patch")
	client := c.Dynamic.Resource(CompositionGVR).Namespace(ns)
	comp := mustCreateComposition(t, c, sampleComposition(ns, "web"))
	stale := domain.CommitPreconditionOf(comp)

	review, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{domain.AnnotationReview: "reject:" + comp.SynthesisUUID()}}})
	require.NoError(t, err)
	changed, err := client.Patch(ctx, comp.Name, types.MergePatchType, review, metav1.PatchOptions{})
	require.NoError(t, err)

	patch, err := commitPatch(stale, "web-recovery-x")
	require.NoError(t, err)
	_, err = client.Patch(ctx, comp.Name, types.JSONPatchType, patch, metav1.PatchOptions{}, "status")
	require.True(t, apierrors.IsInvalid(err), "a stale resourceVersion fails the test operation: %v", err)

	fresh := stale
	fresh.ResourceVersion = changed.GetResourceVersion()
	patch, err = commitPatch(fresh, "web-recovery-x")
	require.NoError(t, err)
	after, err := client.Patch(ctx, comp.Name, types.JSONPatchType, patch, metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	got, err := compositionFromUnstructured(after)
	require.NoError(t, err)
	assert.True(t, got.NamesSlice("web-recovery-x"))
}

// chunk is a Secret as the recorder writes it.
func chunk(namespace, name string, lineage domain.Lineage, data string) domain.ChunkSecret {
	return domain.ChunkSecret{
		Namespace: namespace,
		Name:      name,
		Type:      domain.SecretType,
		Labels:    map[string]string{domain.LabelManagedBy: domain.ManagedByValue, domain.LabelLineage: lineage.String()},
		Annotations: map[string]string{
			domain.AnnotationFormat:     domain.FormatVersion,
			domain.AnnotationChunkIndex: "0",
		},
		Data: map[string][]byte{domain.SecretDataKey: []byte(data)},
	}
}

func newStore(t *testing.T, secrets typedcorev1.CoreV1Interface, meta metadata.Interface, namespace string) *SecretStore {
	t.Helper()
	store, err := NewSecretStore(secrets, newSecretCache(t, meta, namespace), namespace)
	require.NoError(t, err)
	return store
}

// startStore runs the store's cache until the test ends.
func startStore(t *testing.T, store *SecretStore) {
	t.Helper()
	run(t, store.cached.(*secretCache).inf)
}

func TestSecretStoreTypedErrors(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "inventory")
	store := newStore(t, c.Kube.CoreV1(), c.Metadata, ns)
	lineage := domain.DefaultLineage("team-a", "web")

	created, err := store.CreateChunk(ctx, chunk(ns, "web-0", lineage, `[]`))
	require.NoError(t, err)
	assert.NotEmpty(t, created.ResourceVersion)

	_, err = store.CreateChunk(ctx, chunk(ns, "web-0", lineage, `[]`))
	require.ErrorIs(t, err, ports.ErrAlreadyExists)
	assert.True(t, apierrors.IsAlreadyExists(err))

	next := created.Clone()
	next.Data[domain.SecretDataKey] = []byte(`[{"version":"v1"}]`)
	updated, err := store.UpdateChunk(ctx, next)
	require.NoError(t, err)
	assert.NotEqual(t, created.ResourceVersion, updated.ResourceVersion)

	_, err = store.UpdateChunk(ctx, next) // still at created's resourceVersion
	require.ErrorIs(t, err, ports.ErrConflict)

	withVersion := chunk(ns, "web-1", lineage, `[]`)
	withVersion.ResourceVersion = created.ResourceVersion
	_, err = store.CreateChunk(ctx, withVersion)
	require.Error(t, err, "a create carrying a resourceVersion is a caller's mistake")
	_, err = c.Kube.CoreV1().Secrets(ns).Get(ctx, "web-1", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing was created")

	missing := chunk(ns, "missing", lineage, `[]`)
	missing.ResourceVersion = "1"
	_, err = store.UpdateChunk(ctx, missing)
	require.ErrorIs(t, err, ports.ErrNotFound)
	assert.True(t, apierrors.IsNotFound(err))

	t.Run("the API server's own conflict check maps to ErrConflict", func(t *testing.T) {
		secrets := c.Kube.CoreV1().Secrets(ns)
		racing := newStore(t, newRacingCore(t, func() {
			s, err := secrets.Get(ctx, "web-0", metav1.GetOptions{})
			require.NoError(t, err)
			s.Annotations["example.com/touched"] = "yes"
			_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
			require.NoError(t, err)
		}), c.Metadata, ns)
		late := updated.Clone()
		late.Data[domain.SecretDataKey] = []byte(`[{"version":"v2"}]`)
		_, err := racing.UpdateChunk(ctx, late)
		require.ErrorIs(t, err, ports.ErrConflict)
		assert.True(t, apierrors.IsConflict(err), "the API server's error stays in the chain: %v", err)
	})
}

// TestSecretStoreWritesReadBackMetadataOnly: a chunk is written as protobuf and not sent back by
// the API server (the answer is its metadata), yet CreateChunk and UpdateChunk return the Secret
// as stored.
func TestSecretStoreWritesReadBackMetadataOnly(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "inventory")
	var answered, sent []int64
	cfg := rest.CopyConfig(env.AdminConfig())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost || r.Method == http.MethodPut {
				assert.Equal(t, "application/vnd.kubernetes.protobuf", r.Header.Get("Content-Type"))
				sent = append(sent, r.ContentLength)
			}
			resp, err := rt.RoundTrip(r)
			if err == nil && (r.Method == http.MethodPost || r.Method == http.MethodPut) {
				body, rerr := io.ReadAll(resp.Body)
				require.NoError(t, rerr)
				resp.Body = io.NopCloser(bytes.NewReader(body))
				answered = append(answered, int64(len(body)))
			}
			return resp, err
		})
	})
	core, err := typedcorev1.NewForConfig(cfg)
	require.NoError(t, err)
	store := newStore(t, core, c.Metadata, ns)
	lineage := domain.DefaultLineage("team-a", "web")
	big := `["` + strings.Repeat("x", 200_000) + `"]`

	created, err := store.CreateChunk(ctx, chunk(ns, "web-0", lineage, big))
	require.NoError(t, err)
	assert.NotEmpty(t, created.ResourceVersion)
	assert.Equal(t, big, string(created.Data[domain.SecretDataKey]))
	assert.Equal(t, lineage.String(), created.Labels[domain.LabelLineage])
	assert.False(t, created.DataWrittenAt.IsZero(), "the write time comes from the answer's managedFields")

	next := created.Clone()
	next.Data[domain.SecretDataKey] = []byte(big[:100_000] + `"]`)
	updated, err := store.UpdateChunk(ctx, next)
	require.NoError(t, err)
	assert.NotEqual(t, created.ResourceVersion, updated.ResourceVersion)
	assert.Equal(t, next.Data, updated.Data)
	stored, err := store.GetChunk(ctx, "web-0")
	require.NoError(t, err)
	assert.Equal(t, next.Data, stored.Data)
	assert.Equal(t, updated.ResourceVersion, stored.ResourceVersion)

	require.Len(t, answered, 2)
	for _, n := range answered {
		assert.Less(t, n, int64(10_000), "the API server answered a write with the data: %d bytes", n)
	}
	// Protobuf: the data as bytes, not a third larger in base64.
	require.Len(t, sent, 2)
	assert.Less(t, sent[0], int64(len(big)+2_000))
	assert.Less(t, sent[1], int64(100_000+2_000))
}

func TestSecretStoreRefusals(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "inventory")
	store := newStore(t, c.Kube.CoreV1(), c.Metadata, ns)
	lineage := domain.DefaultLineage("team-a", "web")
	secrets := c.Kube.CoreV1().Secrets(ns)

	t.Run("outside the inventory namespace", func(t *testing.T) {
		other := c.NewNamespace(t, "elsewhere")
		_, err := store.CreateChunk(ctx, chunk(other, "web-0", lineage, `[]`))
		require.ErrorIs(t, err, ports.ErrOutsideInventoryNamespace)
		_, err = store.CreateChunk(ctx, chunk("", "web-0", lineage, `[]`))
		require.ErrorIs(t, err, ports.ErrOutsideInventoryNamespace)
		list, err := c.Kube.CoreV1().Secrets(other).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, list.Items)
	})

	t.Run("without our managed-by label", func(t *testing.T) {
		unlabelled := chunk(ns, "unlabelled", lineage, `[]`)
		delete(unlabelled.Labels, domain.LabelManagedBy)
		_, err := store.CreateChunk(ctx, unlabelled)
		require.ErrorContains(t, err, domain.LabelManagedBy)
		_, err = secrets.Get(ctx, "unlabelled", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "nothing was created")
	})

	t.Run("updating a stored Secret that is not ours", func(t *testing.T) {
		foreign, err := secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: ns, Labels: map[string]string{domain.LabelLineage: lineage.String()}},
			Type:       domain.SecretType,
			Data:       map[string][]byte{"token": []byte("keep me")},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		takeover := chunk(ns, "foreign", lineage, `[]`)
		takeover.ResourceVersion = foreign.ResourceVersion
		_, err = store.UpdateChunk(ctx, takeover)
		require.ErrorContains(t, err, "not ours")
		after, err := secrets.Get(ctx, "foreign", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, foreign.ResourceVersion, after.ResourceVersion)
	})

	t.Run("an update keeps finalizers and owner references others set", func(t *testing.T) {
		created, err := store.CreateChunk(ctx, chunk(ns, "kept", lineage, `[]`))
		require.NoError(t, err)
		s, err := secrets.Get(ctx, "kept", metav1.GetOptions{})
		require.NoError(t, err)
		s.Finalizers = []string{"example.com/backup"}
		s, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		require.NoError(t, err)
		next := created.Clone()
		next.ResourceVersion = s.ResourceVersion
		next.Data[domain.SecretDataKey] = []byte(`[{"version":"v1"}]`)
		_, err = store.UpdateChunk(ctx, next)
		require.NoError(t, err)
		s, err = secrets.Get(ctx, "kept", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, []string{"example.com/backup"}, s.Finalizers)
		assert.Equal(t, []byte(`[{"version":"v1"}]`), s.Data[domain.SecretDataKey])
		// Let the namespace go whenever it is deleted.
		s.Finalizers = nil
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		require.NoError(t, err)
	})

	_, err := NewSecretStore(c.Kube.CoreV1(), nil, "")
	assert.Error(t, err)
}

func TestListChunks(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "inventory")
	store := newStore(t, c.Kube.CoreV1(), c.Metadata, ns)
	mine, other := domain.DefaultLineage("team-a", "web"), domain.DefaultLineage("team-a", "api")

	ours, err := store.CreateChunk(ctx, chunk(ns, "web-0", mine, `[]`))
	require.NoError(t, err)
	_, err = store.CreateChunk(ctx, chunk(ns, "api-0", other, `[]`))
	require.NoError(t, err)
	foreign, err := c.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: ns, Labels: map[string]string{domain.LabelLineage: mine.String()}},
		Type:       corev1.SecretTypeOpaque,
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	live, err := store.ListChunks(ctx, mine)
	require.NoError(t, err)
	assert.ElementsMatch(t, []domain.ChunkSecret{ours, chunkFromSecret(foreign)}, live, "live listing shows foreign Secrets of the lineage")

	// Before the cache runs, the cached listing is a live listing of our Secrets.
	cached, err := store.ListCachedChunks(ctx, mine)
	require.NoError(t, err)
	assert.Equal(t, []domain.ChunkSecret{ours}, cached)
}

func TestListCachedChunksCatchesUp(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "inventory")
	store := newStore(t, c.Kube.CoreV1(), c.Metadata, ns)
	startStore(t, store)
	lineage := domain.DefaultLineage("team-a", "web")

	cachedHolds := func(want ...domain.ChunkSecret) func() bool {
		return func() bool {
			got, err := store.ListCachedChunks(ctx, lineage)
			if err != nil || len(got) != len(want) {
				return false
			}
			for i := range want {
				if got[i].ResourceVersion != want[i].ResourceVersion {
					return false
				}
			}
			return true
		}
	}
	created, err := store.CreateChunk(ctx, chunk(ns, "web-0", lineage, `[]`))
	require.NoError(t, err)
	require.Eventually(t, cachedHolds(created), eventually, 20*time.Millisecond)

	next := created.Clone()
	next.Data[domain.SecretDataKey] = []byte(`[{"version":"v1"}]`)
	updated, err := store.UpdateChunk(ctx, next)
	require.NoError(t, err)
	require.Eventually(t, cachedHolds(updated), eventually, 20*time.Millisecond)

	// The live answer carries the data's write time (design §6.3) from managedFields; the cache
	// strips managedFields, so its copy has none.
	live, err := store.ListChunks(ctx, lineage)
	require.NoError(t, err)
	require.Len(t, live, 1)
	assert.False(t, updated.DataWrittenAt.IsZero())
	assert.Equal(t, updated.DataWrittenAt, live[0].DataWrittenAt)
	assert.WithinDuration(t, time.Now(), live[0].DataWrittenAt, time.Minute)
	updated.DataWrittenAt = time.Time{}
	updated.Data = nil // the cache holds metadata only

	got, err := store.ListCachedChunks(ctx, lineage)
	require.NoError(t, err)
	assert.Equal(t, []domain.ChunkSecret{updated}, got)

	// What the caller gets is a copy; the cache is untouched.
	got[0].Labels["x"] = "y"
	got[0].Annotations["x"] = "y"
	again, err := store.ListCachedChunks(ctx, lineage)
	require.NoError(t, err)
	assert.Equal(t, []domain.ChunkSecret{updated}, again)

	// Foreign Secrets of the lineage and our Secrets of other lineages stay out of the cached view.
	_, err = c.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: ns, Labels: map[string]string{domain.LabelLineage: lineage.String()}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// A Secret with our labels but another type is no inventory: the API server never sends it to
	// the cache (a field selector on the type), while the live listing shows it for design §5 to refuse.
	_, err = c.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "labelled-opaque", Namespace: ns, Labels: map[string]string{
			domain.LabelLineage: lineage.String(), domain.LabelManagedBy: domain.ManagedByValue}},
		Type: corev1.SecretTypeOpaque,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	otherLineage, err := store.CreateChunk(ctx, chunk(ns, "api-0", domain.DefaultLineage("team-a", "api"), `[]`))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := store.ListCachedChunks(ctx, domain.DefaultLineage("team-a", "api"))
		return err == nil && len(got) == 1 && got[0].ResourceVersion == otherLineage.ResourceVersion
	}, eventually, 20*time.Millisecond)
	got, err = store.ListCachedChunks(ctx, lineage)
	require.NoError(t, err)
	assert.Equal(t, []domain.ChunkSecret{updated}, got)
	live, err = store.ListChunks(ctx, lineage)
	require.NoError(t, err)
	assert.Len(t, live, 3, "the live listing shows every Secret of the lineage")

	// The cache holds metadata only: no Secret, no data, no managedFields.
	for _, obj := range store.cached.(*secretCache).inf.GetStore().List() {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		require.True(t, ok, "cached %T, want *metav1.PartialObjectMetadata", obj)
		assert.Empty(t, m.ManagedFields, "cached %s keeps managedFields", m.Name)
		assert.NotEqual(t, "labelled-opaque", m.Name)
	}
}

// TestSecretStoreNeedsOnlyNamespacedRights runs the store as a user who may only get, list,
// watch, create and update Secrets in the inventory namespace: no cluster-wide rights, no delete.
func TestSecretStoreNeedsOnlyNamespacedRights(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "inventory")
	_, err := c.Kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "inventory-writer"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"secrets"},
			Verbs: []string{"get", "list", "watch", "create", "update"},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "inventory-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "inventory-writer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: inventoryWriter}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	user := kubetest.NewClients(t, env.UserConfig(inventoryWriter))
	store := newStore(t, user.Kube.CoreV1(), user.Metadata, ns)
	// RBAC bindings take effect asynchronously in the authorizer's cache.
	lineage := domain.DefaultLineage("team-a", "web")
	require.Eventually(t, func() bool {
		_, err := store.ListChunks(ctx, lineage)
		return err == nil
	}, eventually, 50*time.Millisecond)
	startStore(t, store)

	created, err := store.CreateChunk(ctx, chunk(ns, "web-0", lineage, `[]`))
	require.NoError(t, err)
	next := created.Clone()
	next.Data[domain.SecretDataKey] = []byte(`[{"version":"v1"}]`)
	updated, err := store.UpdateChunk(ctx, next)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := store.ListCachedChunks(ctx, lineage)
		return err == nil && len(got) == 1 && got[0].ResourceVersion == updated.ResourceVersion
	}, eventually, 20*time.Millisecond)
}

// racingDynamic runs beforeWrite just before every Patch, as another writer would.
type racingDynamic struct {
	dynamic.Interface
	beforeWrite func()
}

func (r racingDynamic) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return racingNamespaceable{r.Interface.Resource(gvr), r.beforeWrite}
}

type racingNamespaceable struct {
	dynamic.NamespaceableResourceInterface
	beforeWrite func()
}

func (r racingNamespaceable) Namespace(ns string) dynamic.ResourceInterface {
	return racingResource{r.NamespaceableResourceInterface.Namespace(ns), r.beforeWrite}
}

type racingResource struct {
	dynamic.ResourceInterface
	beforeWrite func()
}

func (r racingResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	r.beforeWrite()
	return r.ResourceInterface.Patch(ctx, name, pt, data, opts, sub...)
}

// racingKube runs beforeUpdate just before every Secret update.
// newRacingCore is a CoreV1 client that calls beforeUpdate just before each PUT it sends.
func newRacingCore(t *testing.T, beforeUpdate func()) typedcorev1.CoreV1Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.AdminConfig())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPut {
				beforeUpdate()
			}
			return rt.RoundTrip(r)
		})
	})
	core, err := typedcorev1.NewForConfig(cfg)
	require.NoError(t, err)
	return core
}

// On the real API server: a mark under MarkFieldManager leaves the time of our data write as it
// is; another manager's re-creation of the Secret (a restore) makes it unknown (design §6.3, stripped history;
// §4, disabled later).
func TestDataWrittenAtOnTheAPIServer(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "inventory")
	store := newStore(t, c.Kube.CoreV1(), c.Metadata, ns)
	lineage := domain.DefaultLineage("team-a", "web")
	created, err := store.CreateChunk(ctx, chunk(ns, "web-0", lineage, `[]`))
	require.NoError(t, err)
	require.False(t, created.DataWrittenAt.IsZero(), "our create wrote the data")
	written := created.DataWrittenAt

	time.Sleep(1100 * time.Millisecond) // managedFields times are whole seconds
	marked := created.Clone()
	marked.Annotations[domain.AnnotationDisabledLater] = `{"snapshot":"s","ids":[]}`
	got, err := store.MarkChunk(ctx, marked)
	require.NoError(t, err)
	assert.Equal(t, written, got.DataWrittenAt, "the mark is no write of ours")
	live, err := store.GetChunk(ctx, "web-0")
	require.NoError(t, err)
	assert.Equal(t, written, live.DataWrittenAt)
	assert.Equal(t, marked.Annotations[domain.AnnotationDisabledLater], live.Annotations[domain.AnnotationDisabledLater])

	// A restore: deleted, and created again as it was by another manager.
	s, err := c.Kube.CoreV1().Secrets(ns).Get(ctx, "web-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, c.Kube.CoreV1().Secrets(ns).Delete(ctx, "web-0", metav1.DeleteOptions{}))
	s.ResourceVersion, s.UID, s.ManagedFields, s.CreationTimestamp = "", "", nil, metav1.Time{}
	_, err = c.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{FieldManager: "velero"})
	require.NoError(t, err)
	live, err = store.GetChunk(ctx, "web-0")
	require.NoError(t, err)
	assert.True(t, live.DataWrittenAt.IsZero(), "restored by another manager: unknown")
}

// countingLister is a cache that counts every read.
type countingLister struct{ reads *atomic.Int64 }

func (l countingLister) List(labels.Selector) ([]runtime.Object, error) {
	l.reads.Add(1)
	return nil, nil
}

func (l countingLister) Get(string) (runtime.Object, error) {
	l.reads.Add(1)
	return nil, apierrors.NewNotFound(CompositionGVR.GroupResource(), "")
}

func (l countingLister) ByNamespace(string) cache.GenericNamespaceLister { return l }

// TestGuardNeverReadsTheCache: the LiveReader (LiveComposition), the use cases' last
// read before every write, goes to the API server whatever the cache holds; so does the read of
// a Composition the cache does not hold at the precondition's version.
func TestGuardNeverReadsTheCache(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "guard-cache")
	want := mustCreateComposition(t, c, sampleComposition(ns, "web"))
	var reads atomic.Int64
	comps, err := NewCompositions(c.Dynamic, countingLister{&reads})
	require.NoError(t, err)
	var guard ports.LiveReader = comps

	got, err := guard.LiveComposition(ctx, want.Ref())
	require.NoError(t, err)
	assert.Equal(t, want.ResourceVersion, got.ResourceVersion)
	_, err = guard.LiveComposition(ctx, domain.CompositionRef{Namespace: ns, Name: "gone"})
	require.ErrorIs(t, err, ports.ErrNotFound)
	assert.Zero(t, reads.Load(), "the guard read the cache")

	_, err = comps.GetComposition(ctx, want.Ref())
	require.ErrorIs(t, err, ports.ErrNotFound, "the cached read does read the cache")
	assert.Equal(t, int64(1), reads.Load())
}
