package k8s

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// design §6.3 on the real API server: each tombstone's object is read by identity through the
// metadata client; NotFound is absent, Forbidden and unknown kinds are unreadable.
func TestObserveObject(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "downstream")
	before := time.Now().Add(-time.Second)
	_, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "present", Namespace: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-reader"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	admin, err := NewDownstreamObjects(c.Metadata, c.Dynamic, c.Kube.Discovery())
	require.NoError(t, err)
	limited := kubetest.NewClients(t, env.UserConfig(inventoryWriter))
	narrowed, err := NewDownstreamObjects(limited.Metadata, limited.Dynamic, limited.Kube.Discovery())
	require.NoError(t, err)

	cm := func(name string) domain.Entry {
		return domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: name}
	}
	tests := []struct {
		name   string
		reader *DownstreamObjects
		entry  domain.Entry
		state  domain.ObjectState
	}{
		{"a namespaced object", admin, cm("present"), domain.ObjectPresent},
		{"a cluster-scoped object", admin, domain.Entry{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: ns + "-reader"}, domain.ObjectPresent},
		{"NotFound", admin, cm("gone"), domain.ObjectAbsent},
		{"a kind the server does not serve", admin, domain.Entry{Group: "example.com", Version: "v1", Kind: "Widget", Namespace: ns, Name: "w"}, domain.ObjectUnreadable},
		{"a namespace that does not fit the kind's scope", admin, domain.Entry{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Namespace: ns, Name: ns + "-reader"}, domain.ObjectUnreadable},
		{"Forbidden: a narrowed grant keeps the object", narrowed, cm("present"), domain.ObjectUnreadable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := tt.reader.ObserveObject(ctx, tt.entry)
			require.NoError(t, err)
			assert.Equal(t, tt.state, o.State, o.Detail)
			if tt.state == domain.ObjectPresent {
				assert.WithinDuration(t, before, o.Created, 10*time.Second)
				assert.Equal(t, o.Created, o.Created.Truncate(time.Second), "whole seconds")
			}
			if tt.state == domain.ObjectUnreadable {
				assert.NotEmpty(t, o.Detail)
			}
		})
	}
}

// Who wrote an object is read from managedFields, subresources aside: a later edit by another
// field manager shows with its time, a status write does not.
func TestObserveObjectReadsTheWriters(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "changed")
	created, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: ns},
		Data: map[string]string{"a": "b"}}, metav1.CreateOptions{FieldManager: "first"})
	require.NoError(t, err)
	reader, err := NewDownstreamObjects(c.Metadata, c.Dynamic, c.Kube.Discovery())
	require.NoError(t, err)
	entry := domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "cm"}
	o, err := reader.ObserveObject(ctx, entry)
	require.NoError(t, err)
	require.Len(t, o.Writes, 1)
	assert.Equal(t, "first", o.Writes[0].Manager)
	// The API server stamps creationTimestamp and the managedFields time at two instants, which
	// may fall either side of a second's boundary.
	assert.WithinDuration(t, created.CreationTimestamp.UTC(), o.Writes[0].Time, time.Second, "written once, at its creation")
	assert.False(t, o.Bare)

	time.Sleep(1100 * time.Millisecond) // managedFields times have whole seconds
	created.Data["taken"] = "over"
	_, err = c.Kube.CoreV1().ConfigMaps(ns).Update(ctx, created, metav1.UpdateOptions{FieldManager: "second"})
	require.NoError(t, err)
	o, err = reader.ObserveObject(ctx, entry)
	require.NoError(t, err)
	require.Len(t, o.Writes, 2)
	assert.Equal(t, "second", o.Writes[1].Manager)
	assert.True(t, o.Writes[1].Time.After(o.Created), "the later write by another manager: %s after %s", o.Writes[1].Time, o.Created)
}

