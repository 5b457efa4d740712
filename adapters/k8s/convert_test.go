package k8s

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

func compositionObject(status any) *unstructured.Unstructured {
	obj := map[string]any{
		"apiVersion": enoAPIVersion,
		"kind":       compositionKind,
		"metadata": map[string]any{
			"namespace":       "team-a",
			"name":            "web",
			"uid":             "uid-1",
			"resourceVersion": "42",
			"labels":          map[string]any{"shard": "a"},
			"annotations":     map[string]any{domain.AnnotationOptIn: domain.OptInValue},
		},
	}
	if status != nil {
		obj["status"] = status
	}
	return &unstructured.Unstructured{Object: obj}
}

func TestCompositionFromUnstructured(t *testing.T) {
	synthesized := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	base := domain.Composition{
		Namespace: "team-a", Name: "web", UID: "uid-1", ResourceVersion: "42",
		Labels:      map[string]string{"shard": "a"},
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue},
	}
	with := func(s *domain.Synthesis) domain.Composition {
		c := base
		c.Synthesis = s
		return c
	}
	cases := []struct {
		name    string
		status  any
		want    domain.Composition
		wantErr string
	}{
		{name: "no status", want: base},
		{name: "no current synthesis", status: map[string]any{}, want: base},
		{name: "null current synthesis", status: map[string]any{"currentSynthesis": nil}, want: base},
		{
			name: "full synthesis",
			status: map[string]any{"currentSynthesis": map[string]any{
				"uuid":           "11111111-2222",
				"synthesized":    "2025-03-14T15:09:26Z",
				"ready":          "2025-03-14T15:10:00Z",
				"resourceSlices": []any{map[string]any{"name": "web-abc"}, map[string]any{"name": "web-def"}},
			}},
			want: with(&domain.Synthesis{UUID: "11111111-2222", Synthesized: synthesized, Ready: true, Slices: []string{"web-abc", "web-def"}}),
		},
		{
			name: "offset timestamp is normalised to UTC",
			status: map[string]any{"currentSynthesis": map[string]any{
				"uuid": "u", "synthesized": "2025-03-14T16:09:26+01:00",
			}},
			want: with(&domain.Synthesis{UUID: "u", Synthesized: synthesized}),
		},
		{
			name:   "pending synthesis: not synthesized, not ready",
			status: map[string]any{"currentSynthesis": map[string]any{"uuid": "u", "synthesized": nil, "ready": nil}},
			want:   with(&domain.Synthesis{UUID: "u"}),
		},
		{
			name:   "empty ready is not ready",
			status: map[string]any{"currentSynthesis": map[string]any{"uuid": "u", "synthesized": "2025-03-14T15:09:26Z", "ready": ""}},
			want:   with(&domain.Synthesis{UUID: "u", Synthesized: synthesized}),
		},
		{
			name: "in flight, with a previous synthesis and fields nothing reads",
			status: map[string]any{
				"inFlightSynthesis": map[string]any{"uuid": "n", "inputRevisions": []any{map[string]any{"key": "k"}}},
				"previousSynthesis": map[string]any{"uuid": "p", "resourceSlices": []any{map[string]any{"name": "web-old"}}, "reconciled": "2025-03-14T15:10:00Z"},
				"currentSynthesis":  map[string]any{"uuid": "u", "observedCompositionGeneration": int64(3)},
				"simplified":        map[string]any{"status": "Ready"},
			},
			want: func() domain.Composition {
				c := with(&domain.Synthesis{UUID: "u"})
				c.InFlightSynthesis, c.PreviousSynthesis = "n", &domain.Synthesis{UUID: "p", Slices: []string{"web-old"}}
				return c
			}(),
		},
		{
			name:   "in flight without a UUID",
			status: map[string]any{"inFlightSynthesis": map[string]any{}},
			want:   func() domain.Composition { c := base; c.InFlightSynthesis = "(unnamed)"; return c }(),
		},
		{name: "status not an object", status: "broken", wantErr: "field status is \"broken\", want an object"},
		{name: "current synthesis not an object", status: map[string]any{"currentSynthesis": []any{}}, wantErr: "status.currentSynthesis is a []interface {}, want an object"},
		{name: "uuid not a string", status: map[string]any{"currentSynthesis": map[string]any{"uuid": int64(7)}}, wantErr: "field uuid is a int64, want a string"},
		{name: "synthesized not RFC 3339", status: map[string]any{"currentSynthesis": map[string]any{"synthesized": "yesterday"}}, wantErr: "synthesized \"yesterday\" is not RFC 3339"},
		{name: "synthesized not a string", status: map[string]any{"currentSynthesis": map[string]any{"synthesized": true}}, wantErr: "field synthesized is a bool, want a string"},
		{name: "ready not a timestamp", status: map[string]any{"currentSynthesis": map[string]any{"ready": int64(1)}}, wantErr: "ready is a int64, want a timestamp string"},
		{name: "resourceSlices not a list", status: map[string]any{"currentSynthesis": map[string]any{"resourceSlices": "web-abc"}}, wantErr: "field resourceSlices is \"web-abc\", want a list"},
		{name: "resourceSlices entry not an object", status: map[string]any{"currentSynthesis": map[string]any{"resourceSlices": []any{"web-abc"}}}, wantErr: "resourceSlices[0] is \"web-abc\", want an object"},
		{name: "resourceSlices entry without a name", status: map[string]any{"currentSynthesis": map[string]any{"resourceSlices": []any{map[string]any{}}}}, wantErr: "resourceSlices[0].name is empty"},
		{name: "resourceSlices name not a string", status: map[string]any{"currentSynthesis": map[string]any{"resourceSlices": []any{map[string]any{"name": int64(3)}}}}, wantErr: "field name is a int64, want a string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := compositionFromUnstructured(compositionObject(tc.status))
			// The standalone cache keeps what its transform read: the same Composition, or error.
			kept, _ := CompositionAsRead(compositionObject(tc.status))
			r, convErr := asRead(kept.(runtime.Object))
			require.NoError(t, convErr)
			assert.Same(t, kept, r, "read once, at the event")
			assert.Equal(t, err, r.err)
			if err == nil {
				assert.Equal(t, got, r.composition())
			}
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Contains(t, err.Error(), "composition team-a/web is malformed")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestCompositionFromUnstructuredDeletingAndIsolated(t *testing.T) {
	u := compositionObject(nil)
	now := metav1.Now()
	u.SetDeletionTimestamp(&now)
	got, err := compositionFromUnstructured(u)
	require.NoError(t, err)
	assert.True(t, got.Deleting)
	kept, _ := CompositionAsRead(u.DeepCopy())
	assert.Equal(t, got, kept.(*readComposition).composition())

	// The result shares no map with the (possibly cached) object.
	got.Labels["shard"] = "b"
	got.Annotations["x"] = "y"
	assert.Equal(t, map[string]string{"shard": "a"}, u.GetLabels())
	assert.NotContains(t, u.GetAnnotations(), "x")

	// So does each read of the standalone cache's.
	r := read(compositionObject(map[string]any{"currentSynthesis": map[string]any{"uuid": "u", "resourceSlices": []any{map[string]any{"name": "web-abc"}}},
		"previousSynthesis": map[string]any{"uuid": "p", "resourceSlices": []any{map[string]any{"name": "web-old"}}}}))
	first := r.composition()
	first.Labels["shard"], first.Annotations["x"] = "b", "y"
	first.Synthesis.Slices[0], first.PreviousSynthesis.Slices[0] = "changed", "changed"
	assert.Equal(t, r.comp, read(compositionObject(map[string]any{"currentSynthesis": map[string]any{"uuid": "u", "resourceSlices": []any{map[string]any{"name": "web-abc"}}},
		"previousSynthesis": map[string]any{"uuid": "p", "resourceSlices": []any{map[string]any{"name": "web-old"}}}})).comp)
}

func sliceObject(spec any) *unstructured.Unstructured {
	obj := map[string]any{
		"apiVersion": enoAPIVersion,
		"kind":       resourceSliceKind,
		"metadata":   map[string]any{"namespace": "team-a", "name": "web-abc"},
	}
	if spec != nil {
		obj["spec"] = spec
	}
	return &unstructured.Unstructured{Object: obj}
}

func TestSliceFromUnstructured(t *testing.T) {
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`
	cases := []struct {
		name    string
		spec    any
		want    domain.ResourceSlice
		wantErr string
	}{
		{name: "no spec", want: domain.ResourceSlice{Namespace: "team-a", Name: "web-abc"}},
		{
			name: "resources and tombstones",
			spec: map[string]any{"synthesisUUID": "u", "resources": []any{
				map[string]any{"manifest": cm},
				map[string]any{"manifest": cm, "deleted": true},
				map[string]any{"manifest": cm, "deleted": false},
			}},
			want: domain.ResourceSlice{Namespace: "team-a", Name: "web-abc", SynthesisUUID: "u", Resources: []domain.SliceResource{
				{Manifest: cm}, {Manifest: cm, Deleted: true}, {Manifest: cm},
			}},
		},
		{name: "spec not an object", spec: "x", wantErr: "field spec is \"x\", want an object"},
		{name: "synthesisUUID not a string", spec: map[string]any{"synthesisUUID": int64(1)}, wantErr: "spec.synthesisUUID is a int64, want a string"},
		{name: "resources not a list", spec: map[string]any{"resources": map[string]any{}}, wantErr: "spec.resources is a map[string]interface {}, want a list"},
		{name: "resource not an object", spec: map[string]any{"resources": []any{cm}}, wantErr: "spec.resources[0] is"},
		{name: "manifest not a string", spec: map[string]any{"resources": []any{map[string]any{"manifest": map[string]any{"kind": "ConfigMap"}}}}, wantErr: "spec.resources[0]: field manifest is a map[string]interface {}, want a string"},
		{name: "deleted not a bool", spec: map[string]any{"resources": []any{map[string]any{"manifest": cm, "deleted": "true"}}}, wantErr: "spec.resources[0]: field deleted is \"true\", want a bool"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sliceFromUnstructured(sliceObject(tc.spec))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				var se *domain.SliceError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, domain.SliceMalformed, se.Problem)
				assert.Equal(t, "web-abc", se.Slice)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestSliceFromUnstructuredDeleting(t *testing.T) {
	u := sliceObject(map[string]any{"synthesisUUID": "u"})
	now := metav1.Now()
	u.SetDeletionTimestamp(&now)
	got, err := sliceFromUnstructured(u)
	require.NoError(t, err)
	assert.True(t, got.Deleting)
}

func TestRecoverySlice(t *testing.T) {
	comp := domain.Composition{Namespace: "team-a", Name: "web", UID: "uid-1", Synthesis: &domain.Synthesis{UUID: "abcdef0123456789"}}
	tombstones := []domain.Tombstone{
		{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "old"}, UID: testUID},
		{Entry: domain.Entry{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "team-a", Name: "gone"}, UID: testUID},
	}
	h, err := domain.NewHandoff(domain.RecoveryPlan{
		Decision:       domain.Decision{SynthesisUUID: "abcdef0123456789", Outcome: domain.OutcomeRecovered, Tombstones: 2},
		Tombstones:     tombstones,
		HistoryWritten: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC),
	})
	require.NoError(t, err)
	want, err := h.RecoverySlice(comp, 0)
	require.NoError(t, err)
	u := recoverySlice(want, comp)

	assert.Equal(t, enoAPIVersion, u.GetAPIVersion())
	assert.Equal(t, resourceSliceKind, u.GetKind())
	assert.Equal(t, "team-a", u.GetNamespace())
	assert.Equal(t, "web-recovery-abcdef01-"+h.Digest+"-0", u.GetName())
	owners := u.GetOwnerReferences()
	require.Len(t, owners, 1)
	assert.Equal(t, enoAPIVersion, owners[0].APIVersion)
	assert.Equal(t, compositionKind, owners[0].Kind)
	assert.Equal(t, "web", owners[0].Name)
	assert.Equal(t, "uid-1", string(owners[0].UID))
	// eno-controller's slice cleanup dereferences the controller reference of every slice a
	// Composition owns: without it, it panics (design §6.2).
	require.NotNil(t, owners[0].Controller)
	require.NotNil(t, owners[0].BlockOwnerDeletion)
	assert.True(t, *owners[0].Controller)
	assert.True(t, *owners[0].BlockOwnerDeletion)
	assert.Equal(t, []string{domain.SliceFinalizer}, u.GetFinalizers())

	// It reads back as the hand-off: the tombstones in order and the decision.
	got, err := sliceFromUnstructured(u)
	require.NoError(t, err)
	back, err := domain.HandoffFromSlice(comp, got)
	require.NoError(t, err)
	assert.Equal(t, h, back)
	assert.NoError(t, domain.CheckReusable(comp, got, want))
}

func TestChunkSecretConversion(t *testing.T) {
	chunk := domain.ChunkSecret{
		Namespace:       "kube-system",
		Name:            "web-a6d6889313c2-0",
		Type:            domain.SecretType,
		Labels:          map[string]string{domain.LabelManagedBy: domain.ManagedByValue, domain.LabelLineage: "a6d6889313c2"},
		Annotations:     map[string]string{domain.AnnotationChunkIndex: "0"},
		Data:            map[string][]byte{domain.SecretDataKey: []byte(`[]`)},
		ResourceVersion: "7",
	}
	cases := []struct {
		name  string
		chunk domain.ChunkSecret
	}{
		{name: "full", chunk: chunk},
		{name: "empty", chunk: domain.ChunkSecret{Namespace: "kube-system", Name: "x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := secretFromChunk(tc.chunk)
			assert.Equal(t, tc.chunk.Namespace, s.Namespace)
			assert.Equal(t, tc.chunk.Name, s.Name)
			assert.Equal(t, tc.chunk.ResourceVersion, s.ResourceVersion)
			assert.Equal(t, corev1.SecretType(tc.chunk.Type), s.Type)
			assert.Equal(t, tc.chunk, chunkFromSecret(s))
		})
	}

	// Neither direction shares maps or byte slices.
	s := secretFromChunk(chunk)
	s.Data[domain.SecretDataKey][0] = 'X'
	s.Labels["x"] = "y"
	assert.Equal(t, []byte(`[]`), chunk.Data[domain.SecretDataKey])
	assert.NotContains(t, chunk.Labels, "x")
	back := chunkFromSecret(s)
	back.Data[domain.SecretDataKey][0] = '['
	back.Annotations["x"] = "y"
	assert.Equal(t, byte('X'), s.Data[domain.SecretDataKey][0])
	assert.NotContains(t, s.Annotations, "x")
}

func TestApplyChunkKeepsOtherMetadata(t *testing.T) {
	live := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "kube-system", Name: "c", ResourceVersion: "9",
			Finalizers:      []string{"example.com/keep"},
			OwnerReferences: []metav1.OwnerReference{{Name: "owner"}},
			Labels:          map[string]string{"old": "label"},
		},
		Type: domain.SecretType,
		Data: map[string][]byte{"stale": []byte("x")},
	}
	applyChunk(live, domain.ChunkSecret{
		Type:        domain.SecretType,
		Labels:      map[string]string{domain.LabelManagedBy: domain.ManagedByValue},
		Annotations: map[string]string{"a": "b"},
		Data:        map[string][]byte{domain.SecretDataKey: []byte(`[]`)},
	})
	assert.Equal(t, "9", live.ResourceVersion)
	assert.Equal(t, []string{"example.com/keep"}, live.Finalizers)
	assert.Len(t, live.OwnerReferences, 1)
	assert.Equal(t, map[string]string{domain.LabelManagedBy: domain.ManagedByValue}, live.Labels)
	assert.Equal(t, map[string]string{"a": "b"}, live.Annotations)
	assert.Equal(t, map[string][]byte{domain.SecretDataKey: []byte(`[]`)}, live.Data)
}

func TestAPIError(t *testing.T) {
	gr := schema.GroupResource{Group: enoGroup, Resource: compositionsResource}
	cases := []struct {
		name   string
		err    error
		is     error
		apiChk func(error) bool
	}{
		{name: "not found", err: apierrors.NewNotFound(gr, "web"), is: ports.ErrNotFound, apiChk: apierrors.IsNotFound},
		{name: "conflict", err: apierrors.NewConflict(gr, "web", errors.New("rv")), is: ports.ErrConflict, apiChk: apierrors.IsConflict},
		{name: "already exists", err: apierrors.NewAlreadyExists(gr, "web"), is: ports.ErrAlreadyExists, apiChk: apierrors.IsAlreadyExists},
		{name: "forbidden", err: apierrors.NewForbidden(gr, "web", errors.New("rbac")), is: ports.ErrForbidden, apiChk: apierrors.IsForbidden},
		{name: "other", err: apierrors.NewInternalError(errors.New("etcd")), apiChk: apierrors.IsInternalError},
	}
	all := []error{ports.ErrNotFound, ports.ErrConflict, ports.ErrAlreadyExists, ports.ErrForbidden}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := apiError("reading composition team-a/web", tc.err)
			assert.Contains(t, err.Error(), "reading composition team-a/web")
			assert.ErrorIs(t, err, tc.err, "the API error stays in the chain")
			assert.True(t, tc.apiChk(err))
			for _, e := range all {
				assert.Equal(t, e == tc.is, errors.Is(err, e), "errors.Is(%v)", e)
			}
		})
	}
}

// dataWrittenAt reads the managedFields domain.DataWrittenByUs needs (design §6.3, stripped history): which
// entries own f:data at the top level, whose they are, when. An entry whose fieldsV1 does not
// parse may own it: another manager's makes the time unknown, ours is no data write.
func TestDataWrittenAt(t *testing.T) {
	t1 := time.Date(2025, 6, 1, 11, 0, 0, 0, time.UTC)
	t2, t3 := t1.Add(time.Minute), t1.Add(time.Hour)
	const (
		data     = `{"f:data":{".":{},"f:inventory.json":{}}}`
		create   = `{"f:data":{".":{},"f:inventory.json":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:type":{}}`
		metadata = `{"f:metadata":{"f:annotations":{"f:eno.azure.io/chunk-count":{}},"f:labels":{"f:x":{}}}}`
		// An annotation or label named "data" is not the data.
		nested = `{"f:metadata":{"f:annotations":{"f:data":{}},"f:labels":{"f:data":{}}}}`
	)
	by := func(manager, fields string, at time.Time) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", Time: &metav1.Time{Time: at}, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	entry := func(fields string, at time.Time) metav1.ManagedFieldsEntry {
		return by(domain.FieldManager, fields, at)
	}
	noTime := by("velero", data, t3)
	noTime.Time = nil
	otherType := by("velero", data, t3)
	otherType.FieldsType = "FieldsV2"
	noFields := entry(data, t3)
	noFields.FieldsV1 = nil
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    time.Time
	}{
		{"no managedFields: unknown", nil, time.Time{}},
		{"our create, owning data and metadata", []metav1.ManagedFieldsEntry{entry(create, t1)}, t1},
		{"the newest of ours owning f:data", []metav1.ManagedFieldsEntry{entry(data, t2), entry(create, t1), entry(data, t3)}, t3},
		{"a newer entry of ours owning only f:metadata is no data write", []metav1.ManagedFieldsEntry{entry(create, t1), entry(metadata, t3)}, t1},
		{"f:data below f:metadata is not the data", []metav1.ManagedFieldsEntry{entry(data, t1), by("velero", nested, t3)}, t1},
		{"only another manager's: unknown", []metav1.ManagedFieldsEntry{by("velero", create, t1)}, time.Time{}},
		{"another manager's newer data write: unknown", []metav1.ManagedFieldsEntry{entry(create, t1), by("velero", data, t2)}, time.Time{}},
		{"our malformed fieldsV1 is no data write", []metav1.ManagedFieldsEntry{entry(data, t1), entry(`{"f:data":{`, t3)}, t1},
		{"another's malformed fieldsV1, newer: unknown", []metav1.ManagedFieldsEntry{entry(data, t1), by("velero", `["f:data"]`, t3)}, time.Time{}},
		{"another's entry without a time: unknown", []metav1.ManagedFieldsEntry{entry(data, t1), noTime}, time.Time{}},
		{"another's other fieldsType: unknown", []metav1.ManagedFieldsEntry{entry(data, t1), otherType}, time.Time{}},
		{"our entry without fieldsV1 is no data write", []metav1.ManagedFieldsEntry{entry(data, t1), noFields}, t1},
		{"a time in another zone is the same instant, in UTC", []metav1.ManagedFieldsEntry{entry(data, t2.In(time.FixedZone("CEST", 2*3600)))}, t2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := dataWrittenAt(t1, tt.entries)
			assert.True(t, tt.want.Equal(got), "want %s, got %s", tt.want, got)
			assert.Equal(t, tt.want.IsZero(), got.IsZero())
			if !got.IsZero() {
				assert.Equal(t, time.UTC, got.Location())
			}
			s := secretFromChunk(domain.ChunkSecret{Namespace: "kube-system", Name: "c"})
			s.CreationTimestamp = metav1.Time{Time: t1}
			s.ManagedFields = tt.entries
			assert.True(t, tt.want.Equal(chunkFromSecret(s).DataWrittenAt), "the chunk read carries it")
		})
	}
	s := secretFromChunk(domain.ChunkSecret{Namespace: "kube-system", Name: "c"})
	s.CreationTimestamp, s.ManagedFields = metav1.Time{Time: t2}, []metav1.ManagedFieldsEntry{entry(data, t1)}
	assert.True(t, chunkFromSecret(s).DataWrittenAt.IsZero(), "re-created after our write (a restore copied our entry): unknown")
}

// A Composition whose status this adapter cannot read is still listed, with its identity and
// annotations: whether it shares a lineage is decided by them, and one missed would let recovery
// clean a lineage that a living Composition shares.
func TestListCompositionsKeepsAnUnreadableStatus(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eno.azure.io/v1", "kind": "Composition",
		"metadata": map[string]any{"namespace": "team-a", "name": "web-split", "uid": "uid-split",
			"annotations": map[string]any{domain.AnnotationLineageOverride: "shared"}},
		"status": map[string]any{"currentSynthesis": map[string]any{"uuid": "u", "synthesized": "not a time"}},
	}}
	require.NoError(t, indexer.Add(bad))
	comps, err := NewCompositions(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()),
		cache.NewGenericLister(indexer, CompositionGVR.GroupResource()))
	require.NoError(t, err)
	all, err := comps.ListCompositions(t.Context())
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, domain.CompositionRef{Namespace: "team-a", Name: "web-split"}, all[0].Ref())
	l, err := domain.LineageOf(all[0])
	require.NoError(t, err)
	assert.Equal(t, "shared", l.String())
}
