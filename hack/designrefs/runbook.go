package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"sort"
	"strconv"
	"strings"
)

// The runbook: README.md's section runbookHeading names, in backquotes, every outcome and reason
// the domain declares, so that an operator who meets one finds what it means and what to run
// next. A reason is a value of one of reasonTypes written as a composite literal
// (`DropReason{"NotFound"}`), or a string constant whose name starts with "Reason", in a
// non-test file of the domain package.
const (
	runbookFile    = "README.md"
	runbookHeading = "When recovery does not clean up"
	domainDir      = "domain"
)

var reasonTypes = map[string]bool{"Outcome": true, "InvalidReason": true, "DropReason": true}

// declaredReasons returns each reason the domain's files declare, with where it is declared.
// A file that does not parse declares nothing here; go vet reports it.
func declaredReasons(files map[string]string) map[string]string {
	out := map[string]string{}
	fset := token.NewFileSet()
	for name, content := range files {
		if path.Dir(name) != domainDir || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, content, 0)
		if err != nil {
			continue
		}
		add := func(lit ast.Expr) {
			b, ok := lit.(*ast.BasicLit)
			if !ok || b.Kind != token.STRING {
				return
			}
			if v, err := strconv.Unquote(b.Value); err == nil && v != "" {
				if _, seen := out[v]; !seen {
					out[v] = fmt.Sprintf("%s:%d", name, fset.Position(b.Pos()).Line)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if id, ok := n.Type.(*ast.Ident); ok && reasonTypes[id.Name] && len(n.Elts) == 1 {
					add(n.Elts[0])
				}
			case *ast.GenDecl:
				if n.Tok != token.CONST {
					return true
				}
				for _, spec := range n.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, id := range vs.Names {
						if strings.HasPrefix(id.Name, "Reason") && i < len(vs.Values) {
							add(vs.Values[i])
						}
					}
				}
			}
			return true
		})
	}
	return out
}

// checkRunbook reports each declared reason the runbook section does not name.
func checkRunbook(files map[string]string) []problem {
	readme, ok := files[runbookFile]
	if !ok {
		return nil
	}
	reasons := declaredReasons(files)
	if len(reasons) == 0 {
		return nil
	}
	var problems []problem
	start := strings.Index(readme, "\n## "+runbookHeading+"\n")
	if start < 0 {
		return append(problems, problem{runbookFile, 0, fmt.Sprintf("has no section %q, the runbook of every outcome and reason", "## "+runbookHeading)})
	}
	body := readme[start+1:]
	if end := strings.Index(body[3:], "\n## "); end >= 0 {
		body = body[:end+3]
	}
	var missing []string
	for r := range reasons {
		if !strings.Contains(body, "`"+r+"`") {
			missing = append(missing, r)
		}
	}
	sort.Strings(missing)
	for _, r := range missing {
		problems = append(problems, problem{runbookFile, lineOf(readme, start+1), fmt.Sprintf(
			"the runbook %q does not name `%s` (declared at %s): say what it means and what to run next", runbookHeading, r, reasons[r])})
	}
	return problems
}
