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

// enoUser is Eno's reconciler ServiceAccount, which deploy/control-plane/release.yaml lets impersonate the
// controller's (the wired eno-reconciler), as a static-token user: its requests authenticate as
// it, so that the API server authorizes its impersonation.
const enoUser = "system:serviceaccount:eno-system:eno"

// env is the real etcd and kube-apiserver every test of the package shares.
var env *kubetest.Env

// deployManifests are the release files whose RBAC and policies the tests apply.
var deployManifests = []string{"deploy/control-plane/release.yaml", "deploy/downstream/release-downstream.yaml"}

// TestMain starts the API server, applies the RBAC and policies of deploy/, runs the tests, stops
// everything and checks for leaked goroutines with goleak (kubetest.TestMainWithEnv).
func TestMain(m *testing.M) {
	kubetest.TestMainWithEnv(m, kubetest.Options{Users: []kubetest.User{{Name: enoUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:eno-system"}}}}, func(e *kubetest.Env) int {
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

// wiredConfig acts as the controller's ServiceAccount the way the wired eno-reconciler does:
// Eno's identity impersonating it, by user name alone (runnable.Options.Impersonate).
func wiredConfig() *rest.Config {
	cfg := env.UserConfig(enoUser)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerUser}
	return cfg
}
