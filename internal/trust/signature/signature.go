// Package signature checks a load (a release's artifact) against its
// detached signature and the public key the description names, as
// StarlingX's load-import checks a load's .sig before the load may be
// used: a checksum says the file is the one the catalog lists, a
// signature says who made it.
//
// Two kinds of key and signature are read, each recognised by its
// content: Ed25519 (crypto/ed25519: a key as 32 raw bytes, base64, hex
// or a PEM "PUBLIC KEY"; a signature as 64 raw bytes, base64 or hex,
// pure Ed25519 or Ed25519ph over SHA-512) and minisign's files
// (aead.dev/minisign: prehashed signatures, minisign's default, and
// legacy ones). A signature that needs the whole file in memory (pure
// Ed25519, minisign legacy) is checked only for files of at most
// PureLimit bytes; larger loads are signed prehashed.
//
// The file is hashed once: a Verifier is an io.Writer given every byte
// while checksum.Reader computes the SHA-256, and Verify says after.
package signature

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"

	"aead.dev/minisign"

	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// Formats of keys and signatures.
const (
	Ed25519  = "ed25519"
	Minisign = "minisign"
)

// MaxFile bounds a key or signature file: the largest (a minisign
// signature with a long trusted comment) is well under it.
const MaxFile = 16 << 10

// PureLimit is the largest file a signature over the whole message
// (pure Ed25519, minisign legacy) is checked for: such a check holds
// the file in memory.
const PureLimit = 64 << 20

// pureLimit is PureLimit, lowered by tests.
var pureLimit int64 = PureLimit

// ErrKey is matched by every refusal of a key's bytes.
var ErrKey = errors.New("not a public key ferry reads")

// ErrSignature is matched by every refusal of a signature's bytes.
var ErrSignature = errors.New("not a signature ferry reads")

// ErrMismatch is matched when a well-formed signature does not verify.
var ErrMismatch = errors.New("the signature does not verify")

// PublicKey is a key loads are checked against.
type PublicKey struct {
	// Format is Ed25519 or Minisign.
	Format string
	// ID names the key in messages: minisign's key ID, or the first
	// 16 hex digits of the SHA-256 of an Ed25519 key's 32 bytes.
	ID   string
	ed   ed25519.PublicKey
	mini minisign.PublicKey
}

// String is the key's format and ID, as messages name it.
func (k PublicKey) String() string { return k.Format + " key " + k.ID }

// Signature is a detached signature of one file.
type Signature struct {
	// Format is Ed25519 or Minisign.
	Format string
	// KeyID is the ID of the key a minisign signature says it was made
	// with (a hint, not trusted), empty for Ed25519.
	KeyID string
	raw   []byte // an Ed25519 signature's 64 bytes
	text  []byte // a minisign signature's text
	mini  minisign.Signature
}

// ParsePublicKey reads a public key from the bytes of its file.
func ParsePublicKey(b []byte) (PublicKey, error) {
	text := strings.TrimSpace(string(b))
	switch {
	case strings.HasPrefix(text, "-----BEGIN"):
		blk, _ := pem.Decode([]byte(text))
		if blk == nil {
			return PublicKey{}, fmt.Errorf("%w: a PEM block that does not decode", ErrKey)
		}
		if blk.Type != "PUBLIC KEY" {
			return PublicKey{}, fmt.Errorf("%w: a PEM %q block, not a \"PUBLIC KEY\"", ErrKey, blk.Type)
		}
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return PublicKey{}, fmt.Errorf("%w: a PEM public key that does not parse: %v", ErrKey, err)
		}
		ek, ok := k.(ed25519.PublicKey)
		if !ok {
			return PublicKey{}, fmt.Errorf("%w: a PEM %T, not an Ed25519 key", ErrKey, k)
		}
		return edKey(ek), nil
	case strings.HasPrefix(text, "untrusted comment:") || isMinisignKeyLine(text):
		var mk minisign.PublicKey
		if err := mk.UnmarshalText([]byte(text)); err != nil {
			return PublicKey{}, fmt.Errorf("%w: a minisign public key that does not parse: %v", ErrKey, err)
		}
		return PublicKey{Format: Minisign, ID: keyID(mk.ID()), mini: mk}, nil
	}
	if raw, ok := decode(b, text, ed25519.PublicKeySize); ok {
		return edKey(ed25519.PublicKey(raw)), nil
	}
	return PublicKey{}, fmt.Errorf("%w: %d bytes that are no Ed25519 public key (32 bytes raw, base64 or hex, or PEM) and no minisign public key", ErrKey, len(b))
}

// isMinisignKeyLine: a minisign key's base64 line alone (no comment):
// 42 bytes that begin with "Ed".
func isMinisignKeyLine(text string) bool {
	raw, err := base64.StdEncoding.DecodeString(text)
	return err == nil && len(raw) == 42 && raw[0] == 'E' && raw[1] == 'd'
}

func edKey(k ed25519.PublicKey) PublicKey {
	sum := sha256.Sum256(k)
	return PublicKey{Format: Ed25519, ID: strings.ToUpper(hex.EncodeToString(sum[:8])), ed: k}
}

func keyID(id uint64) string { return strings.ToUpper(strconv.FormatUint(id, 16)) }

// decode reads n bytes written raw, in base64 or in hex.
func decode(b []byte, text string, n int) ([]byte, bool) {
	if len(b) == n {
		return b, true
	}
	if raw, err := base64.StdEncoding.DecodeString(text); err == nil && len(raw) == n {
		return raw, true
	}
	if raw, err := hex.DecodeString(text); err == nil && len(raw) == n {
		return raw, true
	}
	return nil, false
}

