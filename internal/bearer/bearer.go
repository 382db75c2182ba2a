// Package bearer is the bearer token that guards ferry's agent and
// server: created once in a 0600 file, refused when group or others may
// read it, compared in constant time, never logged.
package bearer

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// MinLength is the shortest token accepted from a file.
const MinLength = 16

// LoadOrCreate reads the token from path or, when the file does not
// exist, creates it with a fresh random token (32 bytes, hex) and mode
// 0600; created tells whether this call made it. A file that group or
// others may access is refused: the token would not be a secret.
func LoadOrCreate(path string) (tok string, created bool, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("token file: %w", err)
	}
	err = create(path)
	switch {
	case err == nil:
		created = true
	case !errors.Is(err, fs.ErrExist):
		return "", false, err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", false, fmt.Errorf("token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", false, fmt.Errorf("token file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", false, fmt.Errorf("token file %s has mode %#o: it must not be readable or writable by group or others (chmod 600 %s)", path, perm, path)
	}
	b := make([]byte, 4097)
	n, _ := f.Read(b)
	if n > 4096 {
		return "", false, fmt.Errorf("token file %s is larger than 4096 bytes", path)
	}
	tok = strings.TrimSpace(string(b[:n]))
	switch {
	case len(tok) < MinLength:
		return "", false, fmt.Errorf("token file %s holds fewer than %d characters", path, MinLength)
	case strings.ContainsAny(tok, " \t\r\n"):
		return "", false, fmt.Errorf("token file %s holds more than one word", path)
	}
	return tok, created, nil
}

func create(path string) error {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return fmt.Errorf("token: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("token file: %w", err)
	}
	_, err = f.WriteString(hex.EncodeToString(raw[:]) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("token file: %w", err)
	}
	return nil
}

// Why a request is refused.
var (
	ErrMissing = errors.New("missing bearer token")
	ErrScheme  = errors.New("the Authorization header must be 'Bearer <token>'")
	ErrInvalid = errors.New("invalid bearer token")
)

// Checker holds the token's hash only.
type Checker struct{ hash [sha256.Size]byte }

// NewChecker checks requests against tok.
func NewChecker(tok string) Checker { return Checker{hash: sha256.Sum256([]byte(tok))} }

// Check returns nil when r carries the token; both are hashed before a
// constant-time compare so that not even the token's length leaks.
func (c Checker) Check(r *http.Request) error {
	h := r.Header.Get("Authorization")
	if h == "" {
		return ErrMissing
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ErrScheme
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	if subtle.ConstantTimeCompare(got[:], c.hash[:]) != 1 {
		return ErrInvalid
	}
	return nil
}
