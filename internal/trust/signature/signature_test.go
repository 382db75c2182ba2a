package signature

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"aead.dev/minisign"
)

// seeded is a deterministic source of key bytes for a test: the seed
// is printed, so a failure replays.
func seeded(t testing.TB, seed uint64) *mrand.ChaCha8 {
	t.Logf("seed %d", seed)
	var s [32]byte
	for i := range s {
		s[i] = byte(seed >> (8 * (i % 8)))
	}
	return mrand.NewChaCha8(s)
}

// keys are the signers a test uses: two Ed25519 keys, two minisign keys.
type keys struct {
	ed, edOther           ed25519.PrivateKey
	mini, miniOther       minisign.PrivateKey
	miniPub, miniOtherPub minisign.PublicKey
}

func newKeys(t testing.TB, seed uint64) keys {
	r := seeded(t, seed)
	var k keys
	var err error
	_, k.ed, _ = ed25519.GenerateKey(r)
	_, k.edOther, _ = ed25519.GenerateKey(r)
	if k.miniPub, k.mini, err = minisign.GenerateKey(r); err != nil {
		t.Fatal(err)
	}
	if k.miniOtherPub, k.miniOther, err = minisign.GenerateKey(r); err != nil {
		t.Fatal(err)
	}
	return k
}

func pemKey(t testing.TB, pub crypto.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func edPH(t testing.TB, k ed25519.PrivateKey, msg []byte) []byte {
	d := sha512Sum(msg)
	sig, err := k.Sign(nil, d, &ed25519.Options{Hash: crypto.SHA512})
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func miniText(t testing.TB, pub minisign.PublicKey) []byte {
	b, err := pub.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func miniHashed(k minisign.PrivateKey, msg []byte) []byte {
	r := minisign.NewReader(bytes.NewReader(msg))
	_, _ = r.Read(make([]byte, len(msg)+1))
	return r.SignWithComments(k, "timestamp:1 file:load.iso", "signed by the release team")
}

// check parses key and sig and writes msg through a verifier, as an
// import does.
func check(key, sig, msg []byte) error {
	k, err := ParsePublicKey(key)
	if err != nil {
		return err
	}
	s, err := ParseSignature(sig)
	if err != nil {
		return err
	}
	v, err := NewVerifier(k, s)
	if err != nil {
		return err
	}
	// In pieces, as checksum.Reader writes them.
	for p := msg; len(p) > 0; {
		n := min(len(p), 7)
		_, _ = v.Write(p[:n])
		p = p[n:]
	}
	return v.Verify()
}

func TestVerify(t *testing.T) {
	k := newKeys(t, 19)
	msg := []byte("ferry load 2.0.0: the bytes of an artifact")
	tampered := bytes.Clone(msg)
	tampered[5] ^= 1
	edPub := k.ed.Public().(ed25519.PublicKey)
	edSig := ed25519.Sign(k.ed, msg)
	otherSig := ed25519.Sign(k.edOther, msg)
	mh := miniHashed(k.mini, msg)
	legacy := minisign.SignWithComments(k.mini, msg, "timestamp:1", "legacy")
	// The trusted comment changed: the comment's own signature fails.
	forged := bytes.Replace(mh, []byte("file:load.iso"), []byte("file:evil.iso"), 1)

	for _, tc := range []struct {
		name     string
		key, sig []byte
		msg      []byte
		want     error // nil: verifies
		says     string
	}{
		{"ed25519 raw key, raw pure signature", edPub, edSig, msg, nil, ""},
		{"ed25519 base64 key, base64 signature", []byte(base64.StdEncoding.EncodeToString(edPub) + "\n"), []byte(base64.StdEncoding.EncodeToString(edSig)), msg, nil, ""},
		{"ed25519 PEM key, hex signature", pemKey(t, edPub), []byte(hex.EncodeToString(edSig)), msg, nil, ""},
		{"ed25519ph signature", []byte(hex.EncodeToString(edPub)), edPH(t, k.ed, msg), msg, nil, ""},
		{"ed25519: one byte changed", edPub, edSig, tampered, ErrMismatch, "neither as pure Ed25519 nor as Ed25519ph"},
		{"ed25519ph: one byte changed", edPub, edPH(t, k.ed, msg), tampered, ErrMismatch, "changed since it was signed"},
		{"ed25519: signed by another key", edPub, otherSig, msg, ErrMismatch, "another key signed it"},
		{"ed25519: empty file", edPub, ed25519.Sign(k.ed, nil), nil, nil, ""},
		{"minisign prehashed", miniText(t, k.miniPub), mh, msg, nil, ""},
		{"minisign key line alone", []byte(k.miniPub.String()), mh, msg, nil, ""},
		{"minisign legacy", miniText(t, k.miniPub), legacy, msg, nil, ""},
		{"minisign prehashed: one byte changed", miniText(t, k.miniPub), mh, tampered, ErrMismatch, "changed since it was signed"},
		{"minisign legacy: one byte changed", miniText(t, k.miniPub), legacy, tampered, ErrMismatch, "changed since it was signed"},
		{"minisign: trusted comment changed", miniText(t, k.miniPub), forged, msg, ErrMismatch, "trusted comment"},
		{"minisign: signed by another key", miniText(t, k.miniPub), miniHashed(k.miniOther, msg), msg, ErrMismatch, "made with minisign key " + keyID(k.miniOtherPub.ID())},
		{"minisign key, ed25519 signature", miniText(t, k.miniPub), edSig, msg, ErrMismatch, "in ed25519's format, it cannot be checked with the minisign key"},
		{"ed25519 key, minisign signature", edPub, mh, msg, ErrMismatch, "in minisign's format, it cannot be checked with the ed25519 key"},
		{"key: garbage", []byte("not a key"), edSig, msg, ErrKey, "9 bytes that are no Ed25519 public key"},
		{"key: 31 bytes", edPub[:31], edSig, msg, ErrKey, "31 bytes"},
		{"key: a private key's PEM", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), edSig, msg, ErrKey, `"PRIVATE KEY" block`},
		{"key: an RSA key", pemKey(t, &rsa.PublicKey{N: big.NewInt(3233), E: 17}), edSig, msg, ErrKey, "not an Ed25519 key"},
		{"key: a broken minisign key", []byte("untrusted comment: x\nRWQ"), edSig, msg, ErrKey, "minisign public key that does not parse"},
		{"signature: garbage", edPub, []byte("no"), msg, ErrSignature, "2 bytes"},
		{"signature: a broken minisign one", edPub, []byte("untrusted comment: x\nAAAA\n"), msg, ErrSignature, "minisign signature that does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := check(tc.key, tc.sig, tc.msg)
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("does not verify: %v", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("err = %v, want %v", err, tc.want)
			case tc.want != nil && !strings.Contains(err.Error(), tc.says):
				t.Fatalf("err = %q, want it to say %q", err, tc.says)
			}
		})
	}
}

// TestPureLimit: a pure signature of a file past the limit is refused
// saying so, a prehashed one still verifies.
func TestPureLimit(t *testing.T) {
	old := pureLimit
	pureLimit = 1 << 10
	t.Cleanup(func() { pureLimit = old })
	k := newKeys(t, 7)
	msg := bytes.Repeat([]byte("load "), 1000) // 5000 bytes
	edPub := k.ed.Public().(ed25519.PublicKey)
	if err := check(edPub, ed25519.Sign(k.ed, msg), msg); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "larger than the 1 KiB") {
		t.Fatalf("pure Ed25519 past the limit: %v", err)
	}
	if err := check(edPub, edPH(t, k.ed, msg), msg); err != nil {
		t.Fatalf("Ed25519ph past the limit: %v", err)
	}
	legacy := minisign.SignWithComments(k.mini, msg, "t", "u")
	if err := check(miniText(t, k.miniPub), legacy, msg); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "legacy") {
		t.Fatalf("minisign legacy past the limit: %v", err)
	}
	if err := check(miniText(t, k.miniPub), miniHashed(k.mini, msg), msg); err != nil {
		t.Fatalf("minisign prehashed past the limit: %v", err)
	}
}

