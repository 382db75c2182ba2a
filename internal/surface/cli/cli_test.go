package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/testenv/sourcetree"
)

// The test binary is also the ferry command line: with
// FERRY_CLI_TEST_MAIN=1 it runs Main on its arguments, so that the tests
// run the CLI as a real process (signals, exit codes, another uid)
// without building it.
func TestMain(m *testing.M) {
	if os.Getenv("FERRY_CLI_TEST_MAIN") == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// ferryCmd is the ferry CLI as a process: bin (the test binary when
// empty) with args.
func ferryCmd(bin string, args ...string) *exec.Cmd {
	if bin == "" {
		bin, _ = os.Executable()
	}
	cmd := exec.Command(bin, args...)
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "FERRY_") {
			env = append(env, e)
		}
	}
	cmd.Env = append(env, "FERRY_CLI_TEST_MAIN=1")
	return cmd
}

// result is a finished ferry process.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// run runs cmd, killing it if it has not ended within limit (a failure).
func run(t *testing.T, limit time.Duration, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := wait(t, limit, cmd)
	r.stdout, r.stderr, r.took = out.String(), errb.String(), time.Since(began)
	return r
}

// wait waits for a started cmd at most limit, then kills it and fails.
func wait(t *testing.T, limit time.Duration, cmd *exec.Cmd) result {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		switch {
		case err == nil:
			return result{code: 0}
		case errors.As(err, &ee):
			return result{code: ee.ExitCode()}
		}
		t.Fatalf("%v: %v", cmd.Args, err)
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%v: still running after %s (killed)", cmd.Args, limit)
	}
	return result{}
}

// offlineDescription writes a description whose only host's agent does
// not answer, and returns its path.
func offlineDescription(t *testing.T, dir string) string {
	t.Helper()
	return description(t, dir, "127.0.0.1:1", "")
}

// description writes a description of one member on one host, whose
// agent is at agent (with its token in tokenFile, if any).
func description(t *testing.T, dir, agent, tokenFile string) string {
	t.Helper()
	tf := ""
	if tokenFile != "" {
		tf = fmt.Sprintf(", token_file: %q", tokenFile)
	}
	return descriptionWith(t, dir, agent, tf)
}

// descriptionWith is description with the host's keys after agent:
// written out (", token_file: ..., tls: {...}").
func descriptionWith(t *testing.T, dir, agent, tf string) string {
	t.Helper()
	art := filepath.Join(dir, "app")
	if err := os.WriteFile(art, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("#!/bin/sh\n"))
	desc := fmt.Sprintf(`cluster: offline
substrate: process
hosts:
  - {name: host-1, agent: %q%s}
components:
  - name: app
    order: 1
    strategy: {type: canary, max_batch: 1, max_unavailable: 1}
    members:
      - {name: app-1, host: host-1, address: "127.0.0.1:2"}
    run: {args: [app]}
    health:
      member: {tcp: "{{.Address}}", timeout: 200ms}
    soak: 1s
    deadline: 10s
releases:
  - version: "1.0.0"
    artifacts: {"*": {path: %q, sha256: %q}}
  - version: "2.0.0"
    upgrade_from: ["1.0.x"]
    artifacts: {"*": {path: %q, sha256: %q}}
`, agent, tf, art, hex.EncodeToString(sum[:]), art, hex.EncodeToString(sum[:]))
	file := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(file, []byte(desc), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestValidateRefusesSpecialFiles: 'ferry validate -f' of a FIFO, a
// directory, /dev/zero or a file over 8 MiB fails at once (exit 2)
// naming the file and what is wrong. With a FIFO it used to block in
// open and read forever and ignore SIGTERM: here the FIFO gets a writer
// that sends nothing, and SIGTERM, and ferry must be gone within 2 s.
func TestValidateRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "cluster.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if f, err := os.Create(big); err != nil {
		t.Fatal(err)
	} else if err := f.Truncate(8<<20 + 1); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	for _, c := range []struct{ path, says string }{
		{fifo, "a named pipe (FIFO), not a regular file"},
		{dir, "a directory, not a regular file"},
		{"/dev/zero", "a character device"},
		{big, "is 8388609 bytes, more than the 8 MiB allowed"},
	} {
		r := run(t, 5*time.Second, ferryCmd("", "validate", "-f", c.path))
		if r.code != 2 || !strings.Contains(r.stderr, c.path) || !strings.Contains(r.stderr, c.says) || r.took > 2*time.Second {
			t.Errorf("validate -f %s: exit %d after %s, stderr %q; want exit 2 at once, naming it and saying %q", c.path, r.code, r.took, r.stderr, c.says)
		}
	}

	// The FIFO again, with a writer that never writes, and SIGTERM.
	cmd := ferryCmd("", "validate", "-f", fifo)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var res result
	go func() {
		defer close(exited)
		err := cmd.Wait()
		res.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			res.code = ee.ExitCode()
		}
	}()
	// Either ferry opened the FIFO (then a writer can open it without
	// blocking) or it is gone already.
	deadline := time.Now().Add(5 * time.Second)
