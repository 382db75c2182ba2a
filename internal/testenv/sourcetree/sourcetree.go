// Package sourcetree walks the repository's Go source for the tests
// that keep a rule over the whole tree (no strategy's or substrate's
// name spelled outside its own package), so that each such test says
// only what it looks for, not again how to find and parse the files.
// Tests alone import it.
package sourcetree

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// minFiles is fewer .go files than the repository has: a walk that
// parsed fewer missed the tree and proves nothing.
const minFiles = 100

// Root is the module's root: the nearest directory above the working
// directory (a test's package) that holds go.mod.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", dir)
		}
	}
}

// Walk parses every .go file under the module's root, outside hidden
// directories (.git) and the directories skip (if not nil) reports (given their
// path relative to the root), and calls visit with each file parsed
// and its path relative to the root (the name fset's positions give).
// It fails the test if the walk fails or parses fewer than minFiles
// files.
func Walk(t testing.TB, skip func(rel string) bool, visit func(rel string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	root := Root(t)
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || (skip != nil && skip(rel))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		visit(rel, fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < minFiles {
		t.Fatalf("walked %d .go files under %s: the walk missed the tree", files, root)
	}
}

// Rel is a directory of the module (one a registry recorded with
// runtime.Caller: absolute, or module-relative in a -trimpath build)
// relative to its root, the form Walk gives paths in.
func Rel(t testing.TB, dir string) string {
	t.Helper()
	root := Root(t)
	if rel, err := filepath.Rel(root, dir); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	if i := strings.Index(dir, "/internal/"); i >= 0 {
		return dir[i+1:]
	}
	t.Fatalf("cannot place the package directory %s under %s", dir, root)
	return ""
}

// StringLits calls visit with every string literal of f and its value.
func StringLits(f *ast.File, visit func(lit *ast.BasicLit, v string)) {
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if v, err := strconv.Unquote(lit.Value); err == nil {
				visit(lit, v)
			}
		}
		return true
	})
}

// StringConsts calls visit with every constant of f declared with a
// string literal, and its value.
func StringConsts(f *ast.File, visit func(id *ast.Ident, v string)) {
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if v, err := strconv.Unquote(lit.Value); err == nil {
						visit(id, v)
					}
				}
			}
		}
	}
}
