package kubetest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

var (
	env *Env

	secretResource      = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMapResource   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	roleResource        = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}
	roleBindingResource = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
)

const (
	userWithoutRBAC = "nobody"
	userInGroups    = "grouped"
)

// TestMain shares one environment across the package's tests; TestMainWithEnv checks for leaked
// goroutines with goleak after stopping it.
func TestMain(m *testing.M) {
	TestMainWithEnv(m, Options{Users: []User{
		{Name: userWithoutRBAC},
		{Name: userInGroups, Groups: []string{"team-a", "team-b"}},
	}}, func(e *Env) int {
		env = e
		return m.Run()
	})
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dynamicClient(t *testing.T, cfg *rest.Config) *dynamic.DynamicClient {
	t.Helper()
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("creating dynamic client: %v", err)
	}
	return client
}

func TestCompositionRoundTripsWithStatus(t *testing.T) {
	ctx := testContext(t)
	compositions := dynamicClient(t, env.AdminConfig()).Resource(CompositionResource).Namespace("default")

	comp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eno.azure.io/v1",
		"kind":       "Composition",
		"metadata":   map[string]any{"name": "round-trip"},
		"spec":       map[string]any{"synthesizer": map[string]any{"name": "demo"}},
	}}
	created, err := compositions.Create(ctx, comp, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Composition: %v", err)
	}
	if created.GetUID() == "" || created.GetResourceVersion() == "" {
		t.Fatalf("created Composition lacks uid or resourceVersion: %v", created.Object["metadata"])
	}

	status := map[string]any{"currentSynthesis": map[string]any{"uuid": "synth-1", "observedCompositionGeneration": int64(1)}}
	withStatus := created.DeepCopy()
	if err := unstructured.SetNestedField(withStatus.Object, status, "status"); err != nil {
		t.Fatal(err)
	}
	// The status subresource is enabled, so a main-resource update drops status changes...
	viaMain, err := compositions.Update(ctx, withStatus.DeepCopy(), metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("updating Composition: %v", err)
	}
	if _, found, _ := unstructured.NestedMap(viaMain.Object, "status"); found {
		t.Errorf("status written through the main resource: %v", viaMain.Object["status"])
	}
	// ...and /status accepts them.
	withStatus.SetResourceVersion(viaMain.GetResourceVersion())
	if _, err := compositions.UpdateStatus(ctx, withStatus, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating Composition status: %v", err)
	}

	got, err := compositions.Get(ctx, "round-trip", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading Composition back: %v", err)
	}
	if name, _, _ := unstructured.NestedString(got.Object, "spec", "synthesizer", "name"); name != "demo" {
		t.Errorf("spec.synthesizer.name = %q, want demo", name)
	}
	if uuid, _, _ := unstructured.NestedString(got.Object, "status", "currentSynthesis", "uuid"); uuid != "synth-1" {
		t.Errorf("status.currentSynthesis.uuid = %q, want synth-1", uuid)
	}
	if gen, _, _ := unstructured.NestedInt64(got.Object, "status", "currentSynthesis", "observedCompositionGeneration"); gen != 1 {
		t.Errorf("status.currentSynthesis.observedCompositionGeneration = %d, want 1", gen)
	}

	// A stale resourceVersion is a conflict, as the real adapters rely on.
	stale := got.DeepCopy()
	stale.SetResourceVersion(created.GetResourceVersion())
	if _, err := compositions.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update with stale resourceVersion: got %v, want a Conflict", err)
	}
}

func TestResourceSliceIsServed(t *testing.T) {
	ctx := testContext(t)
	slices := dynamicClient(t, env.AdminConfig()).Resource(ResourceSliceResource).Namespace("default")
	slice := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eno.azure.io/v1",
		"kind":       "ResourceSlice",
		"metadata":   map[string]any{"generateName": "slice-"},
		"spec":       map[string]any{"resources": []any{map[string]any{"manifest": "{}"}}},
	}}
	if _, err := slices.Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ResourceSlice: %v", err)
	}
	list, err := slices.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing ResourceSlices: %v", err)
	}
	if len(list.Items) == 0 {
		t.Fatal("no ResourceSlice listed after creating one")
	}
}

func secretOfSize(name string, size int) *unstructured.Unstructured {
	blob := strings.Repeat("x", size)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata":   map[string]any{"name": name},
		"type":       "Opaque",
		"data":       map[string]any{"blob": base64.StdEncoding.EncodeToString([]byte(blob))},
	}}
}

func TestSecretSizeLimitIsOneMiB(t *testing.T) {
	ctx := testContext(t)
	secrets := dynamicClient(t, env.AdminConfig()).Resource(secretResource).Namespace("default")

	if _, err := secrets.Create(ctx, secretOfSize("at-limit", 1<<20), metav1.CreateOptions{}); err != nil {
		t.Fatalf("Secret with exactly 1,048,576 bytes of data was rejected: %v", err)
	}
	_, err := secrets.Create(ctx, secretOfSize("over-limit", 1<<20+1), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("Secret with 1,048,577 bytes of data: got %v, want an Invalid error", err)
	}
}

