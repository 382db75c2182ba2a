package config

import (
	"go/ast"
	"go/token"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/testenv/sourcetree"
)

// TestRegisterStageKindRefuses: a registration that would make a flow
// ambiguous panics at init, before anything is registered.
func TestRegisterStageKindRefuses(t *testing.T) {
	calls := func(*FlowStage, bool) (string, []Call) { return "", nil }
	for _, tc := range []struct {
		name string
		k    StageKind
	}{
		{"no name", StageKind{State: "waiting-x", Calls: calls}},
		{"no state", StageKind{Name: "wait-x", Calls: calls}},
		{"no calls", StageKind{Name: "wait-x", State: "waiting-x"}},
		{"not a name", StageKind{Name: "wait x", State: "waiting-x", Calls: calls}},
		{"a built-in kind's name", StageKind{Name: StagePhase, State: "phasing", Calls: calls}},
		{"a registered name", StageKind{Name: StageAction, State: "acting-x", Calls: calls}},
		{"a registered state", StageKind{Name: "wait-x", State: "action", Calls: calls}},
		{"a state that begins with another's", StageKind{Name: "wait-x", State: "action-gate", Calls: calls}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := StageKinds()
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterStageKind(%+v) did not panic", tc.k)
				}
				if after := StageKinds(); strings.Join(after, ",") != strings.Join(before, ",") {
					t.Errorf("kinds %v after the refusal; want %v", after, before)
				}
			}()
			RegisterStageKind(tc.k)
		})
	}
}

// TestNoStageKindNamedOutsideItsFile keeps a new flow stage kind one
// file: nothing but the file that registers a kind may switch on it.
// It walks every .go file of the repository and fails on
//
//   - outside a test, a use of a constant whose value is a registered
//     kind's name or state word (config.StageAction, upgrade's
//     KindAction), outside the file that declares it: that is a
//     switch on the kind, which the registry replaces;
//   - for a kind registered outside this package, a string literal
//     that is exactly its name or state, outside its file (the
//     action's words are also an event's kind and a JSON key, so its
//     literals are not counted; its constants are).
//
// The built-in kinds (expand, phase, …) are the machine's own and not
// held to it.
func TestNoStageKindNamedOutsideItsFile(t *testing.T) {
	const mod = "github.com/ferry-upgrade/ferry/"
	words := map[string]string{} // a registered kind's name or state -> the file registering it
	for _, n := range StageKinds() {
		if k, ok := LookupStageKind(n); ok {
			file := filepath.Join(sourcetree.Rel(t, filepath.Dir(k.File())), filepath.Base(k.File()))
			words[k.Name], words[k.State] = file, file
		}
	}
	if len(words) == 0 {
		t.Fatal("no stage kind registered")
	}
	// The constants that spell a word: package directory and name ->
	// the file declaring it.
	consts := map[[2]string]string{}
	sourcetree.Walk(t, nil, func(rel string, _ *token.FileSet, f *ast.File) {
		sourcetree.StringConsts(f, func(id *ast.Ident, v string) {
			if words[v] != "" {
				consts[[2]string{filepath.Dir(rel), id.Name}] = rel
			}
		})
	})
	configDir := filepath.Join("internal", "core", "config")
	sourcetree.Walk(t, nil, func(rel string, fset *token.FileSet, f *ast.File) {
		isTest := strings.HasSuffix(rel, "_test.go")
		dir := filepath.Dir(rel)
		imports := map[string]string{} // local name -> directory
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if !strings.HasPrefix(p, mod) {
				continue
			}
			name := path.Base(p)
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = filepath.FromSlash(strings.TrimPrefix(p, mod))
		}
		use := func(pos token.Pos, pkgDir, name string) {
			if decl, ok := consts[[2]string{pkgDir, name}]; ok && !isTest && decl != rel {
				t.Errorf("%s: %s, a registered stage kind's word, outside %s: ask the registry (config.LookupStageKind) instead", fset.Position(pos), name, decl)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && imports[id.Name] != "" {
					use(x.Pos(), imports[id.Name], x.Sel.Name)
					return false
				}
			case *ast.Ident:
				use(x.Pos(), dir, x.Name)
			}
			return true
		})
		sourcetree.StringLits(f, func(lit *ast.BasicLit, v string) {
			if file := words[v]; file != "" && filepath.Dir(file) != configDir && file != rel {
				t.Errorf("%s: the literal %s, a registered stage kind's word, outside %s", fset.Position(lit.Pos()), lit.Value, file)
			}
		})
	})
}
