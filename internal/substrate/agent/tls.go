package agent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
	"github.com/ferry-upgrade/ferry/internal/trust/tlspin"
)

// TLSMode says when the agent serves TLS.
type TLSMode int

const (
	// TLSAuto (the default) serves TLS when the agent listens beyond
	// loopback and plain HTTP on loopback, where the token never leaves
	// the host.
	TLSAuto TLSMode = iota
	// TLSOn serves TLS on any address, loopback too.
	TLSOn
	// TLSOff serves plain HTTP: on loopback, or beyond it only with
	// Config.InsecureListen.
	TLSOff
)

// The files of the certificate the agent generates, under DIR/tls.
const (
	tlsDir          = "tls"
	certFileName    = "cert.pem"
	keyFileName     = "key.pem"
	fingerprintName = "fingerprint"
	// selfSignedFor is how long a generated certificate is valid. A pin
	// does not look at the dates; a client that uses the certificate as
	// its CA (tls.ca_file) does.
	selfSignedFor = 10 * 365 * 24 * time.Hour
)

// Listening says where and how an agent serves: Config.OnListen gets
// it once the listener is open, and the agent logs it.
type Listening struct {
	// Addr is the address listened on (the real port when 0 was asked).
	Addr string
	// TLS is true when the agent serves HTTPS only.
	TLS bool
	// Fingerprint is the certificate's, "sha256:<hex>" (TLS only): what
	// a description pins as hosts[].tls.fingerprint.
	Fingerprint string
	// Generated is true when the certificate is the agent's own
	// (DIR/tls), false when it came from Config.CertFile.
	Generated bool
	// Loopback is true when the address is a loopback address.
	Loopback bool
	// Warning is set when the agent listens beyond loopback without
	// TLS; GET /v1/health reports it.
	Warning string
}

// insecureWarning is the warning of an agent listening beyond loopback
// without TLS: at start in its log and in every health answer.
const insecureWarning = "INSECURE: this agent listens beyond loopback without TLS (--insecure-listen): its bearer token, which runs any program as the agent's user, and every member's files travel in clear; serve TLS instead (drop --insecure-listen: a self-signed certificate is generated and its fingerprint printed)"

// listenTLS decides how the agent serves on the listener's address
// addr (asked for as asked) and returns the TLS configuration (nil for
// plain HTTP). Beyond loopback the default is TLS; plain HTTP there is
// refused unless InsecureListen says the operator means it.
func (s *Server) listenTLS(asked string, addr net.Addr, cfg Config) (*tls.Config, Listening, error) {
	l := Listening{Addr: addr.String()}
	shown := l.Addr
	if asked != "" && asked != l.Addr {
		shown = asked + " (" + l.Addr + ")"
	}
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		l.Loopback = true
	}
	files := cfg.CertFile != "" || cfg.KeyFile != ""
	switch {
	case files && (cfg.CertFile == "" || cfg.KeyFile == ""):
		return nil, l, errors.New("agent: TLS needs both a certificate and a key (--tls-cert and --tls-key)")
	case cfg.InsecureListen && (files || cfg.TLS == TLSOn):
		return nil, l, errors.New("agent: --insecure-listen serves plain HTTP: it cannot be combined with TLS (--tls, --tls-cert)")
	case files && cfg.TLS == TLSOff:
		return nil, l, errors.New("agent: a TLS certificate was given (--tls-cert, --tls-key) with TLS turned off: give one or the other")
	}
	useTLS := files || cfg.TLS == TLSOn || (cfg.TLS == TLSAuto && !l.Loopback && !cfg.InsecureListen)
	if !useTLS {
		if !l.Loopback {
			if !cfg.InsecureListen {
				return nil, l, fmt.Errorf("agent: refusing to listen on %s without TLS: the address is beyond loopback, so the agent's token (which runs any program as this user) would travel in clear; serve TLS there (the default: a generated certificate, or --tls-cert and --tls-key), listen on loopback (127.0.0.1) behind a tunnel, or give --insecure-listen if the network is trusted", shown)
			}
			l.Warning = insecureWarning
		}
		return nil, l, nil
	}
	var cert tls.Certificate
	var err error
	if files {
		cert, err = tlspin.LoadKeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			err = fmt.Errorf("agent: %w", err)
		}
	} else {
		cert, err = s.selfSigned(addr)
		l.Generated = true
	}
	if err != nil {
		return nil, l, err
	}
	l.TLS = true
	l.Fingerprint = tlspin.Fingerprint(cert.Certificate[0])
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, l, nil
}

