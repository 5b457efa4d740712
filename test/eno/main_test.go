//go:build eno

package eno

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// Environment variables set by `make test-eno`.
const (
	// enoDirEnv is the directory hack/eno-build.sh prints: src/ (Eno's source, for its CRDs)
	// and bin/ (eno-controller, eno-reconciler, executor, eno-reconciler-wired).
	enoDirEnv = "ENO_DIR"
	// recoveryBinEnv is bin/tombstone-recovery of this checkout (`make build`).
	recoveryBinEnv = "TOMBSTONE_RECOVERY_BIN"
	// showLogsEnv prints every process's log tail, not only a failing test's.
	showLogsEnv = "ENO_SHOW_LOGS"
	// measureEnv enables TestMeasureRecovery and TestMeasureReconcilerCost.
	measureEnv = "ENO_MEASURE"
)

const (
	// synthPodNamespace is where eno-controller creates synthesizer Pods.
	synthPodNamespace = "eno-synth"
	// synthImage is the Synthesizers' image: never pulled, only compared by Eno.
	synthImage = "eno-acceptance/synth:none"
)

// The synthesizers every scenario uses: the name, and the ConfigMaps it emits into the
// Composition's namespace.
var synthesizers = map[string][]string{
	"synth-two":  {"cm-a", "cm-b"},
	"synth-one":  {"cm-a"},
	"synth-none": nil,
}

var synthesizerResource = schema.GroupVersionResource{Group: "eno.azure.io", Version: "v1", Resource: "synthesizers"}

// binaries are the programs under test.
type binaries struct {
	controller string // eno-controller
	reconciler string // stock eno-reconciler
	wired      string // eno-reconciler with the recovery controller wired in; "" if not built
	// wiredFaults is wired built with the acceptance tests' fault injection (tag
	// tombstonerecovery_faults); "" if not built.
	wiredFaults string
	executor    string // eno-controller under the name "executor"
	recovery    string // tombstone-recovery
}

// enoUser is Eno's reconciler ServiceAccount, a static-token user bound to cluster-admin as
// Eno's manifest binds it. The wired eno-reconciler runs as it, and its guest impersonates the
// release's ServiceAccount, whose RBAC and admission policies (deploy/, applied in setUpEno)
// confine every write of the guest (design §6.2).
const enoUser = "system:serviceaccount:eno-system:eno"

var (
	env             *kubetest.Env
	bins            binaries
	adminKubeconfig string
	enoKubeconfig   string // enoUser's
	admin           kubetest.Clients
	workDir         string // logs and synthesizer scripts
	enoController   *process
	standIn         *kubelet
)

