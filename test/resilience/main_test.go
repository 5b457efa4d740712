package resilience_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// controllerUser is the static-token identity the deploy/ RBAC binds: the controller's
// ServiceAccount eno-system/eno-tombstone-recovery.
const controllerUser = "system:serviceaccount:eno-system:eno-tombstone-recovery"

var (
	// env is the real etcd and kube-apiserver every test of the package shares.
	env *kubetest.Env
	// repoRoot is the main module's root, where deploy/ and cmd/ live.
	repoRoot string
	// controllerBinary is `tombstone-recovery`, built once by TestMain (with -race under -race).
	controllerBinary string
)

// deployManifests are the release files whose RBAC the controller runs under in these tests.
var deployManifests = []string{"deploy/control-plane/release.yaml", "deploy/downstream/release-downstream.yaml"}

// TestMain starts the API server, applies the RBAC of deploy/, builds the controller binary, runs
// the tests, stops everything and checks for leaked goroutines with goleak (kubetest.TestMainWithEnv).
func TestMain(m *testing.M) {
	kubetest.TestMainWithEnv(m, kubetest.Options{Users: []kubetest.User{{
		Name:   controllerUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:eno-system"},
	}}, Goleak: kubetest.ControllerRuntimeStragglers, Settle: time.Minute}, func(e *kubetest.Env) int {
		env = e
		root, err := kubetest.RepoRoot()
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			return 1
		}
		repoRoot = root
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := applyDeployRBAC(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: applying deploy/ RBAC: %v\n", err)
			return 1
		}
		if err := startDownstream(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: preparing the downstream cluster: %v\n", err)
			return 1
		}
		dir, err := os.MkdirTemp("", "resilience-bin-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			return 1
		}
		defer os.RemoveAll(dir)
		began := time.Now()
		build, err := kubetest.StartBuild(dir, kubetest.RaceEnabled)
		if err == nil {
			controllerBinary, err = build()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: building the controller: %v\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "resilience: built %s (race=%v) in %.1fs\n", controllerBinary, kubetest.RaceEnabled, time.Since(began).Seconds())
		return m.Run()
	})
}

// downstreamAdmin applies the objects of syntheses downstream, as eno-reconciler would.
var downstreamAdmin kubetest.Clients

// startDownstream builds downstreamAdmin and creates the namespace the synthesized objects name.
func startDownstream(ctx context.Context) error {
	cfg := env.AdminConfig()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	downstreamAdmin = kubetest.Clients{Dynamic: dyn, Kube: kube}
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", workloadNamespace, err)
	}
	return nil
}

// readManifests decodes the multi-document YAML files of deploy/.
func readManifests(files ...string) ([]*unstructured.Unstructured, error) {
	return kubetest.ReadManifests(repoRoot, files...)
}

// applyDeployRBAC creates the namespace, ServiceAccount, RBAC and admission policies of deploy/
// and waits until the controller's identity is authorized by them.
func applyDeployRBAC(ctx context.Context) error {
	if err := kubetest.ApplyManifests(ctx, env.AdminConfig(), repoRoot, deployManifests...); err != nil {
		return err
	}
	// RBAC is served from the API server's informer caches; wait until the bindings took effect.
	kube, err := kubernetes.NewForConfig(env.UserConfig(controllerUser))
	if err != nil {
		return err
	}
	for {
		_, err := kube.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			break
		}
		if !apierrors.IsForbidden(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the deploy/ RBAC never took effect: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The admission policies take effect asynchronously too: wait until the Secret policy denies a
	// dry-run create of a foreign Secret, so that the stories run with the policies in place.
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe", Namespace: "kube-system"}, Type: corev1.SecretTypeOpaque}
	for {
		_, err := kube.CoreV1().Secrets("kube-system").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the deploy/ admission policies never took effect: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
