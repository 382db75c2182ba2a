// Package bundletest reads a troubleshooting bundle back for the tests
// of the packages that write one (bundle, server, e2e). It is for tests
// only.
package bundletest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
)

// Files returns a bundle's top directory and its files by their name
// under it, failing the test unless the bundle is a gzipped tar of
// regular files, each 0600, all under one directory "bundle-…", none
// with a ".." in its name.
func Files(t testing.TB, b []byte) (top string, files map[string]string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the bundle is not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	files = map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return top, files
		}
		if err != nil {
			t.Fatalf("the bundle's tar: %v", err)
		}
		dir, name, _ := strings.Cut(h.Name, "/")
		if top == "" {
			top = dir
		}
		if dir != top || !strings.HasPrefix(dir, "bundle-") || h.Typeflag != tar.TypeReg || h.Mode != 0o600 || strings.Contains(name, "..") {
			t.Errorf("bundle entry %q: type %c, mode %o", h.Name, h.Typeflag, h.Mode)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("the bundle's %s: %v", h.Name, err)
		}
		files[name] = string(data)
	}
}

// NoSecrets fails the test if any secret is in any file's name or
// content.
func NoSecrets(t testing.TB, files map[string]string, secrets ...string) {
	t.Helper()
	for name, data := range files {
		for _, s := range secrets {
			if strings.Contains(name, s) || strings.Contains(data, s) {
				t.Errorf("%s holds a secret (%.6s…)", name, s)
			}
		}
	}
}
