package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

var (
	// env is the real etcd and kube-apiserver every test shares; each test uses its own
	// namespaces and Composition names.
	env *kubetest.Env
	// binary is tombstone-recovery built once for the package.
	binary string
)

// The ServiceAccount identity deploy/*-rbac.yaml binds, as a static token user.
const controllerUser = "system:serviceaccount:eno-system:eno-tombstone-recovery"

var controllerGroups = []string{"system:serviceaccounts", "system:serviceaccounts:eno-system"}

// unprivilegedUser has no RBAC at all: the binary can reach the API server but never syncs.
const unprivilegedUser = "e2e-unprivileged"

const (
	// eventually bounds every wait for the controller or a cache; generous for two busy cores.
	eventually = 60 * time.Second
	pollEvery  = 200 * time.Millisecond
	// exitWithin bounds how long a stopped or failing binary may take to exit.
	exitWithin = 60 * time.Second
	// showLogsEnv, when set, prints every binary's output, not only a failing test's.
	showLogsEnv = "E2E_SHOW_LOGS"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	// The build runs while the API server starts.
	build, err := startBuild(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: building tombstone-recovery: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	opts := kubetest.Options{Users: []kubetest.User{{Name: controllerUser, Groups: controllerGroups}, {Name: unprivilegedUser}}}
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

// startBuild starts `go build` of the binary into dir; the returned func waits for it.
func startBuild(dir string) (func() (string, error), error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "tombstone-recovery")
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/Azure/eno-tombstone-recovery/cmd/tombstone-recovery")
	logPath := filepath.Join(dir, "build.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(gobin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childSysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() (string, error) {
		if err := cmd.Wait(); err != nil {
			log, _ := os.ReadFile(logPath)
			return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, log)
		}
		return out, nil
	}, nil
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

type clients struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func clientsFor(t *testing.T, cfg *rest.Config) clients {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return clients{kube: kube, dyn: dyn}
}

func admin(t *testing.T) clients { return clientsFor(t, env.AdminConfig()) }

// newNamespace creates a namespace with a generated name; the server is discarded at the end.
func newNamespace(t *testing.T, c clients, prefix string) string {
	t.Helper()
	ns, err := c.kube.CoreV1().Namespaces().Create(testContext(t),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return ns.Name
}

// ensureNamespace creates a namespace with a fixed name (the SPEC example's team-a, eno-system).
func ensureNamespace(t *testing.T, c clients, name string) {
	t.Helper()
	_, err := c.kube.CoreV1().Namespaces().Create(testContext(t),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// waitFor polls check until it returns nil, failing the test with the last error after eventually.
func waitFor(t *testing.T, what string, check func(ctx context.Context) error) {
	t.Helper()
	ctx := testContext(t)
	deadline := time.Now().Add(eventually)
	for {
		err := check(ctx)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %v", what, eventually, err)
		}
		time.Sleep(pollEvery)
	}
}

// controller is one running `tombstone-recovery run` process.
type controller struct {
	cmd        *exec.Cmd
	stdoutPath string
	stderrPath string
	metricsURL string
	healthURL  string
	done       chan struct{}
	waitErr    error
}

// startController runs the binary as user ("" for the admin) with JSON logs and probes and
// metrics on free loopback ports, and waits for /readyz. The test's cleanup stops it if the
// test did not, and prints its output when the test failed.
func startController(t *testing.T, user string, args ...string) *controller {
	t.Helper()
	return launchController(t, user, "/readyz", args...)
}

// launchController starts the binary and waits until probe (a path of the health server)
// answers 200.
func launchController(t *testing.T, user, probe string, args ...string) *controller {
	t.Helper()
	kubeconfig, err := env.Kubeconfig(user)
	require.NoError(t, err)
	dir := t.TempDir()
	for attempt := 1; ; attempt++ {
		ports := freePorts(t, 2)
		c := &controller{
			stdoutPath: filepath.Join(dir, fmt.Sprintf("stdout-%d.log", attempt)),
			stderrPath: filepath.Join(dir, fmt.Sprintf("stderr-%d.log", attempt)),
			metricsURL: "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/metrics",
			healthURL:  "http://127.0.0.1:" + strconv.Itoa(ports[1]),
			done:       make(chan struct{}),
		}
		full := append([]string{"run",
			"--kubeconfig=" + kubeconfig,
			"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
			"--log-format=json",
		}, args...)
		c.start(t, full)
		t.Cleanup(func() { c.cleanup(t) })
		err := c.waitProbe(probe)
		if err == nil {
			return c
		}
		// Another process may take a chosen port between choosing and binding it.
		if c.exited() && strings.Contains(c.stderr(), "address already in use") && attempt < 3 {
			continue
		}
		t.Fatalf("tombstone-recovery run: %s: %v\n--- stderr ---\n%s", probe, err, c.stderr())
	}
}

func (c *controller) start(t *testing.T, args []string) {
	t.Helper()
	stdout, err := os.Create(c.stdoutPath)
	require.NoError(t, err)
	defer stdout.Close()
	stderr, err := os.Create(c.stderrPath)
	require.NoError(t, err)
	defer stderr.Close()
	c.cmd = exec.Command(binary, args...)
	c.cmd.Stdout, c.cmd.Stderr = stdout, stderr
	c.cmd.Env = childEnv()
	c.cmd.SysProcAttr = childSysProcAttr()
	require.NoError(t, c.cmd.Start())
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.done)
	}()
}

func (c *controller) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *controller) waitProbe(probe string) error {
	deadline := time.Now().Add(eventually)
	var last error
	for time.Now().Before(deadline) {
		if c.exited() {
			return fmt.Errorf("exited before answering: %v", c.waitErr)
		}
		status, _, err := httpGet(c.healthURL + probe)
		// The log line proves the answer came from this process, not from one that took the port.
		ours := strings.Contains(c.stderr(), `"server":"probes","address":"`+strings.TrimPrefix(c.healthURL, "http://")+`"`)
		if err == nil && status == http.StatusOK && ours {
			return nil
		}
		last = fmt.Errorf("status %d, %v", status, err)
		time.Sleep(pollEvery)
	}
	return fmt.Errorf("no 200 within %s: %v", eventually, last)
}

