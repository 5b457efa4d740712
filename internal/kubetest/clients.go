package kubetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// Clients are the clients of one identity: dynamic for Eno's resources, typed for the rest.
type Clients struct {
	Dynamic  dynamic.Interface
	Kube     kubernetes.Interface
	Metadata metadata.Interface
}

// NewClients builds both clients for cfg.
func NewClients(t testing.TB, cfg *rest.Config) Clients {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	meta, err := metadata.NewForConfig(cfg)
	require.NoError(t, err)
	return Clients{Dynamic: dyn, Kube: kube, Metadata: meta}
}

// AdminClients are clients of the admin (system:masters).
func (e *Env) AdminClients(t testing.TB) Clients {
	t.Helper()
	return NewClients(t, e.AdminConfig())
}

// namespaceTimeout bounds creating one namespace.
const namespaceTimeout = time.Minute

// NewNamespace creates a namespace under a generated name starting with prefix. Nothing is
// cleaned up: tests work in namespaces of their own and the server is discarded at the end.
func (c Clients) NewNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns, err := c.Kube.CoreV1().Namespaces().Create(Context(t, namespaceTimeout),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return ns.Name
}

// Context ends when the test does, or after d.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
