package ssh

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// maxKeyFile bounds a private key file (an RSA 16384 key is some KiB).
const maxKeyFile = 64 << 10

// readIdentity reads a private key file: only its owner may read it
// (like ssh, ferry refuses a key others can read), and it must not be
// encrypted (ferry asks for no passphrase: an encrypted key belongs
// in an SSH agent).
func readIdentity(path string) (gossh.Signer, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable or writable by others (mode %04o): a private key must be the owner's alone (chmod 600 %s)", path, perm, path)
	}
	b, err := safefile.Read(path, maxKeyFile, safefile.DefaultTimeout)
	if err != nil {
		return nil, err
	}
	s, err := gossh.ParsePrivateKey(b)
	var pe *gossh.PassphraseMissingError
	if errors.As(err, &pe) {
		return nil, fmt.Errorf("%s is encrypted: ferry asks for no passphrase; load it into an SSH agent (ssh-add) and run ferry with SSH_AUTH_SOCK", path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: not a private key ferry can use: %w", path, err)
	}
	return s, nil
}

// agentKeys returns the keys of the SSH agent at $SSH_AUTH_SOCK and
// the connection to it, which signs with them and must stay open until
// the handshake is done (nil, nil when no agent runs). The agent holds
// the keys; ferry never sees them.
func agentKeys() ([]gossh.Signer, io.Closer, error) {
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil, nil, nil
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, nil, fmt.Errorf("the SSH agent at SSH_AUTH_SOCK: %w", err)
	}
	signers, err := agent.NewClient(c).Signers()
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("the SSH agent at SSH_AUTH_SOCK: %w", err)
	}
	return signers, c, nil
}