// TestReadRefusesSpecialFiles: key and signature files are read with
// safefile: a FIFO, a directory, an oversized file are refused at once
// and named.
func TestReadRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "key.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.pub")
	if err := os.WriteFile(big, make([]byte, MaxFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, dir, big, "/dev/zero", filepath.Join(dir, "missing")} {
		if _, err := ReadPublicKey(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("ReadPublicKey(%s) = %v, want an error naming it", p, err)
		}
		if _, err := ReadSignature(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("ReadSignature(%s) = %v, want an error naming it", p, err)
		}
	}
	k := newKeys(t, 3)
	good := filepath.Join(dir, "good.pub")
	if err := os.WriteFile(good, miniText(t, k.miniPub), 0o600); err != nil {
		t.Fatal(err)
	}
	if key, err := ReadPublicKey(good); err != nil || key.Format != Minisign || key.ID != keyID(k.miniPub.ID()) {
		t.Fatalf("ReadPublicKey = %+v, %v", key, err)
	}
	bad := filepath.Join(dir, "bad.sig")
	if err := os.WriteFile(bad, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSignature(bad); !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("ReadSignature(bad) = %v", err)
	}
}

// FuzzParse feeds the key and signature parsers anything: no panic, and
// whatever parses can be given to a verifier, which refuses a message
// no key signed.
func FuzzParse(f *testing.F) {
	k := newKeys(f, 1)
	msg := []byte("load")
	edPub := k.ed.Public().(ed25519.PublicKey)
	for _, seed := range [][2][]byte{
		{edPub, ed25519.Sign(k.ed, msg)},
		{pemKey(f, edPub), []byte(base64.StdEncoding.EncodeToString(ed25519.Sign(k.ed, msg)))},
		{[]byte(hex.EncodeToString(edPub)), []byte(hex.EncodeToString(ed25519.Sign(k.ed, msg)))},
		{miniText(f, k.miniPub), miniHashed(k.mini, msg)},
		{[]byte(k.miniPub.String()), minisign.SignWithComments(k.mini, msg, "t", "u")},
		{[]byte("untrusted comment: x\n"), []byte("untrusted comment: x\n\ntrusted comment: y\n")},
		{[]byte("-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n"), nil},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, key, sig []byte) {
		pk, kerr := ParsePublicKey(key)
		s, serr := ParseSignature(sig)
		if kerr == nil && (pk.Format == "" || pk.ID == "") {
			t.Fatalf("a key without format or ID: %+v", pk)
		}
		if kerr != nil && !errors.Is(kerr, ErrKey) {
			t.Fatalf("key refusal %v does not match ErrKey", kerr)
		}
		if serr != nil && !errors.Is(serr, ErrSignature) {
			t.Fatalf("signature refusal %v does not match ErrSignature", serr)
		}
		if kerr != nil || serr != nil {
			return
		}
		v, err := NewVerifier(pk, s)
		if err != nil {
			return
		}
		_, _ = v.Write([]byte("a message the fuzzer's key did not sign: "))
		_, _ = v.Write(key)
		if v.Verify() == nil {
			t.Fatalf("a signature verified a message nobody signed: key %x sig %x", key, sig)
		}
	})
}

func sha512Sum(b []byte) []byte {
	h := crypto.SHA512.New()
	h.Write(b)
	return h.Sum(nil)
}
