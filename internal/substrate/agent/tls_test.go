package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/agenttest"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
	"github.com/ferry-upgrade/ferry/internal/trust/tlspin"
)

// served is an agent run by Serve in this process.
type served struct {
	l     Listening
	log   *agenttest.LockedBuffer
	token string
	stop  func() error
}

// serve runs Serve(addr, cfg) until the test ends and returns how it
// listens; it fails the test if Serve returns before it listens.
func serve(t *testing.T, addr string, cfg Config) *served {
	t.Helper()
	sv, err := tryServe(t, addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sv
}

// tryServe is serve, returning Serve's error if it did not listen.
func tryServe(t *testing.T, addr string, cfg Config) (*served, error) {
	t.Helper()
	sv := &served{log: &agenttest.LockedBuffer{}}
	if cfg.TokenFile == "" {
		cfg.TokenFile = filepath.Join(cfg.Dir, "token")
	}
	cfg.Logger = slog.New(slog.NewTextHandler(sv.log, nil))
	listening := make(chan Listening, 1)
	cfg.OnListen = func(l Listening) { listening <- l }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, addr, cfg) }()
	select {
	case sv.l = <-listening:
	case err := <-done:
		cancel()
		return nil, err
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("Serve did not listen within 30s")
	}
	var once bool
	var serr error
	sv.stop = func() error {
		if !once {
			once = true
			cancel()
			serr = <-done
		}
		return serr
	}
	t.Cleanup(func() {
		if err := sv.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	b, err := os.ReadFile(cfg.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	sv.token = strings.TrimSpace(string(b))
	return sv, nil
}

// dialAddr is where to reach an agent listening on l.Addr (a wildcard
// is reached on loopback).
func (sv *served) dialAddr() string {
	host, port, _ := net.SplitHostPort(sv.l.Addr)
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return sv.l.Addr
}

// get GETs path with the token through a client of cfg (nil: plain
// HTTP) and returns the status and body.
func (sv *served) get(t *testing.T, cfg *tls.Config, path string) (int, []byte, error) {
	t.Helper()
	scheme := "http://"
	if cfg != nil {
		scheme = "https://"
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest("GET", scheme+sv.dialAddr()+path, nil)
	req.Header.Set("Authorization", "Bearer "+sv.token)
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func health(t *testing.T, b []byte) wire.Health {
	t.Helper()
	var h wire.Health
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatalf("health %s: %v", b, err)
	}
	return h
}

// TestServeTLSGenerated: with TLS asked on loopback, the agent
// generates a self-signed pair into DIR/tls (key 0600), prints and
// writes its fingerprint, serves HTTPS only, and keeps the same pair
// at its next start; a client pinning that fingerprint gets in, one
// pinning another does not, nor does a plain-HTTP client.
func TestServeTLSGenerated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sv := serve(t, "127.0.0.1:0", Config{Dir: dir, TLS: TLSOn})
	l := sv.l
	if !l.TLS || !l.Generated || !l.Loopback || l.Warning != "" {
		t.Fatalf("listening: %+v", l)
	}
	if _, err := tlspin.Parse(l.Fingerprint); err != nil || !strings.HasPrefix(l.Fingerprint, "sha256:") {
		t.Fatalf("fingerprint %q: %v", l.Fingerprint, err)
	}
	key, err := os.Stat(filepath.Join(dir, "tls", "key.pem"))
	if err != nil || key.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", key, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "tls", "fingerprint")); err != nil || string(b) != l.Fingerprint+"\n" {
		t.Errorf("fingerprint file %q (%v), want %q", b, err, l.Fingerprint)
	}
	certPEM, _ := os.ReadFile(filepath.Join(dir, "tls", "cert.pem"))
	blk, _ := pem.Decode(certPEM)
	if blk == nil || tlspin.Fingerprint(blk.Bytes) != l.Fingerprint {
		t.Errorf("the fingerprint is not cert.pem's")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || cert.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("key algorithm %v", cert.PublicKeyAlgorithm)
	}
	if log := sv.log.String(); !strings.Contains(log, l.Fingerprint) || !strings.Contains(log, "pin it in the description") {
		t.Errorf("the start log does not print the fingerprint and where it goes: %s", log)
	}

	pinned, _ := tlspin.Pinned(l.Fingerprint)
	code, body, err := sv.get(t, pinned, "/v1/health")
	if err != nil || code != 200 || !health(t, body).TLS {
		t.Fatalf("health over TLS: %d %s %v", code, body, err)
	}
	if code, body, err := sv.get(t, pinned, "/v1/members"); err != nil || code != 200 {
		t.Errorf("members over TLS: %d %s %v", code, body, err)
	}
	wrong, _ := tlspin.Pinned("sha256:" + strings.Repeat("0", 64))
	_, _, err = sv.get(t, wrong, "/v1/health")
	var pe *tlspin.PinError
	if !errors.As(err, &pe) || pe.Got != l.Fingerprint || !strings.Contains(err.Error(), "not the pinned") {
		t.Errorf("a wrong pin: %v", err)
	}
	code, body, err = sv.get(t, nil, "/v1/health")
	if err != nil || code != 400 || !strings.Contains(string(body), "HTTPS") {
		t.Errorf("plain HTTP to the TLS agent: %d %s %v", code, body, err)
	}

	// The next start keeps the pair: the pin in the description holds.
	if err := sv.stop(); err != nil {
		t.Fatal(err)
	}
	again := serve(t, "127.0.0.1:0", Config{Dir: dir, TLS: TLSOn})
	if again.l.Fingerprint != l.Fingerprint {
		t.Errorf("the fingerprint changed at the next start: %s, then %s", l.Fingerprint, again.l.Fingerprint)
	}
	if strings.Contains(again.log.String(), "generated") {
		t.Errorf("a new pair was generated: %s", again.log.String())
	}
	if err := again.stop(); err != nil {
		t.Fatal(err)
	}

	// A key others may read is refused, naming the fix.
	os.Chmod(filepath.Join(dir, "tls", "key.pem"), 0o644)
	if _, err := tryServe(t, "127.0.0.1:0", Config{Dir: dir, TLS: TLSOn}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a key readable by others: %v", err)
	}
	os.Chmod(filepath.Join(dir, "tls", "key.pem"), 0o600)
	// A certificate without its key: what to do.
	os.Remove(filepath.Join(dir, "tls", "key.pem"))
	if _, err := tryServe(t, "127.0.0.1:0", Config{Dir: dir, TLS: TLSOn}); err == nil || !strings.Contains(err.Error(), "without its key") {
		t.Errorf("a certificate without its key: %v", err)
	}
}

// TestServeBeyondLoopback: beyond loopback the agent serves TLS by
// default (a generated certificate); plain HTTP there is refused
// unless --insecure-listen, and then it warns in its log and in every
// health answer.
func TestServeBeyondLoopback(t *testing.T) {
	t.Parallel()
	_, err := tryServe(t, "0.0.0.0:0", Config{Dir: t.TempDir(), TLS: TLSOff})
	if err == nil || !strings.Contains(err.Error(), "refusing to listen") || !strings.Contains(err.Error(), "--insecure-listen") ||
		!strings.Contains(err.Error(), "beyond loopback") {
		t.Errorf("plain HTTP beyond loopback: %v", err)
	}

	sv := serve(t, "0.0.0.0:0", Config{Dir: t.TempDir()})
	if !sv.l.TLS || !sv.l.Generated || sv.l.Loopback {
		t.Errorf("the default beyond loopback: %+v", sv.l)
	}
	pinned, _ := tlspin.Pinned(sv.l.Fingerprint)
	if code, body, err := sv.get(t, pinned, "/v1/members"); err != nil || code != 200 {
		t.Errorf("members: %d %s %v", code, body, err)
	}

	insecure := serve(t, "0.0.0.0:0", Config{Dir: t.TempDir(), InsecureListen: true})
	if insecure.l.TLS || insecure.l.Warning == "" {
		t.Errorf("--insecure-listen: %+v", insecure.l)
	}
	code, body, err := insecure.get(t, nil, "/v1/health")
	if h := health(t, body); err != nil || code != 200 || h.TLS || !strings.Contains(h.Warning, "INSECURE") {
		t.Errorf("health of an insecure agent: %d %s %v", code, body, err)
	}
	if log := insecure.log.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, "INSECURE") || strings.Contains(log, insecure.token) {
		t.Errorf("the insecure agent's log: %s", log)
	}

	// On loopback, plain HTTP is the default, and not a warning.
	plain := serve(t, "127.0.0.1:0", Config{Dir: t.TempDir()})
	code, body, _ = plain.get(t, nil, "/v1/health")
	if h := health(t, body); code != 200 || h.TLS || h.Warning != "" || plain.l.TLS {
		t.Errorf("loopback health: %d %s", code, body)
	}
}

