package perf

import (
	"testing"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// env is the real etcd and kube-apiserver every test of the package shares; each test works in
// namespaces of its own.
var env *kubetest.Env

// TestMain starts the API server; TestMainWithEnv stops it and then runs goleak over the package.
func TestMain(m *testing.M) {
	kubetest.TestMainWithEnv(m, kubetest.Options{}, func(e *kubetest.Env) int {
		env = e
		return m.Run()
	})
}
