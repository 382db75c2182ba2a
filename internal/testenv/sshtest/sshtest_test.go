package sshtest

import (
	"os"
	"strconv"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// TestSessionsDoNotReadTheMachinesShellFiles: a host's session sees this
// machine's shell start-up files (~/.bashrc ...) empty, so whatever they
// run (here: pyenv, which can wait a minute on a stale lock) stays out
// of every test's SSH commands; the files themselves are untouched.
func TestSessionsDoNotReadTheMachinesShellFiles(t *testing.T) {
	files := startupFiles()
	if len(files) == 0 {
		t.Skip("this machine's user has no shell start-up file: nothing to hide")
	}
	sizes := map[string]int64{}
	for _, f := range files {
		fi, err := os.Stat(f)
		must(t, err)
		sizes[f] = fi.Size()
	}
	e := New(t, 1)
	key, err := os.ReadFile(e.Identity)
	must(t, err)
	signer, err := gossh.ParsePrivateKey(key)
	must(t, err)
	hk, err := knownhosts.New(e.KnownHosts)
	must(t, err)
	cl, err := gossh.Dial("tcp", e.Hosts[0].SSH, &gossh.ClientConfig{User: "root", Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)}, HostKeyCallback: hk})
	must(t, err)
	defer cl.Close()
	s, err := cl.NewSession()
	must(t, err)
	defer s.Close()
	// wc -c prints each file's size as the session sees it.
	out, err := s.Output("wc -c " + strings.Join(files, " "))
	must(t, err)
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 || f[1] == "total" {
			continue
		}
		if n, _ := strconv.Atoi(f[0]); n != 0 {
			t.Errorf("a session on %s sees %s with %d bytes, want it empty", e.Hosts[0].Name, f[1], n)
		}
	}
	for f, was := range sizes {
		if fi, err := os.Stat(f); err != nil || fi.Size() != was {
			t.Errorf("%s changed on the machine: %v, %d bytes, was %d", f, err, fi.Size(), was)
		}
	}
}
