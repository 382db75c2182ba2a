package config

import "testing"

// TestHostTLS is defect 7 of issue #14 as the description sees it: an
// agent beyond loopback is reached only over TLS, its certificate
// pinned (tls.fingerprint) or verified against a CA (tls.ca_file); a
// host without tls: is allowed only on loopback. The refusals failed
// (were accepted) before the fix.
func TestHostTLS(t *testing.T) {
	const (
		host1 = "  - {name: h1, agent: 127.0.0.1:7101}\n"
		fp    = "sha256:" + hexA
	)
	host := func(s string) []edit { return []edit{{host1, "  - " + s + "\n"}} }
	runTable(t, []tcase{
		{"an agent beyond loopback without tls", host("{name: h1, agent: 10.0.0.5:7101}"),
			[]string{"t.yaml:3: hosts[0].agent: 10.0.0.5:7101 is beyond loopback, where ferry speaks to an agent only over TLS (its token runs programs on the host): add tls: {fingerprint: \"sha256:…\"} to host h1 (the agent prints its certificate's fingerprint at start and writes it to its DIR/tls/fingerprint), or tls: {ca_file: PATH}"}},
		{"a host name without tls", host("{name: h1, agent: agent-1.example:7101}"),
			[]string{"t.yaml:3: hosts[0].agent: agent-1.example:7101 is beyond loopback, where ferry speaks to an agent only over TLS (its token runs programs on the host): add tls: {fingerprint: \"sha256:…\"} to host h1 (the agent prints its certificate's fingerprint at start and writes it to its DIR/tls/fingerprint), or tls: {ca_file: PATH}"}},
		{"the wildcard without tls", host("{name: h1, agent: 0.0.0.0:7101}"),
			[]string{"t.yaml:3: hosts[0].agent: 0.0.0.0:7101 is beyond loopback, where ferry speaks to an agent only over TLS (its token runs programs on the host): add tls: {fingerprint: \"sha256:…\"} to host h1 (the agent prints its certificate's fingerprint at start and writes it to its DIR/tls/fingerprint), or tls: {ca_file: PATH}"}},
		{"pinned", host(`{name: h1, agent: 10.0.0.5:7101, tls: {fingerprint: "` + fp + `"}}`), nil},
		{"pinned as openssl prints it", host(`{name: h1, agent: 10.0.0.5:7101, tls: {fingerprint: "SHA256:3F:6C:1E:4B:8A:0D:2F:9C:7E:5B:1A:3D:8F:0E:2C:4B:6A:8D:0F:1E:3C:5B:7A:9D:2F:4E:6C:8B:0A:1D:3F:5E"}}`), nil},
		{"a CA", host(`{name: h1, agent: agent-1.example:7101, tls: {ca_file: ca.pem}}`), nil},
		{"tls on loopback", host(`{name: h1, agent: 127.0.0.1:7101, tls: {fingerprint: "` + fp + `"}}`), nil},
		{"localhost without tls", host("{name: h1, agent: LocalHost:7101}"), nil},
		{"127.0.0.2 without tls", host("{name: h1, agent: 127.0.0.2:7101}"), nil},
		{"::1 without tls", host(`{name: h1, agent: "[::1]:7101"}`), nil},
		{"an IPv4-mapped loopback without tls", host(`{name: h1, agent: "[::ffff:127.0.0.1]:7101"}`), nil},
		{"both", host(`{name: h1, agent: 10.0.0.5:7101, tls: {fingerprint: "` + fp + `", ca_file: ca.pem}}`),
			[]string{"t.yaml:3: hosts[0].tls: give fingerprint or ca_file, not both: a pinned certificate needs no CA"}},
		{"neither", host(`{name: h1, agent: 10.0.0.5:7101, tls: {}}`),
			[]string{"t.yaml:3: hosts[0].tls: give fingerprint: \"sha256:…\" (the agent prints it at start and writes it to its DIR/tls/fingerprint) or ca_file: PATH (the CA that signed the agent's certificate)"}},
		{"a sum without its prefix", host(`{name: h1, agent: 10.0.0.5:7101, tls: {fingerprint: "` + hexA + `"}}`),
			[]string{"t.yaml:3: hosts[0].tls.fingerprint: \"3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e\" is not a fingerprint: write sha256: followed by the 64 hex digits of the certificate's SHA-256 (the agent prints it at start and writes it to DIR/tls/fingerprint)"}},
		{"a short fingerprint", host(`{name: h1, agent: 10.0.0.5:7101, tls: {fingerprint: "sha256:abcd"}}`),
			[]string{"t.yaml:3: hosts[0].tls.fingerprint: \"sha256:abcd\" is not a fingerprint: 4 hex digits after sha256:, want 64"}},
		{"a misspelt key", host(`{name: h1, agent: 10.0.0.5:7101, tls: {fingerprnt: "` + fp + `"}}`),
			[]string{"t.yaml:3: hosts[0].tls.fingerprnt: unknown key (did you mean fingerprint?); known keys: fingerprint, ca_file"}},
	})
}

// TestHostTLSNormalised: a fingerprint written as openssl prints it is
// kept in the one form the driver compares.
func TestHostTLSNormalised(t *testing.T) {
	src := edited(t, edit{"  - {name: h1, agent: 127.0.0.1:7101}\n",
		`  - {name: h1, agent: "[::1]:7101", tls: {fingerprint: "SHA256:3F:6C:1E:4B:8A:0D:2F:9C:7E:5B:1A:3D:8F:0E:2C:4B:6A:8D:0F:1E:3C:5B:7A:9D:2F:4E:6C:8B:0A:1D:3F:5E"}}` + "\n"})
	c, err := Parse([]byte(src), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Hosts[0].TLS.Fingerprint; got != "sha256:"+hexA {
		t.Errorf("fingerprint %q, want sha256:%s", got, hexA)
	}
}
