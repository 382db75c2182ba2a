package agent

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

// loadToken reads the bearer token from path, or creates the file
// with a fresh random token (32 bytes, hex) and mode 0600 if it does
// not exist. An existing file that group or others may access is
// refused: the token would not be a secret.
func loadToken(path string) (string, error) {
	for attempt := 0; ; attempt++ {
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) && attempt == 0 {
			if err := createToken(path); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", err
			}
			continue // read what was written (by us or a racing agent)
		}
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return "", fmt.Errorf("token file %s is not a regular file", path)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			return "", fmt.Errorf("token file %s has mode %#o: it must not be readable or writable by group or others (chmod 600 %s)", path, perm, path)
		}
		b := make([]byte, 4097)
		n, _ := f.Read(b)
		if n > 4096 {
			return "", fmt.Errorf("token file %s is larger than 4096 bytes", path)
		}
		tok := strings.TrimSpace(string(b[:n]))
		if tok == "" {
			return "", fmt.Errorf("token file %s is empty", path)
		}
		if strings.ContainsAny(tok, " \t\r\n") {
			return "", fmt.Errorf("token file %s holds more than one word", path)
		}
		return tok, nil
	}
}

func createToken(path string) error {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return fmt.Errorf("token: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
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

// tokenOK compares the request's bearer token with the agent's in
// constant time (hashing both first so that not even the length of
// the token leaks).
func tokenOK(r *http.Request, want [sha256.Size]byte) bool {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}
