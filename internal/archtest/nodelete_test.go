package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deletePaths are the names through which anything of this project could delete an object, and
// the only files that may use them: the prune command an operator runs, its use case and its
// adapter (design §7). The controller's wiring (runnable, cmd run, the reconcile use cases)
// names none of them, so no controller code path deletes an inventory Secret, whatever its RBAC.
var deletePaths = map[string][]string{
	// client-go's delete calls.
	"Delete":           {"adapters/k8s/prune.go"},
	"DeleteCollection": {},
	// The port, its adapter and the use case that holds it.
	"DeleteChunk":        {"app/prune_confirm.go", "ports/prune.go", "adapters/k8s/prune.go"},
	"InventoryPruner":    {"ports/prune.go", "adapters/k8s/prune.go", "app/prune.go", "cmd/tombstone-recovery/prune.go"},
	"NewInventoryPruner": {"adapters/k8s/prune.go", "cmd/tombstone-recovery/prune.go"},
	"NewPruner":          {"app/prune.go", "cmd/tombstone-recovery/prune.go"},
}

// TestNoControllerCodePathDeletes checks every non-test file of the product: test harnesses
// (test/, hack/), generated fakes and the in-memory models of Eno and of the API server the demo
// runs on (adapters/memory/enomodel, adapters/memory/apiserver) delete freely.
func TestNoControllerCodePathDeletes(t *testing.T) {
	root := repoRoot(t)
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || slices.Contains([]string{"testdata", "bin", "test", "hack", "tools", "portsfakes"}, d.Name()) ||
				rel == "adapters/memory/enomodel" || rel == "adapters/memory/apiserver") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			var name string
			switch n := n.(type) {
			case *ast.SelectorExpr:
				name = n.Sel.Name
			case *ast.Ident:
				name = n.Name
			case *ast.Field:
				for _, id := range n.Names {
					name = id.Name
				}
			}
			if allowed, ok := deletePaths[name]; ok {
				seen[name] = true
				assert.Contains(t, allowed, rel, "%s names %s: only the prune command may delete (design §7)", rel, name)
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	assert.True(t, seen["Delete"] && seen["DeleteChunk"] && seen["NewInventoryPruner"], "the scan found prune's own delete path: it reads the right files")
}
