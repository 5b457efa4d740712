package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// runToExit runs the binary to completion (bounded by exitWithin) and returns its exit code
// and output.
func runToExit(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), exitWithin)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Env = kubetest.ChildEnv()
	cmd.SysProcAttr = kubetest.ChildSysProcAttr()
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "tombstone-recovery %s did not exit within %s; stderr:\n%s", strings.Join(args, " "), exitWithin, errOut.String())
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errOut.String()
	}
	t.Fatalf("running tombstone-recovery: %v", err)
	return 0, "", ""
}

// requireOneLineFailure asserts a non-zero exit whose stderr is exactly one line holding want.
func requireOneLineFailure(t *testing.T, code int, stderr string, want string) {
	t.Helper()
	assert.NotZero(t, code, "exit code")
	require.True(t, strings.HasSuffix(stderr, "\n"), "stderr does not end in a newline: %q", stderr)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "stderr is not one line:\n%s", stderr)
	assert.True(t, strings.HasPrefix(stderr, "tombstone-recovery: "), "stderr: %q", stderr)
	assert.Contains(t, stderr, want)
}

// writeKubeconfig points a kubeconfig at server, for clusters that do not answer.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: not-a-real-token
contexts:
- name: c
  context:
    cluster: c
    user: u
current-context: c
`, server)
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	return path
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

func TestBadFlagsExitNonZeroWithOneLine(t *testing.T) {
	// Flags are checked before any cluster is contacted: this kubeconfig would hang or fail.
	unreachable := writeKubeconfig(t, "https://127.0.0.1:"+strconv.Itoa(closedPort(t)))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--workers=0"}, "--workers must be at least 1"},
		{[]string{"run", "--nope"}, "flag provided but not defined: -nope"},
		{[]string{"run", "--max-chunks=many"}, "invalid value"},
		{[]string{"run", "stray"}, "unexpected arguments"},
		{[]string{"run", "--log-format=xml"}, "--log-format must be json or console"},
		{[]string{"run", "--kubeconfig=" + unreachable, "--max-chunk-bytes=1"}, "--max-chunk-bytes"},
		{[]string{"run", "--kubeconfig=" + unreachable, "--max-chunk-bytes=1048577"}, "--max-chunk-bytes"},
		{[]string{"run", "--kubeconfig=" + unreachable, "--max-chunks=0"}, "--max-chunks"},
		{[]string{"run", "--kubeconfig=" + unreachable, "--max-tombstone-fraction=1.5"}, "--max-tombstone-fraction"},
		{[]string{"run", "--kubeconfig=" + unreachable, "--inventory-namespace="}, "--inventory-namespace"},
		{[]string{"run", "--kubeconfig=" + unreachable, "--composition-label-selector=a in (b"}, "--composition-label-selector"},
		{[]string{"run", "--kubeconfig=" + filepath.Join(t.TempDir(), "missing")}, "kubeconfig"},
		{[]string{"nope"}, "unknown command"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr := runToExit(t, tc.args...)
			requireOneLineFailure(t, code, stderr, tc.want)
		})
	}
}

func TestUnreachableClusterExitsNonZeroWithOneLine(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		kubeconfig := writeKubeconfig(t, "https://127.0.0.1:"+strconv.Itoa(closedPort(t)))
		code, _, stderr := runToExit(t, "run", "--kubeconfig="+kubeconfig, "--log-format=json")
		requireOneLineFailure(t, code, stderr, "the control plane is unreachable")
	})
	t.Run("downstream refused", func(t *testing.T) {
		t.Parallel()
		good, err := env.Kubeconfig("")
		require.NoError(t, err)
		remote := writeKubeconfig(t, "https://127.0.0.1:"+strconv.Itoa(closedPort(t)))
		code, _, stderr := runToExit(t, "run", "--kubeconfig="+good, "--remote-kubeconfig="+remote)
		requireOneLineFailure(t, code, stderr, "the downstream cluster is unreachable")
	})
	t.Run("no TLS handshake", func(t *testing.T) {
		t.Parallel()
		// A listener that never accepts: TCP connects, TLS never completes.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		kubeconfig := writeKubeconfig(t, "https://"+l.Addr().String())
		code, _, stderr := runToExit(t, "run", "--kubeconfig="+kubeconfig)
		requireOneLineFailure(t, code, stderr, "the control plane is unreachable")
	})
	t.Run("no answer", func(t *testing.T) {
		t.Parallel()
		// A server that takes the request and never answers: only the 15 s reachability
		// timeout ends the wait (client-go sets no overall request timeout).
		// Whatever reaches the client once it gave up is a failure too, never an empty 200.
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			http.Error(w, "no answer", http.StatusServiceUnavailable)
		}))
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.StartTLS()
		defer srv.Close()
		kubeconfig := writeKubeconfig(t, srv.URL)
		code, _, stderr := runToExit(t, "run", "--kubeconfig="+kubeconfig)
		requireOneLineFailure(t, code, stderr, "the control plane is unreachable")
	})
}

func TestBusyPortExitsNonZeroWithOneLine(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	kubeconfig, err := env.Kubeconfig("")
	require.NoError(t, err)
	code, _, stderr := runToExit(t, "run", "--kubeconfig="+kubeconfig, "--composition-namespace=busy-port",
		"--metrics-bind-address="+busy.Addr().String(), "--health-probe-bind-address=0")
	requireOneLineFailure(t, code, stderr, "listening for metrics on "+busy.Addr().String())
}

func TestRunHelpPrintsFlagsAndExitsZero(t *testing.T) {
	code, _, stderr := runToExit(t, "run", "-h")
	assert.Zero(t, code)
	assert.Contains(t, stderr, "usage: tombstone-recovery run [flags]")
	for _, flag := range []string{"-kubeconfig", "-remote-kubeconfig", "-max-chunk-bytes", "-max-tombstone-fraction", "-leader-elect", "-health-probe-bind-address"} {
		assert.Contains(t, stderr, flag)
	}
}
