package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

var (
	// env is the real etcd and kube-apiserver every test shares; each test uses its own
	// namespaces and Composition names.
	env *kubetest.Env
	// binary is tombstone-recovery built once for the package.
	binary string
)

// The ServiceAccount identity deploy/release*.yaml binds, as a static token user.
const controllerUser = "system:serviceaccount:eno-system:eno-tombstone-recovery"

var controllerGroups = []string{"system:serviceaccounts", "system:serviceaccounts:eno-system"}

// unprivilegedUser has no RBAC at all: the binary can reach the API server but never syncs.
const unprivilegedUser = "e2e-unprivileged"

// narrowedUser is bound to deploy/'s RBAC without the downstream get on tombstoned kinds.
const narrowedUser = "e2e-narrowed"

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

// ensureNamespace creates a namespace with a fixed name (the SPEC example's team-a, eno-system).
func ensureNamespace(t *testing.T, c kubetest.Clients, name string) {
	t.Helper()
	_, err := c.Kube.CoreV1().Namespaces().Create(testContext(t),
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
		ports, err := kubetest.FreePorts(2)
		require.NoError(t, err)
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
		err = c.waitProbe(probe)
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
	c.cmd.Env = kubetest.ChildEnv()
	c.cmd.SysProcAttr = kubetest.ChildSysProcAttr()
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
