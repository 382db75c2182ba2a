// Package checksum computes the SHA-256 of artifacts, the one checksum
// the release catalog uses: the agent verifies it before it runs an
// artifact, the preflight before an upgrade may start.
package checksum

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
)

// File returns the hex SHA-256 of the file at path.
func File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
