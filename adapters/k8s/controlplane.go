package k8s

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
)

// ControlPlaneID names a control plane by the UID of its kube-system Namespace (design §3):
// unique per cluster, the same across restarts and upgrades, read with one get.
func ControlPlaneID(ctx context.Context, meta metadata.Interface) (string, error) {
	ns, err := meta.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", apiError("reading the control plane's kube-system Namespace, whose UID names it in the inventory (or name it: --control-plane-id, ENO_TOMBSTONE_RECOVERY_CONTROL_PLANE_ID)", err)
	}
	return string(ns.UID), nil
}
