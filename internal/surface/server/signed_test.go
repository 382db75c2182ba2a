package server

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/run/engine"
)

// TestImportSignedRelease: with a signing_key in the description, an
// import's artifact needs a signature that verifies with that key
// after its checksum: a load changed by one byte (sent with its own
// sha256), one signed by another key, one without a signature and a
// signature outside the artifact roots are each refused, naming the
// file, the key and why; the load signed by the key is imported.
func TestImportSignedRelease(t *testing.T) {
	const seed = 19
	t.Logf("seed %d (the keys)", seed)
	rnd := mrand.NewChaCha8([32]byte{seed})
	pub, priv, _ := ed25519.GenerateKey(rnd)
	_, other, _ := ed25519.GenerateKey(rnd)

	o := offlineCluster(t)
	keyFile := filepath.Join(t.TempDir(), "release.pem")
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	// The description's releases are signed too (their signatures are
	// not read here: the cluster is offline).
	o.cfg.SigningKey = keyFile
	for i := range o.cfg.Releases {
		a := o.cfg.Releases[i].Artifacts["*"]
		a.Signature = a.Path + ".sig"
		o.cfg.Releases[i].Artifacts["*"] = a
	}
	root := t.TempDir()
	s := newTestServer(t, o, func(c *Config) { c.ArtifactRoots = []string{root} })
	c := serve(t, s)

	body := []byte("#!/bin/sh\necho 2.1.0\n")
	art, sig := filepath.Join(root, "app-2.1.0"), filepath.Join(root, "app-2.1.0.sig")
	writeFile(t, art, body)
	writeFile(t, sig, []byte(base64.StdEncoding.EncodeToString(ed25519.Sign(priv, body))+"\n"))
	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-2] ^= 1
	bad := filepath.Join(root, "app-2.1.0-changed")
	writeFile(t, bad, tampered)
	otherSig := filepath.Join(root, "app-2.1.0.other.sig")
	writeFile(t, otherSig, ed25519.Sign(other, body))
	outside := filepath.Join(t.TempDir(), "app.sig")
	writeFile(t, outside, ed25519.Sign(priv, body))

	imp := func(path, sigPath string, b []byte) map[string]any {
		a := map[string]string{"path": path, "sha256": sum256(b)}
		if sigPath != "" {
			a["signature"] = sigPath
		}
		return map[string]any{"version": "2.1.0", "upgrade_from": []string{"2.0.x"}, "artifacts": map[string]any{"*": a}}
	}
	says := func(r response, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(string(r.body), w) {
				t.Errorf("the answer does not say %q: %s", w, r.body)
			}
		}
	}
	r := c.do("POST", "/v1/releases", imp(bad, sig, tampered)).expect(t, "a load changed by one byte", 422, CodeSignatureMismatch)
	says(r, bad, sig, keyFile, "does not verify", "nothing imported")
	r = c.do("POST", "/v1/releases", imp(art, otherSig, body)).expect(t, "a load signed by another key", 422, CodeSignatureMismatch)
	says(r, otherSig, keyFile, "another key signed it")
	r = c.do("POST", "/v1/releases", imp(art, "", body)).expect(t, "a load without a signature", 422, CodeInvalidRelease)
	says(r, "signature: must be set")
	c.do("POST", "/v1/releases", imp(art, outside, body)).expect(t, "a signature outside the artifact roots", 422, CodeArtifactRefused)
	c.do("POST", "/v1/releases", imp(art, "app.sig", body)).expect(t, "a relative signature", 400, CodeBadRequest)
	c.do("GET", "/v1/releases/2.1.0", nil).expect(t, "nothing imported after the refusals", 404, CodeUnknownRelease)

	var answer ImportRequest
	c.do("POST", "/v1/releases", imp(art, sig, body)).expect(t, "the signed load", 201).json(t, &answer)
	if answer.Artifacts["*"].Signature != sig {
		t.Errorf("the import's answer: %+v", answer)
	}
}

// TestImportingLoadState: a release being imported is listed with load
// state importing until its import ends.
func TestImportingLoadState(t *testing.T) {
	s := newTestServer(t, offlineCluster(t))
	done := s.loadImporting("3.0.0")
	rv := s.withImporting([]engine.ReleaseView{{Version: "1.0.0", Load: engine.LoadActive}})
	if len(rv) != 2 || rv[1].Version != "3.0.0" || rv[1].Load != engine.LoadImporting {
		t.Fatalf("while importing: %+v", rv)
	}
	done()
	if rv := s.withImporting(nil); len(rv) != 0 {
		t.Fatalf("after the import: %+v", rv)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func sum256(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