opened:
	for {
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			defer w.Close()
			break
		}
		select {
		case <-exited:
			break opened
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("ferry neither opened the FIFO nor exited within 5s")
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(2 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatal("ferry validate -f FIFO still ran 2s after SIGTERM (killed)")
	}
	if res.code != 2 || !strings.Contains(stderr.String(), "a named pipe (FIFO)") {
		t.Errorf("validate -f FIFO with a writer: exit %d, stderr %q; want 2 and the FIFO named", res.code, stderr.String())
	}
}

// TestServerRefusesSpecialTLSFiles: 'ferry server' given a FIFO or a
// device as its TLS certificate or key exits at once, naming it.
func TestServerRefusesSpecialTLSFiles(t *testing.T) {
	dir := t.TempDir()
	file := offlineDescription(t, dir)
	fifo := filepath.Join(dir, "cert.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ flag, path, says string }{
		{"--tls-cert", fifo, "a named pipe (FIFO)"},
		{"--tls-key", "/dev/zero", "a character device"},
	} {
		args := []string{"-f", file, "--data-dir", filepath.Join(dir, "data"), "server", "--listen", "127.0.0.1:0", "--tls-cert", fifo, "--tls-key", fifo}
		if c.flag == "--tls-key" {
			good := filepath.Join(dir, "good.pem")
			if err := os.WriteFile(good, []byte("not used"), 0o600); err != nil {
				t.Fatal(err)
			}
			args[len(args)-3], args[len(args)-1] = good, c.path
		}
		r := run(t, 5*time.Second, ferryCmd("", args...))
		if r.code == 0 || !strings.Contains(r.stderr, c.flag) || !strings.Contains(r.stderr, c.path) || !strings.Contains(r.stderr, c.says) || r.took > 2*time.Second {
			t.Errorf("server %s %s: exit %d after %s, stderr %q", c.flag, c.path, r.code, r.took, r.stderr)
		}
	}
}

