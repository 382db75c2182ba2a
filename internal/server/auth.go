package server

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

// TokenFile is the API token's file name in the data directory.
const TokenFile = "api-token"

// LoadOrCreateToken reads the API's bearer token from path, or, at the
// first start, creates the file with a fresh random token (32 bytes,
// hex) and mode 0600. An existing file that group or others may access
// is refused: the token would not be a secret. created tells whether
// this call made it. The token itself is never logged.
func LoadOrCreateToken(path string) (tok string, created bool, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("server: token file: %w", err)
	}
	err = createToken(path)
	switch {
	case err == nil:
		created = true
	case !errors.Is(err, fs.ErrExist):
		return "", false, err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false, fmt.Errorf("server: token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", false, fmt.Errorf("server: token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", false, fmt.Errorf("server: token file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", false, fmt.Errorf("server: token file %s has mode %#o: it must not be readable or writable by group or others (chmod 600 %s)", path, perm, path)
	}
	b := make([]byte, 4097)
	n, _ := f.Read(b)
	if n > 4096 {
		return "", false, fmt.Errorf("server: token file %s is larger than 4096 bytes", path)
	}
	tok = strings.TrimSpace(string(b[:n]))
	switch {
	case len(tok) < 16:
		return "", false, fmt.Errorf("server: token file %s holds fewer than 16 characters", path)
	case strings.ContainsAny(tok, " \t\r\n"):
		return "", false, fmt.Errorf("server: token file %s holds more than one word", path)
	}
	return tok, created, nil
}

func createToken(path string) error {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return fmt.Errorf("server: token: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("server: token file: %w", err)
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
		return fmt.Errorf("server: token file: %w", err)
	}
	return nil
}

// authorized compares the request's bearer token with the server's in
// constant time; both are hashed first so that not even the token's
// length leaks through timing.
func (s *Server) authorized(r *http.Request) *apiError {
	h := r.Header.Get("Authorization")
	if h == "" {
		return errf(http.StatusUnauthorized, CodeUnauthorized, "missing bearer token: send 'Authorization: Bearer <token>' with the token from the server's data directory (%s)", TokenFile)
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return errf(http.StatusUnauthorized, CodeUnauthorized, "the Authorization header must be 'Bearer <token>'")
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	if subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) != 1 {
		return errf(http.StatusUnauthorized, CodeUnauthorized, "invalid bearer token")
	}
	return nil
}