// TestMain starts the API server with Eno's CRDs, eno-controller and the kubelet stand-in;
// TestMainWithEnv stops them and then runs goleak over the package.
func TestMain(m *testing.M) {
	crds, err := loadBinaries()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	users := []kubetest.User{{Name: enoUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:eno-system"}}}
	kubetest.TestMainWithEnv(m, kubetest.Options{CRDs: crds, Users: users}, func(e *kubetest.Env) int {
		env = e
		return runWithEno(m)
	})
}

// loadBinaries finds the binaries and reads Eno's four CRDs from its source.
func loadBinaries() ([]byte, error) {
	dir := os.Getenv(enoDirEnv)
	if dir == "" {
		return nil, fmt.Errorf("%s is not set: run `make test-eno ENO_SRC=<Eno's source, a directory or a .tar.gz>`, "+
			"for example `make test-eno ENO_SRC=path/to/eno-v0.2.17.tar.gz`", enoDirEnv)
	}
	bins = binaries{
		controller: filepath.Join(dir, "bin", "eno-controller"),
		reconciler: filepath.Join(dir, "bin", "eno-reconciler"),
		executor:   filepath.Join(dir, "bin", "executor"),
		recovery:   os.Getenv(recoveryBinEnv),
	}
	if bins.recovery == "" {
		return nil, fmt.Errorf("%s is not set: run `make test-eno`, which builds bin/tombstone-recovery", recoveryBinEnv)
	}
	for _, path := range []string{bins.controller, bins.reconciler, bins.executor, bins.recovery} {
		if info, err := os.Stat(path); err != nil || info.IsDir() {
			return nil, fmt.Errorf("%s is missing (%v): run `make test-eno ENO_SRC=...`, which builds it", path, err)
		}
	}
	if wired := filepath.Join(dir, "bin", "eno-reconciler-wired"); fileExists(wired) {
		bins.wired = wired
	}
	if faults := filepath.Join(dir, "bin", "eno-reconciler-wired-faults"); fileExists(faults) {
		bins.wiredFaults = faults
	}
	var crds bytes.Buffer
	for _, name := range []string{"compositions", "resourceslices", "synthesizers", "symphonies"} {
		data, err := os.ReadFile(filepath.Join(dir, "src", "api", "v1", "config", "crd", "eno.azure.io_"+name+".yaml"))
		if err != nil {
			return nil, fmt.Errorf("reading Eno's CRDs: %w", err)
		}
		crds.WriteString("\n---\n")
		crds.Write(data)
	}
	return crds.Bytes(), nil
}

func fileExists(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir()
}

// runWithEno starts what every scenario shares (eno-controller, the kubelet stand-in, the
// Synthesizers), runs the tests and stops them, by PID, before the environment goes away.
func runWithEno(m *testing.M) (code int) {
	var err error
	if workDir, err = os.MkdirTemp("", "eno-acceptance-"); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	defer os.RemoveAll(workDir)
	if adminKubeconfig, err = env.Kubeconfig(""); err == nil {
		enoKubeconfig, err = env.Kubeconfig(enoUser)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	cfg := env.AdminConfig()
	dyn, err := dynamic.NewForConfig(cfg)
	if err == nil {
		var kube kubernetes.Interface
		if kube, err = kubernetes.NewForConfig(cfg); err == nil {
			admin = kubetest.Clients{Dynamic: dyn, Kube: kube}
		}
	}
	if err == nil {
		err = setUpEno()
	}
	defer func() {
		if stopErr := tearDownEno(code != 0); stopErr != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", stopErr)
			code = 1
		}
	}()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: setting up Eno: %v\n", err)
		return 1
	}
	return m.Run()
}

func setUpEno() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := admin.Kube.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: synthPodNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", synthPodNamespace, err)
	}
	// The ServiceAccount admission plugin refuses Pods in a namespace without its default
	// ServiceAccount, which kube-controller-manager would create; there is none here.
	if _, err := admin.Kube.CoreV1().ServiceAccounts(synthPodNamespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the default ServiceAccount of %s: %w", synthPodNamespace, err)
	}
	root, err := kubetest.RepoRoot()
	if err != nil {
		return err
	}
	if err := kubetest.ApplyManifests(ctx, env.AdminConfig(), root, "deploy/control-plane/release.yaml", "deploy/downstream/release-downstream.yaml"); err != nil {
		return fmt.Errorf("applying deploy/: %w", err)
	}
	if _, err := admin.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "eno-cluster-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "eno", Namespace: "eno-system"}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("binding Eno's ServiceAccount to cluster-admin: %w", err)
	}
	for name, configMaps := range synthesizers {
		if err := createSynthesizer(ctx, name, configMaps); err != nil {
			return err
		}
	}
	enoController, err = startProcess("eno-controller", bins.controller, []string{
		"--executor-image=none",
		"--synthesizer-pod-namespace=" + synthPodNamespace,
		"--metrics-addr=0",
		"--health-probe-addr=0",
	}, []string{"KUBECONFIG=" + adminKubeconfig}, filepath.Join(workDir, "eno-controller.log"))
	if err != nil {
		return err
	}
	standIn = startKubelet(admin.Kube, synthPodNamespace, bins.executor, adminKubeconfig, workDir)
	return nil
}

// tearDownEno stops eno-controller and the stand-in, and fails the run if eno-controller
// panicked at any time.
func tearDownEno(failed bool) error {
	var errs []error
	if standIn != nil {
		standIn.stop()
	}
	if enoController != nil {
		if err := enoController.stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping eno-controller: %w", err))
		}
		if lines := panicLines(enoController.log(), 20, false); len(lines) > 0 {
			errs = append(errs, fmt.Errorf("eno-controller logged a panic:\n%s", strings.Join(lines, "\n")))
		}
		if failed || len(errs) > 0 || os.Getenv(showLogsEnv) != "" {
			fmt.Fprintf(os.Stderr, "--- last 60 lines of eno-controller (pid %d) ---\n%s\n", enoController.pid(), enoController.tail(60))
		}
	}
	return errors.Join(errs...)
}

// createSynthesizer creates a cluster-scoped Synthesizer whose command is a shell script that
// ignores its input and prints a ResourceList of the given ConfigMaps, in the namespace of the
// Composition being synthesized (the executor passes its environment on to the command).
func createSynthesizer(ctx context.Context, name string, configMaps []string) error {
	var script strings.Builder
	script.WriteString("#!/bin/sh\n# " + name + ": a KRM function printing ConfigMaps " + strings.Join(configMaps, ", ") + ".\n")
	script.WriteString("cat >/dev/null\n")
	script.WriteString(`printf '{"apiVersion":"config.kubernetes.io/v1","kind":"ResourceList","items":['` + "\n")
	for i, cm := range configMaps {
		if i > 0 {
			script.WriteString("printf ','\n")
		}
		fmt.Fprintf(&script, `printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s","namespace":"%%s"},"data":{"synthesizer":"%s"}}' "$COMPOSITION_NAMESPACE"`+"\n", cm, name)
	}
	script.WriteString(`printf ']}\n'` + "\n")
	path := filepath.Join(workDir, name+".sh")
	if err := os.WriteFile(path, []byte(script.String()), 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	syn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eno.azure.io/v1",
		"kind":       "Synthesizer",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"image": synthImage, "command": []any{path}},
	}}
	if _, err := admin.Dynamic.Resource(synthesizerResource).Create(ctx, syn, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Synthesizer %s: %w", name, err)
	}
	return nil
}
