package tlspin

import (
	"crypto/tls"
	"fmt"

	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// MaxPEM bounds a certificate or key file: a chain is a few KiB.
const MaxPEM = 1 << 20

// LoadKeyPair reads the certificate and key a server of ferry's (the
// agent, ferry server) is told to serve (--tls-cert, --tls-key) as
// every file a user names is read: a FIFO or a device there must not
// hang the start.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := safefile.Read(certFile, MaxPEM, safefile.DefaultTimeout)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--tls-cert: %w", err)
	}
	keyPEM, err := safefile.Read(keyFile, MaxPEM, safefile.DefaultTimeout)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--tls-key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return cert, nil
}
