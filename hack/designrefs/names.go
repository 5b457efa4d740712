package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// citingDocs are the documents whose backquoted code names must exist in the code: a name the
// code no longer has makes the map false.
var citingDocs = []string{"ARCHITECTURE.md"}

// goNames is what the repository's non-test Go files declare.
type goNames struct {
	pkgs    map[string]map[string]bool // package name → its top-level names
	members map[string]map[string]bool // type name → its methods, fields and interface methods
	any     map[string]bool            // every declared name
	imports map[string]bool            // local names of the packages imported from elsewhere
}

func declaredNames(files map[string]string) goNames {
	n := goNames{pkgs: map[string]map[string]bool{}, members: map[string]map[string]bool{}, any: map[string]bool{}, imports: map[string]bool{}}
	member := func(typ, name string) {
		if n.members[typ] == nil {
			n.members[typ] = map[string]bool{}
		}
		n.members[typ][name], n.any[name] = true, true
	}
	fset := token.NewFileSet()
	for name, content := range files {
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, content, 0)
		if err != nil {
			continue // go vet reports it
		}
		top := n.pkgs[f.Name.Name]
		if top == nil {
			top = map[string]bool{}
			n.pkgs[f.Name.Name] = top
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			local := path.Base(p)
			if imp.Name != nil {
				local = imp.Name.Name
			}
			if !strings.HasPrefix(p, "github.com/Azure/eno-tombstone-recovery/") {
				n.imports[local] = true
			}
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					top[d.Name.Name], n.any[d.Name.Name] = true, true
					continue
				}
				t := d.Recv.List[0].Type
				for {
					if s, ok := t.(*ast.StarExpr); ok {
						t = s.X
					} else if i, ok := t.(*ast.IndexExpr); ok {
						t = i.X
					} else {
						break
					}
				}
				if id, ok := t.(*ast.Ident); ok {
					member(id.Name, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						top[s.Name.Name], n.any[s.Name.Name] = true, true
						var fields *ast.FieldList
						switch t := s.Type.(type) {
						case *ast.StructType:
							fields = t.Fields
						case *ast.InterfaceType:
							fields = t.Methods
						}
						for _, f := range fieldList(fields) {
							for _, id := range f.Names {
								member(s.Name.Name, id.Name)
							}
						}
					case *ast.ValueSpec:
						for _, id := range s.Names {
							top[id.Name], n.any[id.Name] = true, true
						}
					}
				}
			}
		}
	}
	return n
}

func fieldList(l *ast.FieldList) []*ast.Field {
	if l == nil {
		return nil
	}
	return l.List
}

// codeName is a backquoted Go name: "name", "pkg.Name", "Type.method", "x.Type.method", with
// arguments or not.
var codeName = regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)*)(?:\\([^`]*\\))?`")

// checkCitedNames reports each backquoted name in citingDocs that the code does not declare. A
// lower-case word alone is a package or a command, not checked; a capitalised one may also be a
// string the code writes (an outcome, an event's reason); a name qualified by a package imported from elsewhere is
// that package's. A qualifier that is our package or type must hold the name; any other (a
// variable, `s.recover`) needs a method or field of that name somewhere.
func checkCitedNames(files map[string]string, have map[string]bool) []problem {
	n := declaredNames(files)
	var code strings.Builder // the non-test Go, for the string literals
	for name, content := range files {
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			code.WriteString(content)
		}
	}
	var out []problem
	for _, doc := range citingDocs {
		content, ok := files[doc]
		if !ok {
			continue
		}
		for _, m := range codeName.FindAllStringSubmatchIndex(content, -1) {
			name := content[m[2]:m[3]]
			parts := strings.Split(name, ".")
			last := parts[len(parts)-1]
			var ok bool
			switch {
			case len(parts) == 1 && strings.ToLower(name) == name, strings.Contains(".go.sh.md.yaml.", "."+last+"."):
				ok = true // a package, a command or a file (below)
			case len(parts) == 1:
				ok = n.any[name] || strings.Contains(code.String(), strconv.Quote(name))
			case n.imports[parts[0]] && n.pkgs[parts[0]] == nil:
				ok = true
			case n.members[parts[len(parts)-2]] != nil:
				ok = n.members[parts[len(parts)-2]][last]
			case len(parts) == 2 && n.pkgs[parts[0]] != nil:
				ok = n.pkgs[parts[0]][last]
			default:
				for _, ms := range n.members {
					ok = ok || ms[last]
				}
			}
			if !ok {
				out = append(out, problem{doc, lineOf(content, m[0]), fmt.Sprintf("cites `%s`, which the code does not declare", name)})
			}
		}
		for _, m := range regexp.MustCompile("`([a-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+|[a-z0-9_-]+\\.(?:go|sh|yaml))`").FindAllStringSubmatchIndex(content, -1) {
			p := content[m[2]:m[3]]
			found := have[p]
			for f := range files {
				found = found || (!strings.Contains(p, "/") && path.Base(f) == p)
			}
			if !found {
				out = append(out, problem{doc, lineOf(content, m[0]), fmt.Sprintf("cites `%s`, which is no tracked file or directory", p)})
			}
		}
	}
	return out
}