// TestServeCertFiles: with --tls-cert and --tls-key the agent serves
// that certificate; a client verifying it against its CA gets in, one
// with another CA does not.
func TestServeCertFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caPEM, certFile, keyFile := certs(t)
	sv := serve(t, "127.0.0.1:0", Config{Dir: filepath.Join(dir, "agent"), CertFile: certFile, KeyFile: keyFile})
	if !sv.l.TLS || sv.l.Generated {
		t.Fatalf("listening: %+v", sv.l)
	}
	if _, err := os.Stat(filepath.Join(dir, "agent", "tls")); !os.IsNotExist(err) {
		t.Errorf("a pair was generated although one was given: %v", err)
	}
	good, err := tlspin.WithCA(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	if code, body, err := sv.get(t, good, "/v1/members"); err != nil || code != 200 {
		t.Errorf("with the right CA: %d %s %v", code, body, err)
	}
	other, _, _ := certs(t)
	bad, _ := tlspin.WithCA(other)
	_, _, err = sv.get(t, bad, "/v1/health")
	var ve *tls.CertificateVerificationError
	if !errors.As(err, &ve) {
		t.Errorf("with another CA: %v", err)
	}
}

// TestListenTLSDecisions: how each combination of settings serves on
// loopback and beyond it.
func TestListenTLSDecisions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, cert, key := certs(t)
	s, err := New(Config{Dir: filepath.Join(dir, "agent")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lo := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7101}
	lo6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 7101}
	wild := &net.TCPAddr{IP: net.IPv4zero, Port: 7101}
	lan := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 7101}
	for _, c := range []struct {
		name      string
		addr      net.Addr
		cfg       Config
		tls, warn bool
		err       string
	}{
		{"loopback: plain", lo, Config{}, false, false, ""},
		{"loopback v6: plain", lo6, Config{}, false, false, ""},
		{"loopback: --tls", lo, Config{TLS: TLSOn}, true, false, ""},
		{"loopback: files", lo, Config{CertFile: cert, KeyFile: key}, true, false, ""},
		{"loopback: --insecure-listen is moot", lo, Config{InsecureListen: true}, false, false, ""},
		{"wildcard: TLS", wild, Config{}, true, false, ""},
		{"lan: TLS", lan, Config{}, true, false, ""},
		{"lan: files", lan, Config{CertFile: cert, KeyFile: key}, true, false, ""},
		{"lan: --tls=false refused", lan, Config{TLS: TLSOff}, false, false, "refusing to listen on 10.1.2.3:7101 without TLS"},
		{"wildcard: --tls=false refused", wild, Config{TLS: TLSOff}, false, false, "--insecure-listen"},
		{"lan: --insecure-listen", lan, Config{InsecureListen: true}, false, true, ""},
		{"lan: --insecure-listen --tls=false", lan, Config{InsecureListen: true, TLS: TLSOff}, false, true, ""},
		{"--insecure-listen with --tls", lan, Config{InsecureListen: true, TLS: TLSOn}, false, false, "cannot be combined"},
		{"--insecure-listen with files", lo, Config{InsecureListen: true, CertFile: cert, KeyFile: key}, false, false, "cannot be combined"},
		{"files with --tls=false", lo, Config{TLS: TLSOff, CertFile: cert, KeyFile: key}, false, false, "give one or the other"},
		{"a certificate without a key", lo, Config{CertFile: cert}, false, false, "both a certificate and a key"},
		{"a key without a certificate", lan, Config{KeyFile: key}, false, false, "both a certificate and a key"},
		{"a FIFO for a certificate", lo, Config{CertFile: "/dev/zero", KeyFile: key}, false, false, "--tls-cert: /dev/zero"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, l, err := s.listenTLS("", c.addr, c.cfg)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (cfg != nil) != c.tls || l.TLS != c.tls || (l.Warning != "") != c.warn {
				t.Errorf("tls %v (listening %+v), want tls %v warning %v", cfg != nil, l, c.tls, c.warn)
			}
		})
	}
}

// certs makes a test CA and a certificate for 127.0.0.1 it signed, in
// a directory of the test.
func certs(t *testing.T) (caPEM []byte, certFile, keyFile string) {
	t.Helper()
	caPEM, certFile, keyFile, err := agenttest.Certs(t.TempDir(), net.IPv4(127, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	return caPEM, certFile, keyFile
}
