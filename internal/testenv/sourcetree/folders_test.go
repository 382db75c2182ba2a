package sourcetree_test

import (
	"go/ast"
	"go/token"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/testenv/sourcetree"
)

const mod = "github.com/ferry-upgrade/ferry/"

// mayImport says, for each folder of internal/, which of ferry's
// packages its (non-test) files may import: the rules the table of
// docs/ARCHITECTURE.md ("The parts") states.
var mayImport = map[string]func(pkg, imp string) bool{
	"core":  func(_, imp string) bool { return in(imp, "core", "trust") },
	"trust": func(_, imp string) bool { return in(imp, "trust") },
	"run": func(_, imp string) bool {
		return in(imp, "run", "core", "trust") || imp == "internal/substrate" || imp == "internal/substrate/driver"
	},
	"substrate": func(pkg, imp string) bool {
		if pkg == "internal/substrate/sim" { // the simulator runs the real engine
			return !in(imp, "surface", "proof", "testenv")
		}
		return in(imp, "substrate", "core", "trust") || imp == "internal/run/buildinfo"
	},
	"proof":   func(_, imp string) bool { return in(imp, "proof", "core", "trust") || imp == "internal/run/store" },
	"surface": func(_, imp string) bool { return !in(imp, "testenv") },
	"testenv": func(_, _ string) bool { return true },
}

// in reports whether imp (a path inside the module) is in one of the folders.
func in(imp string, folders ...string) bool {
	for _, f := range folders {
		if strings.HasPrefix(imp, "internal/"+f+"/") || imp == "internal/"+f {
			return true
		}
	}
	return false
}

// TestFoldersKeepTheirImports: every package under internal/ is in one
// of the seven folders, and imports only what its folder may. Moving a
// package, or an import across the folders' lines, fails it by name.
func TestFoldersKeepTheirImports(t *testing.T) {
	seen := map[string]int{}
	sourcetree.Walk(t, nil, func(rel string, _ *token.FileSet, f *ast.File) {
		pkg := path.Dir(rel)
		if strings.HasSuffix(rel, "_test.go") || !strings.HasPrefix(pkg, "internal/") || strings.Contains(rel, "/testdata/") {
			return
		}
		folder := strings.SplitN(pkg, "/", 3)[1]
		rule, ok := mayImport[folder]
		if !ok {
			t.Errorf("%s: internal/%s is not one of the folders docs/ARCHITECTURE.md names", rel, folder)
			return
		}
		seen[folder]++
		for _, is := range f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			if !strings.HasPrefix(p, mod) {
				continue
			}
			imp := strings.TrimPrefix(p, mod)
			if !rule(pkg, imp) {
				t.Errorf("%s (folder %s) imports %s: across the folders' rules", rel, folder, imp)
			}
		}
	})
	for folder := range mayImport {
		if seen[folder] == 0 {
			t.Errorf("no file in internal/%s: the walk missed it", folder)
		}
	}
}

// TestOnlyTestsImportTestenv: test support stays out of the program.
func TestOnlyTestsImportTestenv(t *testing.T) {
	sourcetree.Walk(t, nil, func(rel string, _ *token.FileSet, f *ast.File) {
		if strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(rel, "internal/testenv/") || strings.Contains(rel, "/testdata/") {
			return
		}
		for _, is := range f.Imports {
			if p, _ := strconv.Unquote(is.Path.Value); strings.HasPrefix(p, mod+"internal/testenv/") {
				t.Errorf("%s imports %s: only tests may", rel, p)
			}
		}
	})
}
