package k8s

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

	admin, err := NewDownstreamObjects(c.Metadata, c.Kube.Discovery())
	require.NoError(t, err)
	limited := kubetest.NewClients(t, env.UserConfig(inventoryWriter))
	narrowed, err := NewDownstreamObjects(limited.Metadata, limited.Kube.Discovery())
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

// The newest write of the object itself is read from managedFields: a later edit by another
// field manager moves it, a status write does not.
func TestObserveObjectReadsTheLastWrite(t *testing.T) {
	c := env.AdminClients(t)
	ctx := testContext(t)
	ns := c.NewNamespace(t, "changed")
	created, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: ns},
		Data: map[string]string{"a": "b"}}, metav1.CreateOptions{FieldManager: "first"})
	require.NoError(t, err)
	reader, err := NewDownstreamObjects(c.Metadata, c.Kube.Discovery())
	require.NoError(t, err)
	entry := domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "cm"}
	o, err := reader.ObserveObject(ctx, entry)
	require.NoError(t, err)
	// The API server stamps creationTimestamp and the managedFields time at two instants, which
	// may fall either side of a second's boundary.
	assert.WithinDuration(t, created.CreationTimestamp.UTC(), o.Changed, time.Second, "written once, at its creation")

	time.Sleep(1100 * time.Millisecond) // managedFields times have whole seconds
	created.Data["taken"] = "over"
	_, err = c.Kube.CoreV1().ConfigMaps(ns).Update(ctx, created, metav1.UpdateOptions{FieldManager: "second"})
	require.NoError(t, err)
	o, err = reader.ObserveObject(ctx, entry)
	require.NoError(t, err)
	assert.True(t, o.Changed.After(o.Created), "the later write by another manager: %s after %s", o.Changed, o.Created)
}
