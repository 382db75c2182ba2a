package tlspin

import (
	"crypto/tls"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	hex := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	colons := strings.ToUpper(hex[:2])
	for i := 2; i < len(hex); i += 2 {
		colons += ":" + strings.ToUpper(hex[i:i+2])
	}
	for _, c := range []struct {
		in, want, err string
	}{
		{"sha256:" + hex, "sha256:" + hex, ""},
		{"SHA256:" + strings.ToUpper(hex), "sha256:" + hex, ""},
		{"sha256:" + colons, "sha256:" + hex, ""},
		{"  sha256:" + hex + "\n", "sha256:" + hex, ""},
		{hex, "", "write sha256: followed by"},
		{"sha1:" + hex[:40], "", "write sha256:"},
		{"sha256:" + hex[:62], "", "62 hex digits"},
		{"sha256:" + hex + "00", "", "66 hex digits"},
		{"sha256:" + strings.Repeat("g", 64), "", "hex digits only"},
		{"", "", "not a fingerprint"},
		{"sha256:", "", "0 hex digits"},
	} {
		got, err := Parse(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q) = %q, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// TestPinned: a client pinning a server's certificate reaches it; one
// pinning another fingerprint is refused with a PinError naming both.
func TestPinned(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	fp := Fingerprint(srv.Certificate().Raw)
	get := func(pin string) error {
		cfg, err := Pinned(pin)
		if err != nil {
			return err
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		defer c.CloseIdleConnections()
		resp, err := c.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(strings.ToUpper(fp)); err != nil {
		t.Errorf("the right pin: %v", err)
	}
	other := "sha256:" + strings.Repeat("ab", 32)
	err := get(other)
	var pe *PinError
	if !errors.As(err, &pe) || pe.Got != fp || pe.Want != other || !strings.Contains(err.Error(), "DIR/tls/fingerprint") {
		t.Errorf("a wrong pin: %v", err)
	}
	if _, err := Pinned("nope"); err == nil {
		t.Errorf("a malformed pin was accepted")
	}
	if _, err := WithCA([]byte("not PEM")); err == nil {
		t.Errorf("a CA without a certificate was accepted")
	}
	// The system's roots do not know httptest's certificate.
	cfg, _ := WithCA(pemOf(srv.Certificate().Raw))
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	defer c.CloseIdleConnections()
	if resp, err := c.Get(srv.URL); err != nil {
		t.Errorf("its own certificate as the CA: %v", err)
	} else {
		resp.Body.Close()
	}
	var ve *tls.CertificateVerificationError
	c2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}
	defer c2.CloseIdleConnections()
	if _, err := c2.Get(srv.URL); !errors.As(err, &ve) {
		t.Errorf("the system's roots: %v", err)
	}
}

func pemOf(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