// design §6.3, measured on kube-apiserver: what the plan reads (ObserveObject, then
// VerifyTombstones) and what Eno's precondition decides on the same live object agree, for each
// way an object comes to be: applied by Eno with and without content, taken over by another
// tool, its history stripped. Objects are applied as Eno applies them, server-side as "eno".
func TestOwnershipEvidenceOnTheAPIServer(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	reader, err := NewDownstreamObjects(c.Metadata, c.Dynamic, c.Kube.Discovery())
	require.NoError(t, err)
	apply := func(t *testing.T, gvr schema.GroupVersionResource, manager string, obj map[string]any) {
		t.Helper()
		u := &unstructured.Unstructured{Object: obj}
		_, err := c.Dynamic.Resource(gvr).Namespace(u.GetNamespace()).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: manager, Force: true})
		require.NoError(t, err)
	}
	cm := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	configMap := func(ns string, data map[string]any, labels map[string]any) map[string]any {
		m := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "namespace": ns}}
		if data != nil {
			m["data"] = data
		}
		if labels != nil {
			m["metadata"].(map[string]any)["labels"] = labels
		}
		return m
	}
	for name, tt := range map[string]struct {
		entry  func(ns string) domain.Entry
		setup  func(t *testing.T, ns string)
		bare   bool
		reason domain.DropReason // zero: tombstoned, and the precondition enables it
	}{
		"an empty ConfigMap (bare)": {setup: func(t *testing.T, ns string) { apply(t, cm, "eno", configMap(ns, nil, nil)) }, bare: true},
		"a ConfigMap with data, Eno's": {setup: func(t *testing.T, ns string) {
			apply(t, cm, "eno", configMap(ns, map[string]any{"k": "v"}, nil))
		}},
		"a ServiceAccount with no labels (bare)": {
			entry: func(ns string) domain.Entry {
				return domain.Entry{Version: "v1", Kind: "ServiceAccount", Namespace: ns, Name: "x"}
			},
			setup: func(t *testing.T, ns string) {
				apply(t, schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, "eno",
					map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "x", "namespace": ns}})
			}, bare: true},
		"a ClusterRole with no rules (bare)": {
			entry: func(ns string) domain.Entry {
				return domain.Entry{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: ns + "-x"}
			},
			setup: func(t *testing.T, ns string) {
				apply(t, schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, "eno",
					map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": ns + "-x"}})
			}, bare: true},
		"a Namespace with no labels (bare)": {
			entry: func(ns string) domain.Entry { return domain.Entry{Version: "v1", Kind: "Namespace", Name: ns + "-x"} },
			setup: func(t *testing.T, ns string) {
				apply(t, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "eno",
					map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns + "-x"}})
			}, bare: true},
		"co-managed before the history (Flux-style)": {setup: func(t *testing.T, ns string) {
			apply(t, cm, "eno", configMap(ns, map[string]any{"k": "v"}, nil))
			apply(t, cm, "kustomize-controller", configMap(ns, map[string]any{"k": "v"}, map[string]any{"kustomize.toolkit.fluxcd.io/name": "apps"}))
		}, reason: domain.DropManagedElsewhere},
		"identical takeover by a new manager": {setup: func(t *testing.T, ns string) {
			apply(t, cm, "eno", configMap(ns, map[string]any{"k": "v"}, nil))
			apply(t, cm, "kubectl", configMap(ns, map[string]any{"k": "v"}, nil))
		}, reason: domain.DropManagedElsewhere},
		"content, history stripped": {setup: func(t *testing.T, ns string) {
			apply(t, cm, "eno", configMap(ns, map[string]any{"k": "v"}, nil))
			live, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "x", metav1.GetOptions{})
			require.NoError(t, err)
			live.ManagedFields = []metav1.ManagedFieldsEntry{{}}
			_, err = c.Kube.CoreV1().ConfigMaps(ns).Update(ctx, live, metav1.UpdateOptions{})
			require.NoError(t, err)
		}, reason: domain.DropUnreadable},
	} {
		t.Run(name, func(t *testing.T) {
			ns := c.NewNamespace(t, "own")
			e := domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "x"}
			if tt.entry != nil {
				e = tt.entry(ns)
			}
			tt.setup(t, ns)
			o, err := reader.ObserveObject(ctx, e)
			require.NoError(t, err)
			require.Equal(t, domain.ObjectPresent, o.State)
			assert.Equal(t, tt.bare, o.Bare, "%+v", o)
			written := time.Now().Add(2 * time.Second).UTC().Truncate(time.Second) // after every write above
			ts := domain.Tombstone{Entry: e}
			keep, dropped := domain.VerifyTombstones([]domain.Tombstone{ts}, map[domain.ResourceID]domain.Observation{e.ID(): o}, domain.EnoManagers{}, written, true)
			if tt.reason == (domain.DropReason{}) {
				require.Len(t, keep, 1, "%+v", dropped)
			} else {
				require.Len(t, dropped, 1)
				assert.Equal(t, tt.reason, dropped[0].Reason, dropped[0].Detail)
			}

			// Eno's precondition on its own live read of the same object says the same.
			mapping, err := reader.mapper.RESTMapping(schema.GroupKind{Group: e.Group, Kind: e.Kind}, e.Version)
			require.NoError(t, err)
			live, err := c.Dynamic.Resource(mapping.Resource).Namespace(e.Namespace).Get(ctx, e.Name, metav1.GetOptions{})
			require.NoError(t, err)
			ts.UID = string(live.GetUID())
			h, err := domain.NewHandoff(domain.RecoveryPlan{Decision: domain.Decision{SynthesisUUID: "5f0c8a4e-8e9b-4c3e-9d2a-1b7f6a0e4c21",
				Outcome: domain.OutcomeRecovered, Tombstones: 1}, Tombstones: []domain.Tombstone{ts}, HistoryWritten: written})
			require.NoError(t, err)
			m := &unstructured.Unstructured{}
			require.NoError(t, m.UnmarshalJSON([]byte(h.Resources[0].Manifest)))
			comp := &unstructured.Unstructured{Object: map[string]any{}}
			comp.SetAnnotations(map[string]string{domain.AnnotationArmed: h.Digest})
			snap, _ := enomodel.ApplyOverrides(m, live, comp)
			want := "true" // kept
			if tt.reason == (domain.DropReason{}) {
				want = "false"
			}
			assert.Equal(t, want, snap.GetAnnotations()[domain.AnnotationDisableReconciliation], "live: %v", live.Object)
		})
	}
}