func TestUserWithoutRBACIsForbidden(t *testing.T) {
	ctx := testContext(t)
	if _, err := dynamicClient(t, env.AdminConfig()).Resource(secretResource).Namespace("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("admin listing secrets: %v", err)
	}
	_, err := dynamicClient(t, env.UserConfig(userWithoutRBAC)).Resource(secretResource).Namespace("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("user without RBAC listing secrets: got %v, want Forbidden", err)
	}
}

// TestUserGroupsComeFromTokenFile grants a role to the user's second group only, which proves
// the quoted group list in the token file is read as two groups.
func TestUserGroupsComeFromTokenFile(t *testing.T) {
	ctx := testContext(t)
	admin := dynamicClient(t, env.AdminConfig())
	role := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "Role",
		"metadata":   map[string]any{"name": "configmap-reader"},
		"rules": []any{map[string]any{
			"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"list"},
		}},
	}}
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "RoleBinding",
		"metadata":   map[string]any{"name": "team-b-reads-configmaps"},
		"roleRef":    map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "configmap-reader"},
		"subjects":   []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-b"}},
	}}
	if _, err := admin.Resource(roleResource).Namespace("default").Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Role: %v", err)
	}
	if _, err := admin.Resource(roleBindingResource).Namespace("default").Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating RoleBinding: %v", err)
	}

	user := dynamicClient(t, env.UserConfig(userInGroups))
	// RBAC reads bindings through an informer, so the grant takes effect shortly after.
	err := poll(ctx, func() (bool, error) {
		_, err := user.Resource(configMapResource).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("user in group team-b listing configmaps: %v", err)
	}
	if _, err := user.Resource(secretResource).Namespace("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("user in group team-b listing secrets: got %v, want Forbidden", err)
	}
}

func TestUserConfigPanicsForUndeclaredUser(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("UserConfig of an undeclared user did not panic")
		}
	}()
	env.UserConfig("undeclared")
}

func TestKubeconfigWorks(t *testing.T) {
	ctx := testContext(t)
	for _, user := range []string{"", userWithoutRBAC} {
		path, err := env.Kubeconfig(user)
		if err != nil {
			t.Fatalf("Kubeconfig(%q): %v", user, err)
		}
		cfg := restConfigFromKubeconfig(t, path)
		_, err = dynamicClient(t, cfg).Resource(secretResource).Namespace("default").List(ctx, metav1.ListOptions{})
		switch {
		case user == "" && err != nil:
			t.Errorf("admin kubeconfig listing secrets: %v", err)
		case user != "" && !apierrors.IsForbidden(err):
			t.Errorf("%s kubeconfig listing secrets: got %v, want Forbidden", user, err)
		}
	}
	if _, err := env.Kubeconfig("undeclared"); err == nil {
		t.Error("Kubeconfig of an undeclared user: got no error")
	}
}

// restConfigFromKubeconfig reads the fields Kubeconfig writes, with verified TLS.
func restConfigFromKubeconfig(t *testing.T, path string) *rest.Config {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kc kubeconfigFile
	if err := json.Unmarshal(data, &kc); err != nil {
		t.Fatalf("kubeconfig is not valid JSON/YAML: %v", err)
	}
	if len(kc.Clusters) != 1 || len(kc.Users) != 1 || len(kc.Contexts) != 1 || kc.CurrentContext != kc.Contexts[0].Name {
		t.Fatalf("unexpected kubeconfig shape:\n%s", data)
	}
	return &rest.Config{
		Host:            kc.Clusters[0].Cluster.Server,
		BearerToken:     kc.Users[0].User.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: kc.Clusters[0].Cluster.CertificateAuthorityData},
	}
}

func TestStopKillsBothProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), defaultStartTimeout)
	defer cancel()
	e, err := Start(ctx, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	pids := map[string]int{"etcd": e.etcd.pid(), "kube-apiserver": e.apiserver.pid()}
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Fatalf("%s (pid %d) not running before Stop: %v", name, pid, err)
		}
	}

	if err := e.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still exists after Stop (kill -0: %v)", name, pid, err)
		}
	}
	if _, err := os.Stat(e.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s still exists after Stop: %v", e.dir, err)
	}
	if err := e.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	// The shared environment is a different pair of processes and keeps working.
	if _, err := dynamicClient(t, env.AdminConfig()).Resource(CompositionResource).Namespace("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("shared environment after stopping another: %v", err)
	}
}

func TestMissingBinaryIsAnErrorNamingMakeTestbin(t *testing.T) {
	t.Setenv(binDirEnv, t.TempDir())
	_, err := Start(testContext(t), Options{})
	if err == nil || !strings.Contains(err.Error(), "make testbin") {
		t.Fatalf("Start without binaries: got %v, want an error telling to run make testbin", err)
	}
}

