package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrafficPrintsNoControlCharacters: what 'ferry traffic' prints from
// the spec and from the service (a request's path in its failure) is
// written with its control characters escaped: a C1 CSI (U+009B) or an
// ESC in a path would otherwise reach the terminal, which may take it
// for a command (clear the screen, set the title). The request names
// are refused at validation (config's TestIssue22); paths may hold any
// character but NUL.
func TestTrafficPrintsNoControlCharacters(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer srv.Close()
	dir := t.TempDir()
	desc := offlineDescription(t, dir)
	spec := filepath.Join(dir, "traffic.yaml")
	body := "traffic:\n  targets: [\"" + srv.URL + "\"]\n  rate: 50\n  requests:\n    - {name: get, path: \"/x\\u009b2J\\u009d0;t\\u009c/{{.Key}}\"}\n"
	if err := os.WriteFile(spec, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	code := Main([]string{"-f", desc, "traffic", "--traffic", spec, "--duration", "500ms"}, &stdout, &stderr)
	out := stdout.String() + stderr.String()
	t.Logf("exit %d:\n%s", code, out)
	if code != 4 || !strings.Contains(out, "failed: GET /x\\u009b2J\\u009d0;t\\u009c/") {
		t.Fatalf("exit %d, want 4 and the failed path with its control characters escaped", code)
	}
	for i, r := range out {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			t.Fatalf("output holds the control character %U at byte %d", r, i)
		}
	}
}
