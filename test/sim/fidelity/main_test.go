package fidelity_test

import (
	"testing"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// env is the real etcd and kube-apiserver (with the minimal Eno CRDs) every sequence replays
// against; each sequence works in a namespace of its own.
var env *kubetest.Env

// TestMain starts the real API server; TestMainWithEnv stops it and then runs goleak over the
// package.
func TestMain(m *testing.M) {
	kubetest.TestMainWithEnv(m, kubetest.Options{}, func(e *kubetest.Env) int {
		env = e
		return m.Run()
	})
}
