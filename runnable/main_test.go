package runnable_test

import (
	"testing"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// env is the real etcd and kube-apiserver the package's tests share; each test works in
// namespaces of its own.
var env *kubetest.Env

// TestMain starts the API server and checks for leaked goroutines (goleak) after it stops.
func TestMain(m *testing.M) {
	kubetest.TestMainWithEnv(m, kubetest.Options{}, func(e *kubetest.Env) int {
		env = e
		return m.Run()
	})
}
