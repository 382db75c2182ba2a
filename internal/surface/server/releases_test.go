package server

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// TestImportRelease imports a release into the catalog: its artifact's
// checksum is checked first (a mismatch imports nothing, and does not
// tell the file's sum), a second identical import is a no-op, another
// release under the same version is refused, bad bodies get 400 naming
// the field, the release is in the catalog at once and in the catalog
// of a server started later on the same data directory; an import
// while an upgrade runs gets 409.
func TestImportRelease(t *testing.T) {
	o := offlineCluster(t)
	root := t.TempDir()
	var logBuf syncWriter
	s := newTestServer(t, o, func(c *Config) {
		c.ArtifactRoots = []string{root}
		c.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
	})
	c := serve(t, s)

	art := filepath.Join(root, "app-2.1.0")
	body := []byte("#!/bin/sh\necho 2.1.0\n")
	if err := os.WriteFile(art, body, 0o755); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(body)
	sum := hex.EncodeToString(h[:])
	wrong := strings.Repeat("0", 64)
	imp := func(version, path, sha string) map[string]any {
		return map[string]any{"version": version, "upgrade_from": []string{"2.0.x"},
			"artifacts": map[string]any{"*": map[string]string{"path": path, "sha256": sha}}}
	}

	r := c.do("POST", "/v1/releases", imp("2.1.0", art, wrong)).expect(t, "a wrong checksum", 422, CodeChecksumMismatch)
	if strings.Contains(string(r.body), sum) || !strings.Contains(string(r.body), art) || !strings.Contains(string(r.body), "differs") {
		t.Errorf("the mismatch's answer tells the file's sum, or not which file: %s", r.body)
	}
	if !strings.Contains(logBuf.String(), sum) {
		t.Errorf("the server's log does not have the file's sum for its operator: %s", logBuf.String())
	}
	c.do("GET", "/v1/releases/2.1.0", nil).expect(t, "nothing imported after a mismatch", 404, CodeUnknownRelease)
	c.do("POST", "/v1/releases", imp("2.1.0", "app-2.1.0", sum)).expect(t, "a relative path", 400, CodeBadRequest)
	c.do("POST", "/v1/releases", imp("2.1", art, sum)).expect(t, "a bad version", 400, CodeBadRequest)
	c.do("POST", "/v1/releases", imp("2.1.0", art, "abc")).expect(t, "a short sha256", 400, CodeBadRequest)
	c.do("POST", "/v1/releases", map[string]any{"version": "2.1.0", "artifacts": map[string]any{"*": map[string]string{"sha256": sum}}}).
		expect(t, "neither path nor image, and no upload of the sum", 422, CodeArtifactRefused)
	c.do("POST", "/v1/releases", `{"version": "2.1.0", "extra": 1}`).expect(t, "an unknown field", 400, CodeBadRequest)
	c.do("POST", "/v1/releases", imp("2.1.0", filepath.Join(root, "none"), sum)).expect(t, "a missing file", 422, CodeArtifactRefused)

	c.do("POST", "/v1/releases", map[string]any{"version": "2.1.0",
		"artifacts": map[string]any{"nope": map[string]string{"path": art, "sha256": sum}}}).
		expect(t, "an artifact for no component", 422, CodeInvalidRelease)

	resp := c.do("POST", "/v1/releases", imp("2.1.0", art, strings.ToUpper(sum))).expect(t, "the import", 201)
	if resp.header.Get("Location") != "/v1/releases/2.1.0" {
		t.Errorf("Location %q", resp.header.Get("Location"))
	}
	var answer ImportRequest
	resp.json(t, &answer)
	if !strings.Contains(string(resp.body), `"sha256"`) || answer.Version != "2.1.0" || answer.Artifacts["*"].SHA256 != sum ||
		len(answer.UpgradeFrom) != 1 {
		t.Errorf("the import's answer: %s", resp.body)
	}
	c.do("POST", "/v1/releases", imp("2.1.0", art, sum)).expect(t, "the same import again", 200)
	c.do("POST", "/v1/releases", imp("2.0.0", art, sum)).expect(t, "another release under a version the catalog has", 409, CodeReleaseExists)
	// (This cluster cannot be observed: the listing's states need that;
	// the catalog itself is read here.)
	s.catalogMu.RLock()
	n, got := len(s.cfg.Cluster.Releases), s.cfg.Cluster.Release("2.1.0")
	s.catalogMu.RUnlock()
	if n != 3 || got == nil || got.Artifacts["*"].Path != art {
		t.Fatalf("the catalog after the import: %d releases, 2.1.0 = %+v", n, got)
	}
	if fi, err := os.Stat(filepath.Join(o.dataDir, ImportedFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", ImportedFile, fi, err)
	}

	// A server started later on the same data directory (from the
	// description alone) has it.
	c2, err := config.Load(o.cfg.File)
	if err != nil {
		t.Fatal(err)
	}
	if err := LoadImported(c2, o.dataDir); err != nil {
		t.Fatal(err)
	}
	if r := c2.Release("2.1.0"); r == nil || r.Artifacts["*"].SHA256 != sum {
		t.Fatalf("the imported release after a restart: %+v", r)
	}

	// While an upgrade runs, the catalog does not change.
	stuckUpgrade(t, boltOf(s), o.cfg.Digest)
	c.do("POST", "/v1/releases", imp("2.2.0", art, sum)).expect(t, "an import while an upgrade runs", 409, CodeUpgradeInProgress)
}