// selfSigned returns the agent's own certificate, DIR/tls/cert.pem and
// key.pem, generated at the first start that needs it and kept: the
// description pins its fingerprint, so it must not change. The
// fingerprint is also written to DIR/tls/fingerprint, for scripts.
func (s *Server) selfSigned(addr net.Addr) (tls.Certificate, error) {
	dir := filepath.Join(s.dir, tlsDir)
	certFile, keyFile := filepath.Join(dir, certFileName), filepath.Join(dir, keyFileName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, fmt.Errorf("agent: %w", err)
	}
	_, certErr := os.Lstat(certFile)
	switch {
	case errors.Is(certErr, fs.ErrNotExist):
		// None yet, or a start that died before the certificate was
		// written (the key alone was never pinned by anyone): a new pair.
		if err := s.generateSelfSigned(dir, addr); err != nil {
			return tls.Certificate{}, fmt.Errorf("agent: generating its TLS certificate in %s: %w", dir, err)
		}
		s.log.Info("agent: generated a self-signed TLS certificate (ECDSA P-256)", "cert", certFile, "key", keyFile)
	case certErr != nil:
		return tls.Certificate{}, fmt.Errorf("agent: %w", certErr)
	}
	// The key is the agent's secret: refused, like its token, when
	// group or others may read it.
	kf, fi, err := safefile.Open(keyFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return tls.Certificate{}, fmt.Errorf("agent: %s exists without its key %s: remove the directory %s to generate a new pair (its fingerprint changes: update the pin in the description)", certFile, keyFile, dir)
		}
		return tls.Certificate{}, fmt.Errorf("agent: TLS key: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		kf.Close()
		return tls.Certificate{}, fmt.Errorf("agent: TLS key %s has mode %#o: it must not be readable or writable by group or others (chmod 600 %s)", keyFile, perm, keyFile)
	}
	keyPEM, err := safefile.ReadOpened(kf, keyFile, tlspin.MaxPEM, safefile.DefaultTimeout)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("agent: TLS key: %w", err)
	}
	certPEM, err := safefile.Read(certFile, tlspin.MaxPEM, safefile.DefaultTimeout)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("agent: TLS certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("agent: TLS certificate %s and key %s: %w (remove %s to generate a new pair, then update the pin)", certFile, keyFile, err, dir)
	}
	fp := tlspin.Fingerprint(cert.Certificate[0])
	if b, err := os.ReadFile(filepath.Join(dir, fingerprintName)); err != nil || string(b) != fp+"\n" {
		if err := writeTLSFile(dir, fingerprintName, []byte(fp+"\n"), 0o644); err != nil {
			return tls.Certificate{}, fmt.Errorf("agent: %w", err)
		}
	}
	return cert, nil
}

// generateSelfSigned writes a new ECDSA P-256 key (0600) and a
// self-signed certificate for it into dir. The certificate names this
// host (its host name, localhost, the loopback addresses, and the
// address listened on, or every address of the host when that is a
// wildcard), and may sign itself (a CA), so that a client may also
// trust it as its tls.ca_file instead of pinning it.
func (s *Server) generateSelfSigned(dir string, addr net.Addr) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	dns := []string{"localhost"}
	if host != "" && host != "localhost" {
		dns = append(dns, host)
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if ta, ok := addr.(*net.TCPAddr); ok {
		switch {
		case ta.IP.IsUnspecified():
			if as, err := net.InterfaceAddrs(); err == nil {
				for _, a := range as {
					if in, ok := a.(*net.IPNet); ok && !in.IP.IsLoopback() && !in.IP.IsLinkLocalUnicast() {
						ips = append(ips, in.IP)
					}
				}
			}
		case !ta.IP.IsLoopback():
			ips = append(ips, ta.IP)
		}
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "ferry agent " + host},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(selfSignedFor),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              dns,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	// The key first: a start that dies before the certificate is
	// written generates a new pair next time.
	if err := writeTLSFile(dir, keyFileName, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	if err := writeTLSFile(dir, certFileName, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return nil
}

// writeTLSFile writes one file of DIR/tls atomically (files.go).
func writeTLSFile(dir, name string, b []byte, perm os.FileMode) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return writeFileAtomic(root, name, b, perm)
}

// handleHealth answers GET /v1/health, without a token: whether the
// agent serves TLS, and the warning of one listening beyond loopback
// without it.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	h := wire.Health{OK: true}
	if l := s.listening.Load(); l != nil {
		h.TLS, h.Warning = l.TLS, l.Warning
	}
	if s.token.Check(r) == nil {
		h.Version, h.Release, h.PID = agentBuild, buildinfo.Release(), os.Getpid()
	}
	writeJSON(w, http.StatusOK, h)
}
