package k8s

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// env is the real etcd and kube-apiserver every test of the package shares.
var env *kubetest.Env

// inventoryWriter is a user granted only what the SecretStore needs, in one namespace.
const inventoryWriter = "inventory-writer"

// testUID is the UID recovery saw of every object the tests hand over as a tombstone.
const testUID = "0f1e2d3c-0000-4000-8000-000000000001"

// TestMain starts the API server; TestMainWithEnv stops it and then runs goleak over the package.
func TestMain(m *testing.M) {
	kubetest.TestMainWithEnv(m, kubetest.Options{Users: []kubetest.User{{Name: inventoryWriter}}}, func(e *kubetest.Env) int {
		env = e
		return m.Run()
	})
}

// eventually is how long a cache may lag behind the API server in these tests.
const eventually = 15 * time.Second

// testContext bounds one test's calls to the API server.
func testContext(t *testing.T) context.Context { return kubetest.Context(t, time.Minute) }