func TestStartRejectsBadUsers(t *testing.T) {
	for _, users := range [][]User{
		{{Name: ""}},
		{{Name: adminUser}},
		{{Name: "twice"}, {Name: "twice"}},
		{{Name: "comma", Groups: []string{"a,b"}}},
	} {
		if _, err := Start(testContext(t), Options{Users: users}); err == nil {
			t.Errorf("Start with users %+v: got no error", users)
		}
	}
}

func TestRepoRootHoldsMainModule(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if got := modulePath(filepath.Join(root, "go.mod")); got != mainModule {
		t.Fatalf("repo root %s declares module %q, want %q", root, got, mainModule)
	}
}

func TestEmbeddedCRDs(t *testing.T) {
	crds, err := parseCRDs()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, crd := range crds {
		names = append(names, crd.GetName())
	}
	if got, want := strings.Join(names, ","), "compositions.eno.azure.io,resourceslices.eno.azure.io"; got != want {
		t.Fatalf("embedded CRDs = %s, want %s", got, want)
	}
	// deploy/crds documents this file as the single copy.
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "deploy", "crds", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "internal/kubetest/crds/eno-crds.yaml") {
		t.Error("deploy/crds/README.md does not point at internal/kubetest/crds/eno-crds.yaml")
	}
}

// TestStartErrorCarriesProcessOutput runs the real etcd with a kube-apiserver stand-in that
// fails at once: the error must include the stand-in's output.
func TestStartErrorCarriesProcessOutput(t *testing.T) {
	bins, err := locateBinaries()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(bins.etcd, filepath.Join(dir, "etcd")); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho 'stand-in: unknown flag --bogus' >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(dir, "kube-apiserver"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(binDirEnv, dir)

	_, err = Start(testContext(t), Options{})
	if err == nil {
		t.Fatal("Start with a failing kube-apiserver: got no error")
	}
	for _, want := range []string{"kube-apiserver", "exit status 3", "last 40 lines of kube-apiserver output", "stand-in: unknown flag --bogus", "last 40 lines of etcd output"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start error lacks %q:\n%v", want, err)
		}
	}
}

func TestOptionCRDs(t *testing.T) {
	embedded, err := parseOptionCRDs(nil)
	if err != nil || len(embedded) != 2 {
		t.Fatalf("no Options.CRDs: got %d CRDs, %v; want the 2 embedded ones", len(embedded), err)
	}
	crd := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n"
	got, err := parseOptionCRDs([]byte(crd + "---\n" + crd))
	if err != nil || len(got) != 2 || got[0].GetName() != "widgets.example.com" {
		t.Fatalf("Options.CRDs: got %v, %v; want its two documents", got, err)
	}
	if _, err := parseOptionCRDs([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")); err == nil {
		t.Fatal("Options.CRDs holding a ConfigMap: got no error")
	}
}

func TestParseRequest(t *testing.T) {
	tests := []struct {
		method, url string
		want        Request
	}{
		{"GET", "/api/v1/namespaces/kube-system/secrets?labelSelector=a%3Db", Request{Verb: "list", Namespace: "kube-system", Resource: "secrets"}},
		{"GET", "/api/v1/namespaces/kube-system/secrets/s", Request{Verb: "get", Namespace: "kube-system", Resource: "secrets", Name: "s"}},
		{"GET", "/api/v1/namespaces/ns/secrets?watch=true&sendInitialEvents=true", Request{Verb: "watch", Namespace: "ns", Resource: "secrets", StreamingList: true}},
		{"PATCH", "/apis/eno.azure.io/v1/namespaces/ns/compositions/web/status", Request{Verb: "patch", Group: "eno.azure.io", Namespace: "ns", Resource: "compositions", Name: "web", Subresource: "status"}},
		{"PUT", "/apis/rbac.authorization.k8s.io/v1/clusterroles/r", Request{Verb: "update", Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "r"}},
		{"POST", "/api/v1/namespaces", Request{Verb: "create", Resource: "namespaces"}},
		{"DELETE", "/api/v1/namespaces/ns/configmaps", Request{Verb: "deletecollection", Namespace: "ns", Resource: "configmaps"}},
		{"DELETE", "/api/v1/namespaces/ns/configmaps/c", Request{Verb: "delete", Namespace: "ns", Resource: "configmaps", Name: "c"}},
		{"GET", "/apis", Request{Verb: "get", NonResource: true}},
		{"GET", "/api/v1", Request{Verb: "get", NonResource: true}},
		{"GET", "/version", Request{Verb: "get", NonResource: true}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.url, func(t *testing.T) {
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if got := ParseRequest(tt.method, u); got != tt.want {
				t.Errorf("ParseRequest = %+v, want %+v", got, tt.want)
			}
		})
	}
	if got := ParseRequest("PATCH", &url.URL{Path: "/apis/eno.azure.io/v1/namespaces/ns/compositions/web/status"}).VerbResource(); got != "patch compositions/status" {
		t.Errorf("VerbResource = %q", got)
	}
}
