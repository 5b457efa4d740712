//go:build eno

package eno

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// enoSrcDirEnv is an unpacked stock Eno source tree for hack/eno-wire.sh; without it the tests
// use the source hack/eno-build.sh unpacked under $ENO_DIR/src.
const enoSrcDirEnv = "ENO_SRC_DIR"

const trModule = "github.com/Azure/eno-tombstone-recovery"

// wireScript is hack/eno-wire.sh of this checkout.
func wireScript(t *testing.T) string {
	t.Helper()
	root, err := kubetest.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(root, "hack", "eno-wire.sh")
}

// enoSource is the unpacked Eno source the wiring tests start from.
func enoSource(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(enoSrcDirEnv)
	if dir == "" && os.Getenv(enoDirEnv) != "" {
		dir = filepath.Join(os.Getenv(enoDirEnv), "src")
	}
	if dir == "" {
		t.Fatalf("set %s to an unpacked stock Eno source tree (or run `make test-eno ENO_SRC=...`, which sets %s)", enoSrcDirEnv, enoDirEnv)
	}
	require.FileExists(t, filepath.Join(dir, "cmd", "eno-reconciler", "main.go"), "%s must be an unpacked Eno source tree", dir)
	return dir
}

// runWire runs hack/eno-wire.sh with args and returns its combined output and exit error.
func runWire(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(wireScript(t), args...)
	cmd.Env = kubetest.ChildEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// buildInfoModules reads the dependency modules a Go binary was built with (`go version -m`):
// path → version, with " => replacement" when replaced.
func buildInfoModules(t *testing.T, binary string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", binary).Output()
	require.NoError(t, err, "go version -m %s", binary)
	mods := map[string]string{}
	var last string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[0] == "dep":
			last = f[1]
			mods[last] = f[2]
		case len(f) >= 3 && f[0] == "=>" && last != "":
			mods[last] += " => " + f[1] + " " + f[2]
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, mods, "no build info in %s", binary)
	return mods
}

// TestWireIntoStockEnoReconciler runs hack/eno-wire.sh on stock Eno: it must patch main.go,
// resolve this checkout with Eno's own go.mod without moving any module Eno required, and
// build. The binary it builds is then compared with stock eno-reconciler's (hack/eno-build.sh):
// every module linked into stock eno-reconciler is linked into the wired one at the same version.
func TestWireIntoStockEnoReconciler(t *testing.T) {
	src := enoSource(t)
	out := filepath.Join(t.TempDir(), "eno-reconciler-wired")
	log, err := runWire(t, src, out)
	require.NoError(t, err, "hack/eno-wire.sh failed:\n%s", log)
	assert.Contains(t, log, "modules eno-reconciler required are at the same version")
	t.Logf("hack/eno-wire.sh:\n%s", tailLines(log, 12))

	wired := buildInfoModules(t, out)
	assert.Contains(t, wired, trModule, "the wired binary links the recovery controller")
	if bins.reconciler != "" {
		stock := buildInfoModules(t, bins.reconciler)
		for mod, v := range stock {
			assert.Equal(t, v, wired[mod], "module %s in the wired eno-reconciler", mod)
		}
		var added []string
		for mod := range wired {
			if _, ok := stock[mod]; !ok {
				added = append(added, mod)
			}
		}
		t.Logf("stock eno-reconciler links %d modules; the wired one adds %v", len(stock), added)
	}
}

