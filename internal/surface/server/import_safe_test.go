package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// importBody is a POST /v1/releases body with one artifact.
func importBody(version, path, sum string) map[string]any {
	return map[string]any{"version": version, "upgrade_from": []string{"2.0.x"},
		"artifacts": map[string]any{"*": map[string]string{"path": path, "sha256": sum}}}
}

// sparse makes a file of size bytes with no block written.
func sparse(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

// TestImportRefusesWhatItMustNotRead: imports of /dev/zero (outside
// the roots, and under a root that holds it), a FIFO, a directory, a
// file outside the artifact roots (directly or through a symbolic link
// in a root), a 2 GiB file and files the server may read but must not
// import (/etc/passwd) each answer 4xx within 2 s, tell no file's sum,
// and leave nothing behind: an upgrade's start that follows is not
// refused with 409 for them, and a good import goes through. (Imports
// of /dev/zero used to hash forever and leave every later start and
// import refused with 409; /etc/shadow's sum was answered to a wrong
// one.)
func TestImportRefusesWhatItMustNotRead(t *testing.T) {
	o := offlineCluster(t)
	root := t.TempDir()
	s := newTestServer(t, o, func(c *Config) { c.ArtifactRoots = []string{root, "/dev"} })
	c := serve(t, s)

	fifo := filepath.Join(root, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "dir")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(root, "big")
	sparse(t, big, 2<<30)
	outside := filepath.Join(t.TempDir(), "app")
	if err := os.WriteFile(outside, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"to-passwd": "/etc/passwd", "to-outside": outside, "to-dotdot": "../" + filepath.Base(filepath.Dir(outside)) + "/app"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(passwd)
	passwdSum := hex.EncodeToString(h[:])
	wrong := strings.Repeat("0", 64)

	for _, tc := range []struct {
		what, path, sum, code, says string
	}{
		{"/dev/zero, under the root /dev", "/dev/zero", wrong, CodeArtifactRefused, "a character device"},
		{"/dev/zero, with the right-looking sum", "/dev/zero", passwdSum, CodeArtifactRefused, "a character device"},
		{"a FIFO", fifo, wrong, CodeArtifactRefused, "a named pipe (FIFO)"},
		{"a directory", dir, wrong, CodeArtifactRefused, "a directory"},
		{"a 2 GiB file", big, wrong, CodeArtifactRefused, "more than the 1 GiB allowed"},
		{"/etc/passwd, outside the roots", "/etc/passwd", wrong, CodeArtifactRefused, "not under an artifact root"},
		{"/etc/passwd with its sum", "/etc/passwd", passwdSum, CodeArtifactRefused, "not under an artifact root"},
		{"/etc/shadow", "/etc/shadow", wrong, CodeArtifactRefused, "not under an artifact root"},
		{"a file outside the roots", outside, wrong, CodeArtifactRefused, "not under an artifact root"},
		{"a link in a root to /etc/passwd", filepath.Join(root, "to-passwd"), passwdSum, CodeArtifactRefused, "which is not under an artifact root"},
		{"a link in a root to a file outside", filepath.Join(root, "to-outside"), wrong, CodeArtifactRefused, "which is not under an artifact root"},
		{"a relative link out of a root", filepath.Join(root, "to-dotdot"), wrong, CodeArtifactRefused, "which is not under an artifact root"},
		{"a path with .. out of a root", root + "/../" + filepath.Base(filepath.Dir(outside)) + "/app", wrong, CodeArtifactRefused, "not under an artifact root"},
	} {
		began := time.Now()
		r := c.do("POST", "/v1/releases", importBody("2.1.0", tc.path, tc.sum))
		if d := time.Since(began); d > 2*time.Second {
			t.Errorf("%s: answered after %s", tc.what, d)
		}
		r.expect(t, tc.what, 422, tc.code)
		if body := string(r.body); !strings.Contains(body, tc.says) {
			t.Errorf("%s: the answer does not say %q: %s", tc.what, tc.says, body)
		}
		if strings.Contains(string(r.body), passwdSum) && tc.sum != passwdSum {
			t.Errorf("%s: the answer tells /etc/passwd's sum: %s", tc.what, r.body)
		}
	}
	// Nothing of the refused imports holds the server: an upgrade's
	// start is judged on its own (this cluster's agent does not answer:
	// the preflight fails), and a good import goes through.
	c.do("POST", "/v1/upgrade", map[string]string{"to": "2.0.0"}).expect(t, "a start after the refused imports", 422, CodePreflightFailed)
	good := filepath.Join(root, "app-2.1.0")
	if err := os.WriteFile(good, []byte("#!/bin/sh\necho 2.1.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	gh := sha256.Sum256([]byte("#!/bin/sh\necho 2.1.0\n"))
	c.do("POST", "/v1/releases", importBody("2.1.0", good, hex.EncodeToString(gh[:]))).expect(t, "a good import after the refused ones", 201)
}

// TestAbandonedImport: an import whose artifact takes seconds to hash
// (4 GiB, sparse, within this server's limit) blocks no upgrade's start
// while it runs, and stops hashing as soon as its client leaves (the
// server says so in its log), leaving nothing behind.
func TestAbandonedImport(t *testing.T) {
	o := offlineCluster(t)
	root := t.TempDir()
	var logBuf syncWriter
	s := newTestServer(t, o, func(c *Config) {
		c.ArtifactRoots = []string{root}
		c.MaxArtifactSize = 4 << 30
		c.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
	})
	c := serve(t, s)
	big := filepath.Join(root, "big")
	sparse(t, big, 4<<30)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body, _ := json.Marshal(importBody("2.1.0", big, strings.Repeat("0", 64)))
	req, _ := http.NewRequestWithContext(ctx, "POST", c.base+"/v1/releases", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	// While it hashes, the import holds nothing an upgrade needs.
	waitFor(t, 5*time.Second, "the import hashes", func() bool { return strings.Contains(logBuf.String(), "checking its artifacts") })
	c.do("POST", "/v1/upgrade", map[string]string{"to": "2.0.0"}).expect(t, "a start while an import hashes", 422, CodePreflightFailed)
	cancel()
	<-done
	left := time.Now()
	waitFor(t, 2*time.Second, "the server stopped hashing the abandoned import", func() bool {
		return strings.Contains(logBuf.String(), "import abandoned")
	})
	t.Logf("the hashing stopped %s after the client left", time.Since(left).Round(time.Millisecond))
	c.do("POST", "/v1/upgrade", map[string]string{"to": "2.0.0"}).expect(t, "a start after the abandoned import", 422, CodePreflightFailed)
	c.do("GET", "/v1/releases/2.1.0", nil).expect(t, "nothing imported", 404, CodeUnknownRelease)
}

// TestUploadArtifact: an artifact uploaded with its sum is kept in the
// data directory's artifact store and can be imported by the path the
// upload answers; a second upload answers 200; a body whose sum is not
// the path's is not kept (and its answer does not tell the body's sum);
// a body over the limit gets 413 at once; a malformed sum 400.
func TestUploadArtifact(t *testing.T) {
	o := offlineCluster(t)
	s := newTestServer(t, o, func(c *Config) { c.MaxArtifactSize = 1 << 20 })
	c := serve(t, s)
	body := []byte("#!/bin/sh\necho 2.1.0 uploaded\n")
	h := sha256.Sum256(body)
	sum := hex.EncodeToString(h[:])
	octet := []string{"Content-Type", "application/octet-stream"}

	var up ArtifactUpload
	c.do("PUT", "/v1/artifacts/"+sum, body, octet...).expect(t, "the upload", 201).json(t, &up)
	store := filepath.Join(o.dataDir, ArtifactsDir)
	if up.SHA256 != sum || up.Size != int64(len(body)) || up.Path != filepath.Join(store, sum) {
		t.Fatalf("the upload's answer: %+v", up)
	}
	if b, err := os.ReadFile(up.Path); err != nil || !bytes.Equal(b, body) {
		t.Fatalf("the kept artifact: %q %v", b, err)
	}
	if fi, err := os.Stat(up.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the kept artifact's mode: %v %v", fi, err)
	}
	c.do("PUT", "/v1/artifacts/"+strings.ToUpper(sum), body, octet...).expect(t, "the same upload again", 200)

	other := []byte("something else")
	oh := sha256.Sum256(other)
	r := c.do("PUT", "/v1/artifacts/"+sum[:63]+"0", other, octet...).expect(t, "a body that is not the path's sum", 422, CodeChecksumMismatch)
	if strings.Contains(string(r.body), hex.EncodeToString(oh[:])) {
		t.Errorf("the mismatch tells the body's sum: %s", r.body)
	}
	if _, err := os.Stat(filepath.Join(store, sum[:63]+"0")); !os.IsNotExist(err) {
		t.Errorf("a mismatched upload was kept: %v", err)
	}
	began := time.Now()
	c.do("PUT", "/v1/artifacts/"+sum, make([]byte, 1<<20+1), octet...).expect(t, "a body over the limit", 413, CodeBodyTooLarge)
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("the refusal of a body over the limit took %s", d)
	}
	c.do("PUT", "/v1/artifacts/abc", body, octet...).expect(t, "a malformed sum", 400, CodeBadRequest)
	c.do("PUT", "/v1/artifacts/"+sum, body, "Content-Type", "text/plain").expect(t, "a text body", 415, CodeUnsupportedMedia)
	entries, _ := os.ReadDir(store)
	if len(entries) != 1 {
		t.Errorf("the artifact store holds %d files, want the one upload: %v", len(entries), entries)
	}

	c.do("POST", "/v1/releases", importBody("2.1.0", up.Path, sum)).expect(t, "the import of the upload", 201)
}

// TestUploadWithRelativeDataDir: with a data directory given relative
// to the working directory ('ferry server --data-dir ferry'), the
// upload answers the absolute path an import takes, and an import may
// name the upload by its sha256 alone. (The upload answered
// "ferry/artifacts/<sha>", which the import refused: "must be
// absolute".)
func TestUploadWithRelativeDataDir(t *testing.T) {
	o := offlineCluster(t)
	wd := t.TempDir()
	t.Chdir(wd)
	o.dataDir = "ferry"
	c := serve(t, newTestServer(t, o))
	body := []byte("#!/bin/sh\necho 2.1.0 uploaded\n")
	h := sha256.Sum256(body)
	sum := hex.EncodeToString(h[:])

	var up ArtifactUpload
	c.do("PUT", "/v1/artifacts/"+sum, body, "Content-Type", "application/octet-stream").expect(t, "the upload", 201).json(t, &up)
	if want := filepath.Join(wd, "ferry", ArtifactsDir, sum); up.Path != want {
		t.Fatalf("the upload answers path %q, want %q", up.Path, want)
	}
	var rel ImportRequest
	c.do("POST", "/v1/releases", importBody("2.1.0", up.Path, sum)).expect(t, "the import of the path the upload answered", 201).json(t, &rel)
	if p := rel.Artifacts["*"].Path; p != up.Path {
		t.Errorf("the import keeps path %q, want %q", p, up.Path)
	}
	byRef := map[string]any{"version": "2.2.0", "upgrade_from": []string{"2.1.x"},
		"artifacts": map[string]any{"*": map[string]string{"sha256": strings.ToUpper(sum)}}}
	c.do("POST", "/v1/releases", byRef).expect(t, "the import of the upload by its sha256 alone", 201).json(t, &rel)
	if p := rel.Artifacts["*"].Path; p != up.Path {
		t.Errorf("the import by sha256 keeps path %q, want the upload's %q", p, up.Path)
	}
	other := strings.Repeat("b", 64)
	byRef = map[string]any{"version": "2.3.0", "artifacts": map[string]any{"*": map[string]string{"sha256": other}}}
	r := c.do("POST", "/v1/releases", byRef).expect(t, "an import by a sha256 never uploaded", 422, CodeArtifactRefused)
	if !strings.Contains(string(r.body), "PUT /v1/artifacts/"+other) {
		t.Errorf("the refusal does not say how to upload it: %s", r.body)
	}
}
