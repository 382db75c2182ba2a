package cli

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

var agentTLS = regexp.MustCompile(`agent listening.* addr=(127\.0\.0\.1:\d+).* tls=true fingerprint=(sha256:[0-9a-f]{64})`)

// TestAgentTLSThroughTheDescription: 'ferry agent --tls' serves its own
// certificate and prints its fingerprint; a description pinning it
// reaches the agent ('ferry members'), one pinning another fingerprint
// and one without tls: are refused with what to fix (issue #14,
// defect 7).
func TestAgentTLSThroughTheDescription(t *testing.T) {
	dir := t.TempDir()
	agentDir := filepath.Join(dir, "agent")
	tokenFile := filepath.Join(dir, "agent-token")
	cmd := ferryCmd("", "agent", "--listen", "127.0.0.1:0", "--tls", "--dir", agentDir, "--token-file", tokenFile)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		wait(t, 20*time.Second, cmd)
	})
	var addr, fp string
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if m := agentTLS.FindStringSubmatch(sc.Text()); m != nil {
			addr, fp = m[1], m[2]
			break
		}
	}
	if addr == "" {
		t.Fatalf("the agent did not say where it listens with which fingerprint:\n%s", log.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	if b, err := os.ReadFile(filepath.Join(agentDir, "tls", "fingerprint")); err != nil || strings.TrimSpace(string(b)) != fp {
		t.Errorf("DIR/tls/fingerprint: %q %v, want %s", b, err, fp)
	}

	for _, c := range []struct {
		name, tls string
		code      int
		says      string
	}{
		{"pinned", `, tls: {fingerprint: "` + strings.ToUpper(fp) + `"}`, 0, "app-1"},
		{"another pin", `, tls: {fingerprint: "sha256:` + strings.Repeat("ab", 32) + `"}`, 1, "not the pinned sha256:" + strings.Repeat("ab", 32)},
		{"no tls", "", 1, "the agent speaks HTTPS, and this host has no tls: in the description"},
		{"a CA file that is not PEM", `, tls: {ca_file: "` + tokenFile + `"}`, 1, "tls.ca_file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := t.TempDir()
			file := descriptionWith(t, d, addr, `, token_file: "`+tokenFile+`"`+c.tls)
			r := run(t, 30*time.Second, ferryCmd("", "-f", file, "--data-dir", filepath.Join(d, "data"), "members"))
			if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.says) {
				t.Errorf("members: exit %d, stdout %q, stderr %q; want exit %d saying %q", r.code, r.stdout, r.stderr, c.code, c.says)
			}
		})
	}
}

// TestAgentRefusesPlainBeyondLoopback: 'ferry agent' beyond loopback
// without TLS exits at once naming --insecure-listen; with it, it
// serves and warns.
func TestAgentRefusesPlainBeyondLoopback(t *testing.T) {
	dir := t.TempDir()
	r := run(t, 10*time.Second, ferryCmd("", "agent", "--listen", "0.0.0.0:0", "--tls=false", "--dir", filepath.Join(dir, "a")))
	if r.code != 1 || !strings.Contains(r.stderr, "refusing to listen on 0.0.0.0:") || !strings.Contains(r.stderr, "--insecure-listen") {
		t.Errorf("agent --tls=false beyond loopback: exit %d, stderr %q", r.code, r.stderr)
	}

	cmd := ferryCmd("", "agent", "--listen", "0.0.0.0:0", "--insecure-listen", "--dir", filepath.Join(dir, "b"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		wait(t, 20*time.Second, cmd)
	}()
	sc := bufio.NewScanner(stderr)
	var log strings.Builder
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "level=WARN") && strings.Contains(sc.Text(), "INSECURE") {
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return
		}
	}
	t.Errorf("no warning of an insecure listener:\n%s", log.String())
}
