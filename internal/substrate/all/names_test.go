package all_test

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/substrate"
	_ "github.com/ferry-upgrade/ferry/internal/substrate/all"
	"github.com/ferry-upgrade/ferry/internal/testenv/sourcetree"
)

// TestNoSubstrateNamedOutsideItsPackage walks every .go file of the
// repository and fails on a string literal that is a registered
// substrate's name ("process", "kubernetes") outside the substrate's
// own package and this registry (internal/substrate): anywhere else such
// a literal is a switch on the substrate, which the registry's rules
// and capabilities replace. It looks at Go source only, so the
// description's docs (docs/description.md, generated from the types'
// comments), the examples' YAML (examples/) and the test fixtures
// (testdata/, descriptions in YAML) may name substrates freely: that
// is where an operator reads or writes them. A literal that merely
// contains the word ("applies to the process substrate") is prose, not
// a switch, and is not counted.
func TestNoSubstrateNamedOutsideItsPackage(t *testing.T) {
	own := map[string]string{} // name -> its package's directory, relative to root
	for _, name := range substrate.Names() {
		s, err := substrate.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		own[name] = sourcetree.Rel(t, s.Dir())
	}
	if len(own) == 0 {
		t.Fatal("no substrate registered")
	}
	registry := filepath.Join("internal", "substrate")
	skip := func(rel string) bool {
		switch filepath.Base(rel) {
		case "testdata", "examples", "node_modules", "vendor":
			return true
		}
		return false
	}
	walked := map[string]bool{}
	sourcetree.Walk(t, skip, func(rel string, fset *token.FileSet, f *ast.File) {
		walked[filepath.Dir(rel)] = true
		if filepath.Dir(rel) == registry { // the registry's own files (the substrates live below it)
			return
		}
		sourcetree.StringLits(f, func(lit *ast.BasicLit, v string) {
			if dir, ok := own[v]; ok && filepath.Dir(rel) != dir {
				t.Errorf("%s: the substrate name %q outside its package (%s): ask the registry (package substrate: its capabilities, its rules) or use the package's Name", fset.Position(lit.Pos()), v, dir)
			}
		})
	})
	for name, dir := range own {
		if !walked[dir] {
			t.Errorf("substrate %s's package %s was not walked: the test would not see a name inside it", name, dir)
		}
	}
}
