package policy_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// controllerUser and controllerGroups are the identity of the controller's ServiceAccount
// eno-system/eno-tombstone-recovery, which the tests impersonate.
const controllerUser = "system:serviceaccount:eno-system:eno-tombstone-recovery"

var controllerGroups = []string{"system:serviceaccounts", "system:serviceaccounts:eno-system", "system:authenticated"}

// env is the real etcd and kube-apiserver every test of the package shares.
var env *kubetest.Env

// deployManifests are the release files whose RBAC and policies the tests apply.
var deployManifests = []string{"deploy/release.yaml", "deploy/release-downstream.yaml"}

// TestMain starts the API server, applies the RBAC and policies of deploy/, runs the tests, stops
// everything and checks for leaked goroutines with goleak (kubetest.TestMainWithEnv).
func TestMain(m *testing.M) {
	kubetest.TestMainWithEnv(m, kubetest.Options{}, func(e *kubetest.Env) int {
		env = e
		root, err := kubetest.RepoRoot()
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			return 1
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := kubetest.ApplyManifests(ctx, env.AdminConfig(), root, deployManifests...); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: applying deploy/: %v\n", err)
			return 1
		}
		return m.Run()
	})
}

// controllerConfig acts as the controller's ServiceAccount.
func controllerConfig() *rest.Config {
	return kubetest.Impersonating(env.AdminConfig(), controllerUser, controllerGroups...)
}
