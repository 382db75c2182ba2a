package strategy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/testenv/sourcetree"
)

// TestNoStrategyNameOutsideTheRegistry keeps a new strategy one file:
// nothing outside this package may switch on a strategy's name or spell
// it, so that adding a strategy changes no other package. It walks
// every .go file of the repository outside internal/core/strategy and fails
// on
//
//   - a string literal that is exactly a registered strategy's name
//     ("canary"), in any file, tests included: a test chooses a
//     strategy through its constant here (strategy.Canary), so that a
//     renamed strategy is a compile error, not a silent miss;
//   - in code that is not a test, a use of this package's name
//     constants (strategy.Canary), which is the same switch spelled
//     differently; strategy.Default, the description's default, is
//     allowed.
//
// Comments and documentation may name strategies, and so may longer
// literals that mention one: help text, and the YAML descriptions of
// clusters that tests and examples parse ("strategy: {type: canary}"),
// which are what an operator writes, not code that decides.
func TestNoStrategyNameOutsideTheRegistry(t *testing.T) {
	registered := map[string]bool{}
	for _, n := range Names() {
		registered[n] = true
	}
	consts := nameConstants(t, registered)
	if len(consts) != len(registered) {
		t.Fatalf("name constants %v for strategies %v: each strategy's file should declare its name as a constant", consts, Names())
	}
	self := filepath.Join("internal", "core", "strategy")
	var found []string
	sourcetree.Walk(t, func(rel string) bool { return rel == self }, func(rel string, fset *token.FileSet, f *ast.File) {
		isTest := strings.HasSuffix(rel, "_test.go")
		local := importName(f)
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BasicLit:
				if x.Kind != token.STRING {
					return true
				}
				if v, err := strconv.Unquote(x.Value); err == nil && registered[v] {
					found = append(found, fset.Position(x.Pos()).String()+": the literal "+x.Value)
				}
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && !isTest && local != "" && id.Name == local && consts[x.Sel.Name] {
					found = append(found, fset.Position(x.Pos()).String()+": "+local+"."+x.Sel.Name)
				}
			}
			return true
		})
	})
	for _, f := range found {
		t.Errorf("%s names a strategy outside internal/core/strategy: ask the registry (Lookup) instead", f)
	}
}

// nameConstants are this package's exported constants whose value is a
// registered strategy's name (Default aside).
func nameConstants(t *testing.T, registered map[string]bool) map[string]bool {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, sp := range g.Specs {
					vs := sp.(*ast.ValueSpec)
					for i, id := range vs.Names {
						if i >= len(vs.Values) || !id.IsExported() || id.Name == "Default" {
							continue
						}
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
							if v, err := strconv.Unquote(lit.Value); err == nil && registered[v] {
								out[id.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return out
}

// importName is the name file f uses for this package, "" if it does
// not import it.
func importName(f *ast.File) string {
	const path = "github.com/ferry-upgrade/ferry/internal/core/strategy"
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == path {
			if im.Name != nil {
				return im.Name.Name
			}
			return "strategy"
		}
	}
	return ""
}
