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

	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
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
	tok, err = read(path)
	if err != nil {
		return "", false, err
	}
	if len(tok) < MinLength {
		return "", false, fmt.Errorf("token file %s holds fewer than %d characters", path, MinLength)
	}
	return tok, created, nil
}

// maxSize bounds a token file: a token is a line.
const maxSize = 4096

// Read reads a token that another party made and that this process
// presents: the agent's (token_file of a host), the server's API token
// for the CLI, a Prometheus server's. The file must be a regular file
// (a FIFO or a device is refused at once, not waited on), of at most
// 4096 bytes, that group and others may not access, holding one word.
// Its length is the issuer's business: a wrong token gets the issuer's
// 401.
func Read(path string) (string, error) {
	return read(path)
}

func read(path string) (string, error) {
	f, fi, err := safefile.Open(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		f.Close()
		return "", fmt.Errorf("token file %s has mode %#o: it must not be readable or writable by group or others (chmod 600 %s)", path, perm, path)
	}
	if fi.Size() > maxSize {
		f.Close()
		return "", fmt.Errorf("token file %s is larger than %d bytes: not a token", path, maxSize)
	}
	b, err := safefile.ReadOpened(f, path, maxSize, safefile.DefaultTimeout)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return "", fmt.Errorf("token file %s is empty", path)
	case strings.ContainsAny(tok, " \t\r\n"):
		return "", fmt.Errorf("token file %s holds more than one word", path)
	}
	return tok, nil
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
