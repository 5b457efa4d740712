package runnable_test

import (
	"testing"
	"time"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// env is the real etcd and kube-apiserver the package's tests share; each test works in
// namespaces of its own.
var env *kubetest.Env

// noSecrets is a user with no RBAC binding: it cannot list the inventory Secrets.
const noSecrets = "no-secrets"

// TestMain starts the API server and checks for leaked goroutines (goleak) after it stops,
// allowing for controller-runtime's stragglers (kubetest.ControllerRuntimeStragglers).
func TestMain(m *testing.M) {
	opts := kubetest.Options{
		Users:  []kubetest.User{{Name: noSecrets}},
		Goleak: kubetest.ControllerRuntimeStragglers,
		Settle: time.Minute,
	}
	kubetest.TestMainWithEnv(m, opts, func(e *kubetest.Env) int {
		env = e
		return m.Run()
	})
}