// ParseSignature reads a detached signature from the bytes of its file.
func ParseSignature(b []byte) (Signature, error) {
	text := strings.TrimSpace(string(b))
	if strings.HasPrefix(text, "untrusted comment:") {
		var ms minisign.Signature
		// minisign's signature ends with a newline; one trimmed away is
		// put back so that the four lines split as they should.
		if err := ms.UnmarshalText([]byte(text + "\n")); err != nil {
			return Signature{}, fmt.Errorf("%w: a minisign signature that does not parse: %v", ErrSignature, err)
		}
		return Signature{Format: Minisign, KeyID: keyID(ms.KeyID), text: []byte(text + "\n"), mini: ms}, nil
	}
	if raw, ok := decode(b, text, ed25519.SignatureSize); ok {
		return Signature{Format: Ed25519, raw: bytes.Clone(raw)}, nil
	}
	return Signature{}, fmt.Errorf("%w: %d bytes that are no Ed25519 signature (64 bytes raw, base64 or hex) and no minisign signature", ErrSignature, len(b))
}

// Verifier checks one file against a signature and a key: write the
// file's bytes to it, then call Verify.
type Verifier struct {
	key   PublicKey
	sig   Signature
	ph    hash.Hash // SHA-512, for Ed25519ph
	mr    *minisign.Reader
	src   bytes.Reader // what mr reads: the bytes of one Write
	whole bytes.Buffer // the file, for a signature over the whole message
	keep  bool         // whole is kept
	n     int64
}

// NewVerifier returns the verifier of sig by key. It refuses a
// signature of another format than the key's, or a minisign signature
// that names another key, before any byte is read.
func NewVerifier(key PublicKey, sig Signature) (*Verifier, error) {
	if key.Format != sig.Format {
		return nil, fmt.Errorf("%w: the signature is in %s's format, it cannot be checked with the %s", ErrMismatch, sig.Format, key)
	}
	v := &Verifier{key: key, sig: sig}
	switch key.Format {
	case Ed25519:
		// Ed25519ph is tried on every file, pure Ed25519 on those that
		// fit in PureLimit: the 64 bytes do not say which was made.
		v.ph, v.keep = sha512.New(), true
	case Minisign:
		if sig.KeyID != key.ID {
			return nil, fmt.Errorf("%w: it was made with minisign key %s, not the %s", ErrMismatch, sig.KeyID, key)
		}
		if sig.mini.Algorithm == minisign.HashEdDSA {
			// minisign's Reader hashes what is read through it and
			// verifies the digest: each Write is read through it.
			v.mr = minisign.NewReader(&v.src)
		} else {
			v.keep = true
		}
	}
	return v, nil
}

// Write takes the file's next bytes; it never fails.
func (v *Verifier) Write(p []byte) (int, error) {
	v.n += int64(len(p))
	if v.ph != nil {
		v.ph.Write(p)
	}
	if v.mr != nil {
		v.src.Reset(p)
		_, _ = io.Copy(io.Discard, v.mr)
	}
	if v.keep {
		if v.n <= pureLimit {
			v.whole.Write(p)
		} else {
			v.keep = false
			v.whole = bytes.Buffer{}
		}
	}
	return len(p), nil
}

// Verify reports whether what was written is the message the
// signature signs with the key: nil, or an error matching ErrMismatch
// that says why.
func (v *Verifier) Verify() error {
	switch v.key.Format {
	case Ed25519:
		if ed25519.VerifyWithOptions(v.key.ed, v.ph.Sum(nil), v.sig.raw, &ed25519.Options{Hash: crypto.SHA512}) == nil {
			return nil
		}
		if v.keep && ed25519.Verify(v.key.ed, v.whole.Bytes(), v.sig.raw) {
			return nil
		}
		if !v.keep {
			return fmt.Errorf("%w with the %s as Ed25519ph (SHA-512), and the file (%d bytes) is larger than the %s a pure Ed25519 signature is checked for: sign it prehashed",
				ErrMismatch, v.key, v.n, safefile.Size(pureLimit))
		}
		return fmt.Errorf("%w with the %s (neither as pure Ed25519 nor as Ed25519ph): the file was changed since it was signed, or another key signed it", ErrMismatch, v.key)
	case Minisign:
		var ok bool
		switch {
		case v.mr != nil:
			ok = v.mr.Verify(v.key.mini, v.sig.text)
		case v.keep:
			ok = minisign.Verify(v.key.mini, v.whole.Bytes(), v.sig.text)
		default:
			return fmt.Errorf("%w: a legacy (not prehashed) minisign signature of a file of %d bytes, more than the %s it is checked for: sign it with minisign's default (prehashed)",
				ErrMismatch, v.n, safefile.Size(pureLimit))
		}
		if !ok {
			return fmt.Errorf("%w with the %s: the file or its trusted comment was changed since it was signed", ErrMismatch, v.key)
		}
		return nil
	}
	return fmt.Errorf("%w: a key of format %q", ErrMismatch, v.key.Format)
}

// ReadPublicKey reads the public key in the file at path (through
// safefile: a FIFO, a device or a file over MaxFile is refused before
// it is read). Its errors name the file.
func ReadPublicKey(path string) (PublicKey, error) { return read(path, "public key", ParsePublicKey) }

// ReadSignature reads the detached signature in the file at path, as
// ReadPublicKey reads a key.
func ReadSignature(path string) (Signature, error) { return read(path, "signature", ParseSignature) }

func read[T any](path, what string, parse func([]byte) (T, error)) (T, error) {
	var zero T
	b, err := safefile.Read(path, MaxFile, safefile.DefaultTimeout)
	if err != nil {
		return zero, fmt.Errorf("%s %w", what, err)
	}
	v, err := parse(b)
	if err != nil {
		return zero, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return v, nil
}
