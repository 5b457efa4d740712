package runnable_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// env is the real etcd and kube-apiserver the package's tests share; each test works in
// namespaces of its own.
var env *kubetest.Env

// noSecrets is a user with no RBAC binding: it cannot list the inventory Secrets.
const noSecrets = "no-secrets"

// TestMain starts the API server and checks for leaked goroutines (goleak) after it stops.
//
// Two goroutines of controller-runtime's caches outlive a stopped guest. A namespaced cache
// stops its informers without waiting for them, and a reflector waiting out its backoff (an
// unreachable cluster) ends only when the backoff does: the check waits up to a minute. A
// metadata informer stopped with an event in flight leaves its GVK-fixing watch.Filter
// goroutine blocked for good (an upstream flaw): it is ignored.
func TestMain(m *testing.M) {
	opts := kubetest.Options{
		Users: []kubetest.User{{Name: noSecrets}},
		Goleak: []goleak.Option{
			goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"),
		},
		Settle: time.Minute,
	}
	kubetest.TestMainWithEnv(m, opts, func(e *kubetest.Env) int {
		env = e
		return m.Run()
	})
}
