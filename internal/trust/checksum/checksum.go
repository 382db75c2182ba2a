// Package checksum computes the SHA-256 of artifacts, the one checksum
// the release catalog uses: the agent verifies it before it runs an
// artifact, the preflight before an upgrade may start, the server when
// a release is imported or an artifact uploaded.
package checksum

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// ErrTooLarge is returned by Reader for more than its limit.
var ErrTooLarge = errors.New("checksum: more bytes than allowed")

// File returns the hex SHA-256 of the regular file at path. Anything
// else (a FIFO, a device such as /dev/zero, a directory) is refused at
// once: hashing it would block or never end.
func File(path string) (string, error) {
	return FileContext(context.Background(), path)
}

// FileContext is File, giving up when ctx ends.
func FileContext(ctx context.Context, path string) (string, error) {
	f, _, err := safefile.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum, _, err := Reader(ctx, f, 0)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return sum, nil
}

// chunk is how much is hashed between two looks at the context: about
// a millisecond of SHA-256.
const chunk = 1 << 20

// Reader returns the hex SHA-256 of what r yields to its end and how
// many bytes that was, giving up when ctx ends (its error) or, when
// limit > 0, once more than limit bytes came (ErrTooLarge). w, if not
// nil, gets every byte too (an upload written while it is hashed).
func Reader(ctx context.Context, r io.Reader, limit int64, w ...io.Writer) (sum string, n int64, err error) {
	h := sha256.New()
	dst := io.Writer(h)
	if len(w) > 0 && w[0] != nil {
		dst = io.MultiWriter(h, w[0])
	}
	buf := make([]byte, 64<<10)
	for {
		if err := ctx.Err(); err != nil {
			return "", n, context.Cause(ctx)
		}
		max := int64(chunk)
		if limit > 0 && limit+1-n < max {
			max = limit + 1 - n
		}
		m, err := io.CopyBuffer(dst, io.LimitReader(r, max), buf)
		n += m
		if err != nil {
			return "", n, err
		}
		if limit > 0 && n > limit {
			return "", n, ErrTooLarge
		}
		if m < max {
			return hex.EncodeToString(h.Sum(nil)), n, nil
		}
	}
}