// nobody prepares to run ferry as uid 65534 when the tests run as root
// (root ignores permission bits): a copy of the test binary it may run,
// and dirs made traversable. It returns the binary (the test binary
// itself when not root) and how to set a command's credentials.
func nobody(t *testing.T, dirs ...string) (bin string, as func(*exec.Cmd)) {
	t.Helper()
	if os.Getuid() != 0 {
		return "", func(*exec.Cmd) {}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(t.TempDir(), "ferry")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// t.TempDir's directories are 0700.
	for _, d := range append(dirs, filepath.Dir(bin)) {
		for ; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return bin, func(c *exec.Cmd) {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
}

var agentListening = regexp.MustCompile(`agent listening.* addr=(127\.0\.0\.1:\d+)`)

// startAgent runs 'ferry agent' on loopback until the test ends; it
// returns its address and its token's file.
func startAgent(t *testing.T, dir string) (addr, tokenFile string) {
	t.Helper()
	tokenFile = filepath.Join(dir, "agent-token")
	cmd := ferryCmd("", "agent", "--listen", "127.0.0.1:0", "--dir", filepath.Join(dir, "agent"), "--token-file", tokenFile)
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
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := agentListening.FindStringSubmatch(sc.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return m[1], tokenFile
		}
	}
	t.Fatal("the agent did not say where it listens")
	return "", ""
}

// TestViewsOnReadOnlyDataDir: with the data directory and its store
// made read-only in the middle of an upgrade (chmod 555 and 444, and
// ferry not their owner, or root), 'ferry upgrade status', 'events',
// 'members' and 'versions' work, and a command that writes ('upgrade
// pause') fails saying which directory, as which uid, what to fix and
// that the views work. They used to fail with "permission denied".
func TestViewsOnReadOnlyDataDir(t *testing.T) {
	dir := t.TempDir()
	agent, agentToken := startAgent(t, dir)
	// The token as the user running the views has it: a 0600 file of
	// its own.
	token := filepath.Join(dir, "token")
	b, err := os.ReadFile(agentToken)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(token, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		if err := os.Chown(token, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	file := description(t, dir, agent, token)
	data := filepath.Join(dir, "data")
	st, u := midwayStore(t, data)
	f, err := st.Fence()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(f, store.Event{Time: time.Now(), Upgrade: u.ID, Kind: "state", Message: "upgrading-app: the first batch"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(st.Path(), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(data, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(data, 0o700) })
	bin, as := nobody(t, data, file)

	ferry := func(args ...string) result {
		cmd := ferryCmd(bin, append([]string{"-f", file, "--data-dir", data}, args...)...)
		as(cmd)
		return run(t, 30*time.Second, cmd)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"upgrade", "status"}, "upg-midway"},
		{[]string{"-o", "json", "upgrade", "status"}, `"state": "upgrading-app"`},
		{[]string{"events"}, "the first batch"},
		{[]string{"members"}, "app-1"},
		{[]string{"versions"}, "app"},
	} {
		r := ferry(c.args...)
		if r.code != 0 || !strings.Contains(r.stdout, c.want) {
			t.Errorf("ferry %s on a read-only data directory: exit %d\nstdout %s\nstderr %s", strings.Join(c.args, " "), r.code, r.stdout, r.stderr)
		}
	}
	r := ferry("upgrade", "pause")
	uid := os.Getuid()
	if uid == 0 {
		uid = 65534
	}
	for _, want := range []string{fmt.Sprintf("the data directory %s is not writable by uid %d", data, uid), "permission denied",
		"ferry upgrade status, events, members and versions still work"} {
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("ferry upgrade pause on a read-only data directory: exit %d, stderr %q; want it to say %q", r.code, r.stderr, want)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "engine.lock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a view created engine.lock: %v", err)
	}
}

// syncBuffer is a buffer written by one goroutine, read by another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listening = regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)

// TestServerStopsOnSIGTERMDuringImports: a 'ferry server' with an
// import hashing a 4 GiB artifact and an upload whose client stalls
// exits within 2 s of SIGTERM (the import and the upload stop with the
// server; the server used to wait for them).
func TestServerStopsOnSIGTERMDuringImports(t *testing.T) {
	dir := t.TempDir()
	file := offlineDescription(t, dir)
	root := filepath.Join(dir, "artifacts")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(root, "big")
	if f, err := os.Create(big); err != nil {
		t.Fatal(err)
	} else if err := f.Truncate(4 << 30); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	data := filepath.Join(dir, "data")
	cmd := ferryCmd("", "-v", "-f", file, "--data-dir", data, "server", "--listen", "127.0.0.1:0",
		"--artifact-root", root, "--max-artifact-size", fmt.Sprint(8<<30))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	sc := bufio.NewScanner(stdout)
	var base string
	for base == "" && sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("the server did not say where it listens: %s", stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	tokb, err := os.ReadFile(filepath.Join(data, "api-token"))
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(tokb))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// An upload that sends a little, then nothing.
	pr, pw := io.Pipe()
	defer pw.Close()
	up, _ := http.NewRequestWithContext(ctx, "PUT", base+"/v1/artifacts/"+strings.Repeat("a", 64), pr)
	up.Header.Set("Authorization", "Bearer "+tok)
	up.Header.Set("Content-Type", "application/octet-stream")
	go func() {
		if resp, err := http.DefaultClient.Do(up); err == nil {
			resp.Body.Close()
		}
	}()
	go func() { _, _ = pw.Write(make([]byte, 1024)) }()
	// An import that hashes for seconds.
	body, _ := json.Marshal(map[string]any{"version": "2.1.0", "upgrade_from": []string{"2.0.x"},
		"artifacts": map[string]any{"*": map[string]string{"path": big, "sha256": strings.Repeat("0", 64)}}})
	imp, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/releases", bytes.NewReader(body))
	imp.Header.Set("Authorization", "Bearer "+tok)
	imp.Header.Set("Content-Type", "application/json")
	go func() {
		if resp, err := http.DefaultClient.Do(imp); err == nil {
			resp.Body.Close()
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "checking its artifacts") || !strings.Contains(stderr.String(), "receiving it") {
		if time.Now().After(deadline) {
			t.Fatalf("the import and the upload did not begin within 10s:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	began := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := wait(t, 5*time.Second, cmd)
	stopped = true
	if d := time.Since(began); d > 2*time.Second || r.code != 0 {
		t.Errorf("the server exited %d, %s after SIGTERM; want 0 within 2s\n%s", r.code, d.Round(time.Millisecond), stderr.String())
	}
}

// repoRoot is the module root.
func repoRoot(t *testing.T) string { return sourcetree.Root(t) }

// TestDemoThroughServer: 'ferry demo' (without --direct) runs its
// upgrade through a ferry server on loopback: it prints the server's
// dashboard URL, and the report says the server's answer to POST
// /v1/upgrade took the upgrade ("driven_by": "server"). The CLI used to
// leave the demo without a server, so that it always ran the engine in
// its own process.
func TestDemoThroughServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sample and runs the demo's cluster")
	}
	arts := t.TempDir()
	for _, v := range []string{"1.0.0", "2.0.0"} {
		b := exec.Command("go", "build", "-ldflags", "-X main.version="+v, "-o", filepath.Join(arts, "sample-"+v), "./examples/sample/cmd/sample")
		b.Dir = repoRoot(t)
		if out, err := b.CombinedOutput(); err != nil {
			t.Fatalf("build sample %s: %v\n%s", v, err, out)
		}
	}
	report := filepath.Join(t.TempDir(), "report.json")
	r := run(t, 4*time.Minute, ferryCmd("", "demo", "--artifacts", arts, "--report", report, "--dir", t.TempDir(), "--rate", "100", "--concurrency", "4"))
	if r.code != 0 && r.code != 4 {
		t.Fatalf("ferry demo: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r.code == 4 {
		t.Logf("the demo ran but did not meet its promise (a loaded machine?): %s", r.stderr)
	}
	if !regexp.MustCompile(`ferry server on http://127\.0\.0\.1:\d+: dashboard http://127\.0\.0\.1:\d+/dashboard/`).MatchString(r.stdout) {
		t.Errorf("the demo did not print its server's dashboard URL:\n%s", r.stdout)
	}
	var rep struct {
		State, DrivenBy, Server string
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &struct {
		State    *string `json:"state"`
		DrivenBy *string `json:"driven_by"`
		Server   *string `json:"server"`
	}{&rep.State, &rep.DrivenBy, &rep.Server}); err != nil {
		t.Fatal(err)
	}
	if rep.DrivenBy != "server" || !strings.HasPrefix(rep.Server, "http://127.0.0.1:") || rep.State != "completed" {
		t.Errorf("the demo's report: state %q, driven by %q at %q; want completed, by the server", rep.State, rep.DrivenBy, rep.Server)
	}
	if !strings.Contains(r.stdout, "driven by") || !strings.Contains(r.stdout, "the ferry server at "+rep.Server) {
		t.Errorf("the summary does not say the server drove the upgrade:\n%s", r.stdout)
	}
}

// midwayStore is a store in dir whose current upgrade, upg-midway of
// app-1 from 1.0.0 to 2.0.0, is in its first phase.
func midwayStore(t *testing.T, dir string) (*store.Store, upgrade.Upgrade) {
	t.Helper()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := plan.Plan{From: []string{"1.0.0"}, To: "2.0.0", Phases: []plan.Phase{{Component: "app", Strategy: strategy.Canary, MaxUnavailable: 1,
		Batches: []plan.Batch{{Members: []string{"app-1"}}}}}}
	u := upgrade.New("upg-midway", p, map[string]string{"app-1": "1.0.0"}, nil, time.Now())
	u.State = upgrade.Upgrading("app")
	if err := st.Create(u); err != nil {
		t.Fatal(err)
	}
	return st, u
}

// TestServerStoreRefused: a --store or --lease-ttl ferry cannot use is
// refused before anything starts, naming the flag and the value; an
// etcd that does not answer is named with its address.
func TestServerStoreRefused(t *testing.T) {
	dir := t.TempDir()
	file := offlineDescription(t, dir)
	for _, c := range []struct {
		args  []string
		says  []string
		limit time.Duration
	}{
		{[]string{"--store", "mysql://db:3306"}, []string{"--store", "mysql://db:3306", "etcd://"}, 2 * time.Second},
		{[]string{"--store", "etcd://no-port"}, []string{"--store", "no-port", "HOST:PORT"}, 2 * time.Second},
		{[]string{"--store", "etcd://127.0.0.1:2379", "--lease-ttl", "1500ms"}, []string{"--lease-ttl", "1.5s", "whole seconds"}, 2 * time.Second},
		{[]string{"--store", "etcd://127.0.0.1:1"}, []string{"127.0.0.1:1", "does not answer"}, 15 * time.Second},
	} {
		args := append([]string{"-f", file, "--data-dir", filepath.Join(dir, "data"), "server", "--listen", "127.0.0.1:0"}, c.args...)
		r := run(t, c.limit+5*time.Second, ferryCmd("", args...))
		ok := r.code != 0 && r.took < c.limit
		for _, s := range c.says {
			ok = ok && strings.Contains(r.stderr, s)
		}
		if !ok {
			t.Errorf("server %v: exit %d after %s, stderr %q; want a refusal saying %q within %s", c.args, r.code, r.took, r.stderr, c.says, c.limit)
		}
	}
}
