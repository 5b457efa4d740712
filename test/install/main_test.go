package install

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// kustomizeEnv overrides where the kustomize CLI is run from.
const kustomizeEnv = "KUSTOMIZE"

var (
	// env is the real etcd and kube-apiserver every test of the package shares.
	env *kubetest.Env
	// repoRoot holds deploy/.
	repoRoot string
	// kustomize is the kustomize CLI.
	kustomize string
)

// TestMain fails, never skips, without the kustomize CLI; then it starts the API server, runs the
// tests, stops everything and checks for leaked goroutines with goleak (kubetest.TestMainWithEnv).
func TestMain(m *testing.M) {
	root, err := kubetest.RepoRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	repoRoot = root
	kustomize = os.Getenv(kustomizeEnv)
	if kustomize == "" {
		kustomize = filepath.Join(root, "bin", "kustomize")
	}
	if _, err := os.Stat(kustomize); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the kustomize CLI is missing (%v): run `make kustomize` (make test does), or set %s\n", err, kustomizeEnv)
		os.Exit(1)
	}
	kubetest.TestMainWithEnv(m, kubetest.Options{}, func(e *kubetest.Env) int {
		env = e
		return m.Run()
	})
}
