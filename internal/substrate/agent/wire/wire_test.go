package wire

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/testenv/sourcetree"
)

// TestTheDriverImportsTheWireNotTheAgent keeps the split this package
// exists for: the process driver's code (its tests may start a real
// agent) imports the agent's wire types, not the agent's server, and the
// wire imports nothing of ferry.
func TestTheDriverImportsTheWireNotTheAgent(t *testing.T) {
	const mod = "github.com/ferry-upgrade/ferry/"
	seen := map[string]int{}
	sourcetree.Walk(t, nil, func(rel string, fset *token.FileSet, f *ast.File) {
		dir := filepath.ToSlash(filepath.Dir(rel))
		if strings.HasSuffix(rel, "_test.go") || (dir != "internal/substrate/process" && dir != "internal/substrate/agent/wire") {
			return
		}
		seen[dir]++
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			switch {
			case dir == "internal/substrate/agent/wire" && strings.HasPrefix(p, mod):
				t.Errorf("%s imports %s: the wire imports nothing of ferry", rel, p)
			case dir == "internal/substrate/process" && p == mod+"internal/substrate/agent":
				t.Errorf("%s imports the agent's server (%s): use %sinternal/agent/wire", rel, p, mod)
			}
		}
	})
	if seen["internal/substrate/process"] == 0 || seen["internal/substrate/agent/wire"] == 0 {
		t.Fatalf("the walk found neither package's files: %v", seen)
	}
}
