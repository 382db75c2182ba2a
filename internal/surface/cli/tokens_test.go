package cli

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServerNamedTokens: 'ferry server --tokens FILE' refuses a tokens
// file group or others may read, naming the chmod; with a 0600 one it
// creates no DATA-DIR/api-token, says how many named tokens it took
// (never a token), and 'ferry --addr ... upgrade override' prints the
// override as the server recorded it: by the name of the token the
// command sent, not the user@host it says it is.
func TestServerNamedTokens(t *testing.T) {
	dir := t.TempDir()
	file := offlineDescription(t, dir)
	data := filepath.Join(dir, "data")
	_, u := midwayStore(t, data)
	const annTok, bobTok = "ann-token-0123456789abcdef", "bob-token-0123456789abcdef"
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("# operators\nann "+annTok+"\nbob "+bobTok+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, 10*time.Second, ferryCmd("", "-f", file, "--data-dir", data, "server", "--listen", "127.0.0.1:0", "--tokens", tokens))
	if r.code == 0 || !strings.Contains(r.stderr, "chmod 600 "+tokens) {
		t.Fatalf("a tokens file others may read: exit %d, stderr %q; want a refusal with the chmod", r.code, r.stderr)
	}
	if err := os.Chmod(tokens, 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := ferryCmd("", "-v", "-f", file, "--data-dir", data, "server", "--listen", "127.0.0.1:0", "--tokens", tokens)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr, said syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	var base string
	for base == "" && sc.Scan() {
		said.Write([]byte(sc.Text() + "\n"))
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("the server did not say where it listens: %s", stderr.String())
	}
	go func() {
		for sc.Scan() {
			said.Write([]byte(sc.Text() + "\n"))
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(said.String(), "2 named tokens from "+tokens); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server's start does not say its named tokens:\n%s", said.String())
		}
	}
	if _, err := os.Stat(filepath.Join(data, "api-token")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("DATA-DIR/api-token beside named tokens: %v", err)
	}

	annFile := filepath.Join(dir, "ann.token")
	if err := os.WriteFile(annFile, []byte(annTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = run(t, 20*time.Second, ferryCmd("", "-f", file, "--data-dir", data, "--addr", base, "--token-file", annFile,
		"upgrade", "override", "quorum", "--member", "app-1", "--reason", "app-1's disk is gone"))
	if r.code != 0 || !strings.Contains(r.stdout, "override recorded for upgrade "+u.ID+": predicate quorum for member app-1, by ann\n") {
		t.Fatalf("override through the server: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	for _, out := range []string{said.String(), stderr.String(), r.stdout, r.stderr} {
		if strings.Contains(out, annTok) || strings.Contains(out, bobTok) {
			t.Fatalf("a token in ferry's output:\n%s", out)
		}
	}
}
