package ssh

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	gossh "golang.org/x/crypto/ssh"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"golang.org/x/crypto/ssh/knownhosts"
)

// HostKeyError is a host whose key is not the one its known_hosts file
// holds for it (Known lists what the file has, empty when it has none):
// ferry stops before it touches any member, naming the host and both
// fingerprints. It is a refusal, not an outage: it is never retried
// into success and never taken for a host that does not answer.
type HostKeyError struct {
	Host, Addr string
	// File is the known_hosts file.
	File string
	// Presented is the fingerprint (SHA256:...) and type of the key the
	// host presented.
	Presented, PresentedType string
	// Known are the keys the file holds for the host: fingerprint,
	// type, and the line.
	Known []KnownKey
}

// KnownKey is one key a known_hosts file holds for a host.
type KnownKey struct {
	Fingerprint, Type string
	Line              int
}

// Unwrap makes a host key refused a driver.ErrNotTrusted: the engine
// stops on it rather than waiting as for a host that does not answer.
func (e *HostKeyError) Unwrap() error { return driver.ErrNotTrusted }

func (e *HostKeyError) Error() string {
	if len(e.Known) == 0 {
		return fmt.Sprintf("ssh host %s (%s): its key is unknown: %s has no key for it, and it presented %s (%s); if that is the host's key (checked out of band: ssh-keygen -lf on the host's public key), add the host's line to %s. Nothing is done on the host until then",
			e.Host, e.Addr, e.File, e.Presented, e.PresentedType, e.File)
	}
	var known []string
	for _, k := range e.Known {
		known = append(known, fmt.Sprintf("%s (%s, line %d)", k.Fingerprint, k.Type, k.Line))
	}
	return fmt.Sprintf("ssh host %s (%s): its key CHANGED: %s holds %s, and it presented %s (%s); someone may be in the middle, or the host was reinstalled: check the new key out of band before you replace its line in %s. Nothing is done on the host until then",
		e.Host, e.Addr, e.File, strings.Join(known, ", "), e.Presented, e.PresentedType, e.File)
}

// hostKeyCheck returns the callback that checks a host's key against
// the known_hosts file (read now), and the key algorithms to ask the
// host for: those of the keys the file holds for it, so that a host
// with several keys presents one the file knows.
func hostKeyCheck(h Host) (gossh.HostKeyCallback, []string, error) {
	if h.KnownHosts == "" {
		return nil, nil, fmt.Errorf("ssh host %s: no known_hosts file: ferry never accepts a host key it cannot check", h.Name)
	}
	cb, err := knownhosts.New(h.KnownHosts)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh host %s: known_hosts %s: %w", h.Name, h.KnownHosts, err)
	}
	check := func(hostname string, remote net.Addr, key gossh.PublicKey) error {
		err := cb(hostname, remote, key)
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			he := &HostKeyError{Host: h.Name, Addr: h.Addr, File: h.KnownHosts, Presented: gossh.FingerprintSHA256(key), PresentedType: key.Type()}
			for _, k := range ke.Want {
				he.Known = append(he.Known, KnownKey{Fingerprint: gossh.FingerprintSHA256(k.Key), Type: k.Key.Type(), Line: k.Line})
			}
			return he
		}
		return err
	}
	return check, knownAlgorithms(cb, h.Addr), nil
}

// knownAlgorithms asks the callback about a key no file holds, to learn
// from its refusal which keys the file has for addr, and returns their
// algorithms (an RSA key is asked for with SHA-2 signatures).
func knownAlgorithms(cb gossh.HostKeyCallback, addr string) []string {
	pub, err := gossh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))
	if err != nil {
		return nil
	}
	var ke *knownhosts.KeyError
	if !errors.As(cb(addr, &net.TCPAddr{}, pub), &ke) {
		return nil
	}
	var algs []string
	for _, k := range ke.Want {
		t := k.Key.Type()
		if t == gossh.KeyAlgoRSA {
			algs = append(algs, gossh.KeyAlgoRSASHA512, gossh.KeyAlgoRSASHA256)
		}
		if !slices.Contains(algs, t) {
			algs = append(algs, t)
		}
	}
	return algs
}