// stop sends sig (SIGTERM unless given) to the binary's PID and asserts that it drains and
// exits 0, with JSON logs only.
func (c *controller) stop(t *testing.T, sig ...os.Signal) {
	t.Helper()
	c.exitCleanly(t, sig...)
	require.Contains(t, c.stderr(), `"msg":"stopped after draining"`)
}

// exitCleanly sends sig (SIGTERM unless given) and asserts exit code 0 and JSON logs only.
func (c *controller) exitCleanly(t *testing.T, sig ...os.Signal) {
	t.Helper()
	s := os.Signal(syscall.SIGTERM)
	if len(sig) > 0 {
		s = sig[0]
	}
	require.NoError(t, c.cmd.Process.Signal(s))
	select {
	case <-c.done:
	case <-time.After(exitWithin):
		_ = c.cmd.Process.Kill()
		<-c.done
		t.Fatalf("tombstone-recovery did not exit within %s of %v", exitWithin, s)
	}
	require.NoError(t, c.waitErr, "tombstone-recovery must exit 0 on %v", s)
	requireJSONLines(t, c.stderr())
}

// cleanup stops a binary the test left running (without asserting), and shows its output on failure.
func (c *controller) cleanup(t *testing.T) {
	if !c.exited() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(exitWithin):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	if t.Failed() || os.Getenv(showLogsEnv) != "" {
		t.Logf("--- tombstone-recovery (pid %d) exit: %v ---\nstdout:\n%s\nstderr:\n%s",
			c.cmd.Process.Pid, c.waitErr, readFile(c.stdoutPath), c.stderr())
	}
}

func (c *controller) stderr() string { return readFile(c.stderrPath) }

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return string(b)
}

// requireJSONLines asserts every line of a --log-format=json log is a JSON object in which
// each key appears once.
func requireJSONLines(t *testing.T, logs string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		require.NoError(t, uniqueKeysObject(line), "log line: %s", line)
	}
	require.NoError(t, sc.Err())
}

// uniqueKeysObject reports whether line is one JSON object without repeated top-level keys;
// encoding/json alone would silently keep the last of them.
func uniqueKeysObject(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("not a JSON object (%v)", err)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("key %q appears more than once", key)
		}
		seen[key] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the object")
	}
	return nil
}

// childEnv drops proxy settings so loopback traffic never goes through a proxy, and any
// kubeconfig or namespace hints so only the flags count.
func childEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		key, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(key) {
		case "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "KUBECONFIG", "POD_NAMESPACE":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// httpGet fetches url without keep-alives, so no connection outlives the call (goleak).
func httpGet(url string) (int, string, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
