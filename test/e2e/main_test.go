package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

var (
	// env is the real etcd and kube-apiserver every test shares; each test uses its own
	// namespaces and Composition names.
	env *kubetest.Env
	// binary is tombstone-recovery built once for the package.
	binary string
)

// The ServiceAccount identity deploy/*/release*.yaml binds, as a static token user.
const controllerUser = "system:serviceaccount:eno-system:eno-tombstone-recovery"

var controllerGroups = []string{"system:serviceaccounts", "system:serviceaccounts:eno-system"}

// unprivilegedUser has no RBAC at all: the binary can reach the API server but never syncs.
const unprivilegedUser = "e2e-unprivileged"

// narrowedUser is bound to deploy/'s RBAC without the downstream get on tombstoned kinds.
const narrowedUser = "e2e-narrowed"

// exitWithin bounds how long a stopped or failing binary may take to exit.
const exitWithin = kubetest.ExitWithin

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	// The build runs while the API server starts.
	build, err := kubetest.StartBuild(dir, kubetest.RaceEnabled)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: building tombstone-recovery: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	opts := kubetest.Options{Users: []kubetest.User{{Name: controllerUser, Groups: controllerGroups}, {Name: unprivilegedUser}, {Name: narrowedUser}}}
	kubetest.TestMainWithEnv(m, opts, func(e *kubetest.Env) int {
		defer os.RemoveAll(dir)
		env = e
		if binary, err = build(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: building tombstone-recovery: %v\n", err)
			return 1
		}
		return m.Run()
	})
}

// testContext bounds one test's calls to the API server.
func testContext(t *testing.T) context.Context { return kubetest.Context(t, 3*time.Minute) }

// ensureNamespace creates a namespace with a fixed name (design §3.1's team-a, eno-system).
func ensureNamespace(t *testing.T, c kubetest.Clients, name string) {
	t.Helper()
	_, err := c.Kube.CoreV1().Namespaces().Create(testContext(t),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// waitFor polls check until it returns nil, failing the test with the last error after
// kubetest.Eventually.
func waitFor(t *testing.T, what string, check func(ctx context.Context) error) {
	t.Helper()
	kubetest.WaitFor(t, what, check)
}

// controller is one running `tombstone-recovery run` process (kubetest.Controller).
type controller = kubetest.Controller

// startController runs the package's binary as user ("" for the admin) and waits for /readyz.
func startController(t *testing.T, user string, args ...string) *controller {
	t.Helper()
	return env.StartController(t, binary, user, args...)
}

// launchController starts the binary and waits until probe answers 200.
func launchController(t *testing.T, user, probe string, args ...string) *controller {
	t.Helper()
	return env.LaunchController(t, binary, user, probe, args...)
}

// httpGet fetches url without keep-alives, so no connection outlives the call (goleak).
func httpGet(url string) (int, string, error) { return kubetest.HTTPGet(url) }
