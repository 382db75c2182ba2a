package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
	"github.com/ferry-upgrade/ferry/internal/trust/signature"
)

// loadCheck is the verdict on one load (an artifact file): its
// checksum, then, when its release is signed, its detached signature
// against the release's public key. Both come from one read of the file.
type loadCheck struct {
	Path, Want string // the file and the catalog's sha256
	Sum        string // the file's sha256, when it could be read
	Err        error  // the file could not be read

	Signed  bool   // the release names a signing key
	SigPath string // the signature's file
	KeyPath string // the public key's file
	Key     string // the key as messages name it ("minisign key 1A2B…"), once read
	SigErr  error  // the key or signature unreadable, or the signature does not verify
}

// SumOK: the file was read and its sha256 is the catalog's.
func (l loadCheck) SumOK() bool { return l.Err == nil && strings.EqualFold(l.Sum, l.Want) }

// SigOK: the checksum holds and the signature verifies.
func (l loadCheck) SigOK() bool { return l.SumOK() && l.SigErr == nil }

func (l loadCheck) SumDetail() string {
	switch {
	case l.Err != nil:
		return l.Err.Error()
	case !l.SumOK():
		return fmt.Sprintf("%s: sha256 %s, the catalog says %s", l.Path, l.Sum, l.Want)
	}
	return l.Path + ": sha256 matches"
}

func (l loadCheck) SigDetail() string {
	switch {
	case !l.SumOK():
		return fmt.Sprintf("%s: signature %s not checked: the file is not the one the catalog lists (its checksum)", l.Path, l.SigPath)
	case l.SigErr != nil:
		return fmt.Sprintf("%s: signature %s, key %s: %v", l.Path, l.SigPath, l.KeyPath, l.SigErr)
	}
	return fmt.Sprintf("%s: signature %s verifies with the %s (%s)", l.Path, l.SigPath, l.Key, l.KeyPath)
}

// Refusal is nil when the load may be used, else why not: its file,
// and for a signature its key.
func (l loadCheck) Refusal() error {
	switch {
	case !l.SumOK():
		return errors.New(l.SumDetail())
	case l.Signed && !l.SigOK():
		return errors.New(l.SigDetail())
	}
	return nil
}

// checkLoad checks the artifact a that component comp runs at version
// (its path resolved, see artifact): sha256, then signature.
func (e *Engine) checkLoad(ctx context.Context, comp, version string, a driver.Artifact) loadCheck {
	l := loadCheck{Path: a.Path, Want: a.SHA256}
	if r := e.c.Release(version); r != nil {
		if key := e.c.SigningKeyOf(r); key != "" {
			ca, _ := r.ArtifactFor(comp)
			l.Signed, l.KeyPath, l.SigPath = true, e.c.ResolvePath(key), e.c.ResolvePath(ca.Signature)
		}
	}
	return e.loads.check(ctx, l)
}

// loads caches verdicts on loads by their files' paths, sizes and
// modification times: hashing a large artifact at every preflight would
// be slow, and a changed file (or signature, or key) is read again.
type loads struct {
	mu sync.Mutex
	m  map[string]loadEntry
}

type loadEntry struct {
	stamp string
	l     loadCheck
}

// stamp identifies the files of l as they are now ("" if one cannot
// be looked at: nothing is cached then).
func stamp(paths ...string) string {
	var b strings.Builder
	for _, p := range paths {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return ""
		}
		fmt.Fprintf(&b, "%s %d %d;", p, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

func (c *loads) check(ctx context.Context, l loadCheck) loadCheck {
	id := l.Path + "\x00" + l.Want + "\x00" + l.SigPath + "\x00" + l.KeyPath
	st := stamp(l.Path, l.SigPath, l.KeyPath)
	c.mu.Lock()
	if e, ok := c.m[id]; ok && st != "" && e.stamp == st {
		c.mu.Unlock()
		return e.l
	}
	c.mu.Unlock()
	l = verifyLoad(ctx, l)
	if st != "" && ctx.Err() == nil {
		c.mu.Lock()
		if c.m == nil {
			c.m = map[string]loadEntry{}
		}
		c.m[id] = loadEntry{stamp: st, l: l}
		c.mu.Unlock()
	}
	return l
}

// verifyLoad reads l's file once for its sha256 and, when signed, its
// signature. The key and signature files are read through safefile.
func verifyLoad(ctx context.Context, l loadCheck) loadCheck {
	var v *signature.Verifier
	if l.Signed {
		key, err := signature.ReadPublicKey(l.KeyPath)
		if err == nil {
			l.Key = key.String()
			var sig signature.Signature
			if sig, err = signature.ReadSignature(l.SigPath); err == nil {
				v, err = signature.NewVerifier(key, sig)
			}
		}
		l.SigErr = err
	}
	f, _, err := safefile.Open(l.Path)
	if err != nil {
		l.Err = err
		return l
	}
	defer f.Close()
	var tee []io.Writer
	if v != nil {
		tee = append(tee, v)
	}
	if l.Sum, _, err = checksum.Reader(ctx, f, 0, tee...); err != nil {
		l.Err = fmt.Errorf("%s: %w", l.Path, err)
		return l
	}
	if v != nil {
		l.SigErr = v.Verify()
	}
	return l
}
