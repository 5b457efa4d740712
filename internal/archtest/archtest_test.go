package archtest

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const module = "github.com/Azure/eno-tombstone-recovery"

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"))
	return root
}

// imports maps each package directory (relative to the root) to the imports of its non-test files.
func imports(t *testing.T, root string) map[string][]string {
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		require.NoError(t, err)
		dir := filepath.ToSlash(filepath.Dir(rel))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			out[dir] = append(out[dir], p)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

func isStd(p string) bool { return !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") }

func internal(p string) (string, bool) {
	if p == module {
		return ".", true
	}
	return strings.TrimPrefix(p, module+"/"), strings.HasPrefix(p, module+"/")
}

func layer(dir string) string {
	switch {
	case dir == "domain" || strings.HasPrefix(dir, "domain/"):
		return "domain"
	case dir == "ports" || strings.HasPrefix(dir, "ports/"):
		return "ports"
	case dir == "app" || strings.HasPrefix(dir, "app/"):
		return "app"
	case strings.HasPrefix(dir, "adapters/"):
		return "adapters"
	case dir == "runnable" || strings.HasPrefix(dir, "runnable/"):
		return "runnable"
	case strings.HasPrefix(dir, "cmd/"):
		return "cmd"
	case strings.HasPrefix(dir, "internal/"):
		return "internal"
	}
	return "other"
}

// allowed lists which project layers each layer may import. runnable wires the controller for
// the binary and for eno-reconciler, so it sits beside cmd: only cmd imports it. internal holds
// libraries of no layer (Eno's CEL environment, the build's identity), which import no project
// package.
var allowed = map[string][]string{
	"domain":   {"domain"},
	"ports":    {"domain", "ports"},
	"app":      {"domain", "ports", "app"},
	"adapters": {"domain", "ports", "adapters", "internal"},
	"runnable": {"domain", "ports", "app", "adapters", "runnable", "internal"},
	"cmd":      {"domain", "ports", "app", "adapters", "runnable", "cmd", "other", "internal"},
	"other":    {"domain", "ports", "app", "adapters", "other", "internal"},
	"internal": {"domain", "internal"},
}

func TestDependencyDirection(t *testing.T) {
	root := repoRoot(t)
	for dir, imps := range imports(t, root) {
		from := layer(dir)
		for _, imp := range imps {
			if from == "domain" {
				assert.True(t, isStd(imp), "domain (%s) imports %s: only the standard library is allowed", dir, imp)
				continue
			}
			if from == "ports" {
				rel, ok := internal(imp)
				assert.True(t, isStd(imp) || (ok && (layer(rel) == "domain" || (dir != "ports" && layer(rel) == "ports"))), "ports (%s) imports %s", dir, imp)
				continue
			}
			if from == "app" && !isStd(imp) {
				rel, ok := internal(imp)
				assert.True(t, imp == "github.com/go-logr/logr" || (ok && (layer(rel) == "domain" || layer(rel) == "ports" || layer(rel) == "app")),
					"app (%s) imports %s: app sees domain, ports and logr only", dir, imp)
				continue
			}
			// controller-runtime is the outermost adapter (design §8.2): only the wiring and the
			// binary use it; the adapters implement the ports with client-go alone.
			if strings.HasPrefix(imp, "sigs.k8s.io/controller-runtime") {
				assert.Contains(t, []string{"runnable", "cmd"}, from, "%s (%s) imports %s: only runnable and cmd may", from, dir, imp)
			}
			rel, ok := internal(imp)
			if !ok {
				continue
			}
			to := layer(rel)
			assert.Contains(t, allowed[from], to, "%s (%s) must not import %s", from, dir, imp)
			if from == "adapters" && to == "adapters" {
				// Adapters are independent of each other; only the shared contract suite is common.
				assert.True(t, strings.HasPrefix(rel, strings.SplitN(dir, "/", 3)[0]+"/"+strings.SplitN(dir, "/", 3)[1]) || rel == "adapters/contract",
					"adapter %s imports another adapter %s", dir, rel)
			}
		}
	}
}

// enoCeiling is what eno-reconciler's latest release line requires (design §8.1).
var enoCeiling = map[string]string{
	"k8s.io/api":                          "v0.35.1",
	"k8s.io/apimachinery":                 "v0.35.1",
	"k8s.io/client-go":                    "v0.35.1",
	"github.com/go-logr/logr":             "v1.4.3",
	"github.com/prometheus/client_golang": "v1.23.2",
	"go.uber.org/zap":                     "v1.27.0",
	"github.com/go-logr/zapr":             "v1.3.0",
	"sigs.k8s.io/controller-runtime":      "v0.22.0",
}

func TestModuleStaysEmbeddableInEnoReconciler(t *testing.T) {
	f, err := os.Open(filepath.Join(repoRoot(t), "go.mod"))
	require.NoError(t, err)
	defer f.Close()
	var goLine string
	required := map[string]string{}
	inRequire := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 0:
		case fields[0] == "go" && len(fields) == 2:
			goLine = fields[1]
		case fields[0] == "toolchain":
			t.Errorf("go.mod must not carry a toolchain line: eno-reconciler would inherit it")
		case fields[0] == "require" && len(fields) == 2 && fields[1] == "(":
			inRequire = true
		case fields[0] == ")":
			inRequire = false
		case fields[0] == "require" && len(fields) >= 3:
			required[fields[1]] = fields[2]
		case inRequire && len(fields) >= 2:
			required[fields[0]] = fields[1]
		}
	}
	require.NoError(t, sc.Err())
	assert.Equal(t, "1.25.0", goLine, "go.mod's go directive must stay at eno-reconciler's go 1.25.0")
	for mod, ceiling := range enoCeiling {
		if v, ok := required[mod]; ok {
			assert.LessOrEqual(t, compareSemver(v, ceiling), 0, "%s %s is newer than eno-reconciler's %s", mod, v, ceiling)
		}
	}
	assert.NotContains(t, required, "github.com/maxbrunsfeld/counterfeiter/v6", "counterfeiter belongs in tools/go.mod")
	assert.NotContains(t, required, "k8s.io/kubernetes", "the test API server belongs in test/kube/go.mod")
}

// compareSemver compares vMAJOR.MINOR.PATCH prefixes numerically.
func compareSemver(a, b string) int {
	pa, pb := semverParts(a), semverParts(b)
	for i := range 3 {
		if pa[i] != pb[i] {
			if pa[i] < pb[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

func semverParts(v string) [3]int {
	var out [3]int
	v = strings.TrimPrefix(v, "v")
	v = strings.SplitN(strings.SplitN(v, "-", 2)[0], "+", 2)[0]
	for i, p := range strings.SplitN(v, ".", 3) {
		out[i], _ = strconv.Atoi(p)
	}
	return out
}

func TestCompareSemver(t *testing.T) {
	assert.Equal(t, -1, compareSemver("v0.35.0", "v0.35.1"))
	assert.Equal(t, 1, compareSemver("v0.36.0", "v0.35.1"))
	assert.Equal(t, 0, compareSemver("v1.4.3", "v1.4.3"))
	assert.Equal(t, 1, compareSemver("v1.10.0", "v1.9.9"))
}
