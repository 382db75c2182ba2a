package process

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/agenttest"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// startServed runs a real agent with agent.Serve (TLS as cfg says) in
// this process until the test ends, and returns it as a Host without
// TLS settings, and how it listens.
func startServed(t *testing.T, name string, cfg agent.Config) (testHost, agent.Listening) {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	log := &agenttest.LockedBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
	listening := make(chan agent.Listening, 1)
	cfg.OnListen = func(l agent.Listening) { listening <- l }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Serve(ctx, "127.0.0.1:0", cfg) }()
	var l agent.Listening
	select {
	case l = <-listening:
	case err := <-done:
		cancel()
		t.Fatalf("agent: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("the agent did not listen within 30s")
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
		agenttest.KillUnder(cfg.Dir)
	})
	tok, err := os.ReadFile(filepath.Join(cfg.Dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	return testHost{Host: Host{Name: name, Addr: l.Addr, Token: strings.TrimSpace(string(tok))}, dir: cfg.Dir, log: log}, l
}

// TestTLSAgentPinned: the driver reaches an agent serving its own
// certificate through the pin (Start uploads and starts over TLS,
// Observe, Health, Logs); a wrong pin, or no TLS at all, is refused
// with what to fix, and not taken for an agent that is away.
func TestTLSAgentPinned(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	h, l := startServed(t, "h1", agent.Config{TLS: agent.TLSOn})
	pinned := h.Host
	pinned.Fingerprint = l.Fingerprint
	d := New([]Host{pinned})
	ctx := context.Background()
	m := member("db", "h1", tag)
	if err := d.Health(ctx, "h1"); err != nil {
		t.Fatalf("Health: %v", err)
	}
	if err := d.Start(ctx, m, artifact(p.V1)); err != nil {
		t.Fatalf("Start over TLS: %v", err)
	}
	sts, err := d.Observe(ctx, []driver.Member{m})
	if err != nil || !sts[0].Running || sts[0].Version != "1.0.0" {
		t.Fatalf("Observe over TLS: %+v %v", sts, err)
	}
	if _, err := d.Logs(ctx, m, false, 10); err != nil {
		t.Errorf("Logs over TLS: %v", err)
	}

	wrong := h.Host
	wrong.Fingerprint = "sha256:" + strings.Repeat("0", 64)
	dw := New([]Host{wrong})
	err = dw.Health(ctx, "h1")
	if err == nil || errors.Is(err, driver.ErrUnreachable) || !strings.Contains(err.Error(), "not the pinned") ||
		!strings.Contains(err.Error(), l.Fingerprint) || !strings.Contains(err.Error(), "host h1") {
		t.Errorf("Health with a wrong pin: %v", err)
	}
	if sts, err := dw.Observe(ctx, []driver.Member{m}); err == nil {
		t.Errorf("Observe with a wrong pin: %+v", sts)
	}
	if err := dw.Start(ctx, member("other", "h1", tag), artifact(p.V1)); err == nil || errors.Is(err, driver.ErrUnreachable) {
		t.Errorf("Start with a wrong pin: %v", err)
	}

	plain := New([]Host{h.Host}) // no tls: in the description
	err = plain.Health(ctx, "h1")
	if err == nil || errors.Is(err, driver.ErrUnreachable) || !strings.Contains(err.Error(), "speaks HTTPS") ||
		!strings.Contains(err.Error(), "tls: {fingerprint") {
		t.Errorf("plain HTTP against the TLS agent: %v", err)
	}

	bad := h.Host
	bad.Fingerprint = "sha256:xyz"
	if err := New([]Host{bad}).Health(ctx, "h1"); err == nil || !strings.Contains(err.Error(), "host h1: TLS") {
		t.Errorf("a malformed pin: %v", err)
	}
	if live := agenttest.Tagged(tag); len(live) != 1 {
		t.Errorf("live members %v, want the one started through the right pin", live)
	}
}

// TestTLSAgentCA: an agent serving a certificate of a CA is reached by
// a driver given that CA, and refused by one given another; a pinned
// driver is refused by an agent serving plain HTTP.
func TestTLSAgentCA(t *testing.T) {
	t.Parallel()
	caPEM, certFile, keyFile, err := agenttest.Certs(t.TempDir(), net.IPv4(127, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	otherCA, _, _, err := agenttest.Certs(t.TempDir(), net.IPv4(127, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	h, l := startServed(t, "h1", agent.Config{CertFile: certFile, KeyFile: keyFile})
	if !l.TLS || l.Generated {
		t.Fatalf("listening: %+v", l)
	}
	ctx := context.Background()
	good := h.Host
	good.CA = caPEM
	if err := New([]Host{good}).Health(ctx, "h1"); err != nil {
		t.Errorf("with the agent's CA: %v", err)
	}
	bad := h.Host
	bad.CA = otherCA
	err = New([]Host{bad}).Health(ctx, "h1")
	if err == nil || errors.Is(err, driver.ErrUnreachable) || !strings.Contains(err.Error(), "does not verify against the host's tls.ca_file") {
		t.Errorf("with another CA: %v", err)
	}
	both := good
	both.Fingerprint = l.Fingerprint
	if err := New([]Host{both}).Health(ctx, "h1"); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("a pin and a CA: %v", err)
	}

	plainAgent := startHost(t, "h2")
	pinned := plainAgent.Host
	pinned.Fingerprint = l.Fingerprint
	err = New([]Host{pinned}).Health(ctx, "h2")
	if err == nil || errors.Is(err, driver.ErrUnreachable) || !strings.Contains(err.Error(), "speaks plain HTTP") {
		t.Errorf("TLS against a plain agent: %v", err)
	}
}

// TestStartUploadsArtifact: the agent runs only artifacts of its
// store; Start uploads one the agent lacks, once for a batch of
// concurrent Starts, asks again (without uploading) from a new driver,
// and uploads again when the agent lost it.
func TestStartUploadsArtifact(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	h := startHost(t, "h1")
	d := New([]Host{h.Host})
	ctx := context.Background()
	uploads := func() int { return strings.Count(h.log.String(), "artifact uploaded") }

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, name := range []string{"a", "b", "c"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = d.Start(ctx, member(name, "h1", tag), artifact(p.V1))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := uploads(); n != 1 {
		t.Errorf("%d uploads for three Starts of one artifact, want 1:\n%s", n, h.log.String())
	}
	stored := filepath.Join(h.dir, "artifacts", p.V1.SHA256, "member")
	if _, err := os.Stat(stored); err != nil {
		t.Errorf("the artifact is not in the store under its name: %v", err)
	}
	if st, _ := h.srv.Get("a"); !st.Running || st.SHA256 != p.V1.SHA256 {
		t.Errorf("a: %+v", st)
	}

	// A new ferry (no memory of the upload) asks, and does not upload.
	if err := New([]Host{h.Host}).Start(ctx, member("d", "h1", tag), artifact(p.V1)); err != nil {
		t.Fatal(err)
	}
	if n := uploads(); n != 1 {
		t.Errorf("%d uploads after a new driver's Start, want 1", n)
	}

	// The store emptied behind the driver's back: refused once, uploaded
	// again, started.
	if err := os.RemoveAll(filepath.Join(h.dir, "artifacts", p.V1.SHA256)); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx, member("e", "h1", tag), artifact(p.V1)); err != nil {
		t.Fatalf("Start after the store lost the artifact: %v", err)
	}
	if n := uploads(); n != 2 {
		t.Errorf("%d uploads, want 2", n)
	}
	if st, _ := h.srv.Get("e"); !st.Running {
		t.Errorf("e: %+v", st)
	}

	// An artifact ferry cannot read is said so, before the agent is
	// asked to do anything.
	missing := artifact(p.V2)
	missing.Path = filepath.Join(t.TempDir(), "gone")
	if err := d.Start(ctx, member("f", "h1", tag), missing); err == nil || !strings.Contains(err.Error(), missing.Path) {
		t.Errorf("an artifact that is not there: %v", err)
	}
	if _, ok := h.srv.Get("f"); ok {
		t.Errorf("f is known to the agent")
	}
}