// TestWireComparisonRefusesAMovedRequirement feeds the script's comparison two `go list -m all`
// outputs: it passes when modules are only added, and fails, naming each, when one Eno
// required is at another version or gone.
func TestWireComparisonRefusesAMovedRequirement(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	before := write("before", `github.com/Azure/eno
github.com/go-logr/logr v1.4.3
k8s.io/client-go v0.35.1
sigs.k8s.io/yaml v1.6.0
`)

	log, err := runWire(t, "--compare", before, write("added", `github.com/Azure/eno
github.com/Azure/eno-tombstone-recovery v0.0.0 => /src/eno-tombstone-recovery
github.com/go-logr/logr v1.4.3
k8s.io/client-go v0.35.1
sigs.k8s.io/yaml v1.6.0
`))
	require.NoError(t, err, log)
	assert.Contains(t, log, "all 3 modules eno-reconciler required are at the same version; 1 added")

	log, err = runWire(t, "--compare", before, write("moved", `github.com/Azure/eno
github.com/Azure/eno-tombstone-recovery v0.0.0 => /src/eno-tombstone-recovery
github.com/go-logr/logr v1.4.3
k8s.io/client-go v0.36.0
`))
	require.Error(t, err, log)
	assert.Contains(t, log, "k8s.io/client-go v0.35.1 -> v0.36.0")
	assert.Contains(t, log, "sigs.k8s.io/yaml v1.6.0 -> (gone)")
	assert.Contains(t, log, "changes 2 of the 3 modules")
	assert.NotContains(t, log, "go-logr/logr v1.4.3 ->")

	log, err = runWire(t, "--compare", before, write("replaced", `github.com/Azure/eno
github.com/go-logr/logr v1.4.3 => github.com/go-logr/logr v1.4.2
k8s.io/client-go v0.35.1
sigs.k8s.io/yaml v1.6.0
`))
	require.Error(t, err, log)
	assert.Contains(t, log, "github.com/go-logr/logr v1.4.3 -> v1.4.3 => github.com/go-logr/logr v1.4.2", "a new replacement is a change too")
}

// TestWirePatch checks the patch step alone on Eno's main.go: the call lands after
// reconciliation.New's error check and before mgr.Start; a main.go whose anchors differ (another
// Eno version) is refused and left as it was, and so is one already wired.
func TestWirePatch(t *testing.T) {
	stock, err := os.ReadFile(filepath.Join(enoSource(t), "cmd", "eno-reconciler", "main.go"))
	require.NoError(t, err)
	dir := t.TempDir()
	main := filepath.Join(dir, "main.go")
	require.NoError(t, os.WriteFile(main, stock, 0o600))

	log, err := runWire(t, "--patch", main)
	require.NoError(t, err, log)
	patched, err := os.ReadFile(main)
	require.NoError(t, err)
	text := string(patched)
	rec := strings.Index(text, "err = reconciliation.New(mgr, recOpts)")
	add := strings.Index(text, "tombstoneRecovery := tombstonerecovery.DefaultOptions()")
	start := strings.Index(text, "return mgr.Start(ctx)")
	require.True(t, rec >= 0 && add >= 0 && start >= 0, "anchors and call in:\n%s", text)
	assert.Less(t, rec, add)
	assert.Less(t, add, start)
	assert.NotContains(t, text[rec:add], "logger.Info(", "inserted right after the error check")
	assert.Contains(t, text, `tombstonerecovery "`+trModule+`/runnable"`)
	for _, arg := range []string{"SetupWithManager(mgr, remoteConfig, tombstoneRecovery)", "Scope.Namespace = compositionNamespace",
		"CompositionSelector = mgrOpts.CompositionSelector", "Enabled = true", "ResourceFilters = []string{resourceFilter}",
		"HostElects = mgrOpts.LeaderElection", "Impersonate = tombstonerecovery.ReleaseServiceAccount"} {
		assert.Contains(t, text[add:start], arg)
	}

	log, err = runWire(t, "--patch", main)
	require.Error(t, err, "patching twice")
	assert.Contains(t, log, "already wired")

	for name, edit := range map[string]func(string) string{
		"no mgr.Start": func(s string) string {
			return strings.Replace(s, "return mgr.Start(ctx)", "return mgr.Start(context.Background())", 1)
		},
		"no reconciliation.New": func(s string) string {
			return strings.Replace(s, "err = reconciliation.New(mgr, recOpts)", "err = reconciliation.NewController(mgr, recOpts)", 1)
		},
		"no error check": func(s string) string {
			return strings.Replace(s, "err = reconciliation.New(mgr, recOpts)\n\tif err != nil {", "err = reconciliation.New(mgr, recOpts)\n\tif err == nil {", 1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			changed := edit(string(stock))
			require.NotEqual(t, string(stock), changed, "the edit applies")
			path := filepath.Join(t.TempDir(), "main.go")
			require.NoError(t, os.WriteFile(path, []byte(changed), 0o600))
			log, err := runWire(t, "--patch", path)
			require.Error(t, err, log)
			assert.Contains(t, log, "nothing was changed")
			after, readErr := os.ReadFile(path)
			require.NoError(t, readErr)
			assert.Equal(t, changed, string(after))
		})
	}
}
