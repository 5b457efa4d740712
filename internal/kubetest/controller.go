package kubetest

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
)

const (
	// Eventually bounds every wait for the controller or a cache; generous for two busy cores.
	Eventually = 60 * time.Second
	// PollEvery is how often WaitFor checks.
	PollEvery = 200 * time.Millisecond
	// ExitWithin bounds how long a stopped or failing binary may take to exit.
	ExitWithin = 60 * time.Second
	// showLogsEnv, when set, prints every binary's output, not only a failing test's.
	showLogsEnv = "E2E_SHOW_LOGS"
)

// WaitFor polls check until it returns nil, failing the test with the last error after Eventually.
func WaitFor(t testing.TB, what string, check func(ctx context.Context) error) {
	t.Helper()
	ctx := Context(t, 3*time.Minute)
	deadline := time.Now().Add(Eventually)
	for {
		err := check(ctx)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %v", what, Eventually, err)
		}
		time.Sleep(PollEvery)
	}
}

// Controller is one running `tombstone-recovery run` process.
type Controller struct {
	cmd        *exec.Cmd
	stdoutPath string
	stderrPath string
	// MetricsURL is its /metrics; HealthURL the base of /healthz and /readyz.
	MetricsURL string
	HealthURL  string
	done       chan struct{}
	waitErr    error
}

// StartController runs binary's `run` as user ("" for the admin) with JSON logs and probes and
// metrics on free loopback ports, and waits for /readyz. The test's cleanup stops it if the
// test did not, and prints its output when the test failed.
func (e *Env) StartController(t testing.TB, binary, user string, args ...string) *Controller {
	t.Helper()
	return e.LaunchController(t, binary, user, "/readyz", args...)
}

// LaunchController starts the binary and waits until probe (a path of the health server)
// answers 200.
func (e *Env) LaunchController(t testing.TB, binary, user, probe string, args ...string) *Controller {
	t.Helper()
	kubeconfig, err := e.Kubeconfig(user)
	require.NoError(t, err)
	dir := t.TempDir()
	for attempt := 1; ; attempt++ {
		ports, err := FreePorts(2)
		require.NoError(t, err)
		c := &Controller{
			stdoutPath: filepath.Join(dir, fmt.Sprintf("stdout-%d.log", attempt)),
			stderrPath: filepath.Join(dir, fmt.Sprintf("stderr-%d.log", attempt)),
			MetricsURL: "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/metrics",
			HealthURL:  "http://127.0.0.1:" + strconv.Itoa(ports[1]),
			done:       make(chan struct{}),
		}
		full := append([]string{"run",
			"--kubeconfig=" + kubeconfig,
			"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
			"--log-format=json",
		}, args...)
		c.start(t, binary, full)
		t.Cleanup(func() { c.cleanup(t) })
		err = c.waitProbe(probe)
		if err == nil {
			return c
		}
		// Another process may take a chosen port between choosing and binding it.
		if c.Exited() && strings.Contains(c.Stderr(), "address already in use") && attempt < 3 {
			continue
		}
		t.Fatalf("tombstone-recovery run: %s: %v\n--- stderr ---\n%s", probe, err, c.Stderr())
	}
}

func (c *Controller) start(t testing.TB, binary string, args []string) {
	t.Helper()
	stdout, err := os.Create(c.stdoutPath)
	require.NoError(t, err)
	defer stdout.Close()
	stderr, err := os.Create(c.stderrPath)
	require.NoError(t, err)
	defer stderr.Close()
	c.cmd = exec.Command(binary, args...)
	c.cmd.Stdout, c.cmd.Stderr = stdout, stderr
	c.cmd.Env = ChildEnv()
	c.cmd.SysProcAttr = ChildSysProcAttr()
	require.NoError(t, c.cmd.Start())
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.done)
	}()
}

// Exited reports whether the process has exited.
func (c *Controller) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *Controller) waitProbe(probe string) error {
	deadline := time.Now().Add(Eventually)
	var last error
	for time.Now().Before(deadline) {
		if c.Exited() {
			return fmt.Errorf("exited before answering: %v", c.waitErr)
		}
		status, _, err := HTTPGet(c.HealthURL + probe)
		// The log line proves the answer came from this process, not from one that took the port:
		// controller-runtime's manager logs it once it serves the probes.
		ours := strings.Contains(c.Stderr(), `"name":"health probe","addr":"`+strings.TrimPrefix(c.HealthURL, "http://")+`"`)
		if err == nil && status == http.StatusOK && ours {
			return nil
		}
		last = fmt.Errorf("status %d, %v", status, err)
		time.Sleep(PollEvery)
	}
	return fmt.Errorf("no 200 within %s: %v", Eventually, last)
}

// Stop sends sig (SIGTERM unless given) to the binary's PID and asserts that it drains and
// exits 0, with JSON logs only.
func (c *Controller) Stop(t testing.TB, sig ...os.Signal) {
	t.Helper()
	c.ExitCleanly(t, sig...)
	require.Contains(t, c.Stderr(), `"msg":"stopped after draining"`)
}

// ExitCleanly sends sig (SIGTERM unless given) and asserts exit code 0 and JSON logs only.
func (c *Controller) ExitCleanly(t testing.TB, sig ...os.Signal) {
	t.Helper()
	s := os.Signal(syscall.SIGTERM)
	if len(sig) > 0 {
		s = sig[0]
	}
	require.NoError(t, c.cmd.Process.Signal(s))
	select {
	case <-c.done:
	case <-time.After(ExitWithin):
		_ = c.cmd.Process.Kill()
		<-c.done
		t.Fatalf("tombstone-recovery did not exit within %s of %v", ExitWithin, s)
	}
	require.NoError(t, c.waitErr, "tombstone-recovery must exit 0 on %v", s)
	RequireJSONLines(t, c.Stderr())
}

// cleanup stops a binary the test left running (without asserting), and shows its output on failure.
func (c *Controller) cleanup(t testing.TB) {
	if !c.Exited() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(ExitWithin):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	if t.Failed() || os.Getenv(showLogsEnv) != "" {
		t.Logf("--- tombstone-recovery (pid %d) exit: %v ---\nstdout:\n%s\nstderr:\n%s",
			c.cmd.Process.Pid, c.waitErr, readLog(c.stdoutPath), c.Stderr())
	}
}

// Stderr is the process's standard error so far: its logs.
func (c *Controller) Stderr() string { return readLog(c.stderrPath) }

func readLog(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return string(b)
}

// RequireJSONLines asserts every line of a --log-format=json log is a JSON object in which
// each key appears once.
func RequireJSONLines(t testing.TB, logs string) {
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

// HTTPGet fetches url without keep-alives, so no connection outlives the call (goleak).
func HTTPGet(url string) (int, string, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
