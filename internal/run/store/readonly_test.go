package store

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// The test binary is also the helper process of these tests: with
// FERRY_STORE_TEST_CHILD set it does one thing and exits.
func TestMain(m *testing.M) {
	switch os.Getenv("FERRY_STORE_TEST_CHILD") {
	case "":
		os.Exit(m.Run())
	case "hold":
		// Hold the store's file lock, as a stuck process would, until
		// stdin closes.
		db, err := bolt.Open(os.Getenv("FERRY_STORE_TEST_PATH"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("held")
		_, _ = io.Copy(io.Discard, os.Stdin)
		db.Close()
		os.Exit(0)
	case "unwritable":
		out, _ := json.Marshal(unwritableChecks(os.Getenv("FERRY_STORE_TEST_PATH")))
		fmt.Println(string(out))
		os.Exit(0)
	}
	os.Exit(2)
}

// fileSum is the SHA-256 of a file's bytes.
func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// TestOpenReadOnly: a read-only store creates nothing where there is
// no data directory (and reads as empty), reads what a read-write one
// wrote without changing a byte of the file, and refuses every write.
func TestOpenReadOnly(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	ro, err := OpenReadOnly(missing)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ro.Current(); ok || err != nil {
		t.Errorf("Current of a missing store: %v %v", ok, err)
	}
	if evs, err := ro.Events("", 0, 0); len(evs) != 0 || err != nil {
		t.Errorf("Events of a missing store: %v %v", evs, err)
	}
	if _, err := ro.Get("a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a missing store: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the read-only open created %s: %v", missing, err)
	}

	dir := t.TempDir()
	rw, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	u := rec("a", upgrade.Upgrading("kv"))
	if err := rw.Create(u); err != nil {
		t.Fatal(err)
	}
	if _, err := logged(rw, Event{Kind: "state", Upgrade: "a", Message: "upgrading-kv"}); err != nil {
		t.Fatal(err)
	}
	before := fileSum(t, rw.Path())
	ro, err = OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cur, ok, err := ro.Current(); !ok || err != nil || cur.ID != "a" {
		t.Errorf("Current: %v %v %v", cur.ID, ok, err)
	}
	if evs, err := ro.Events("a", 0, 0); len(evs) != 1 || err != nil {
		t.Errorf("Events: %v %v", evs, err)
	}
	for name, write := range map[string]func() error{
		"Create":       func() error { return ro.Create(rec("b", upgrade.StateStarted)) },
		"Save":         func() error { return ro.Save(u) },
		"Append":       func() error { _, err := ro.Append(Fence{}, Event{Kind: "x"}); return err },
		"Request":      func() error { _, err := ro.Request("a", upgrade.IntentPause, time.Now(), nil); return err },
		"ClearCurrent": func() error { _, err := ro.ClearCurrent(); return err },
		"LockEngine":   func() error { _, err := ro.LockEngine(); return err },
	} {
		if err := write(); !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s through a read-only store: %v, want ErrReadOnly", name, err)
		}
	}
	if after := fileSum(t, rw.Path()); after != before {
		t.Error("reading through the read-only store changed the file")
	}
	if _, err := os.Stat(filepath.Join(dir, "engine.lock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the read-only store created engine.lock: %v", err)
	}
}

// checks is what a process that may read, not write, the data
// directory saw.
type checks struct {
	UID        int
	Current    string // the current upgrade's id, or the error
	Events     string // the number of events, or the error
	OpenRW     string // Open's error
	Save       string // a save through a store opened before the change
	NotWritabl bool   // errors.Is(Open's error, ErrNotWritable)
}

func unwritableChecks(dir string) checks {
	c := checks{UID: os.Getuid()}
	ro, err := OpenReadOnly(dir)
	if err != nil {
		c.Current, c.Events = err.Error(), err.Error()
	} else {
		if u, ok, err := ro.Current(); err != nil {
			c.Current = err.Error()
		} else if ok {
			c.Current = u.ID
		}
		if evs, err := ro.Events("", 0, 0); err != nil {
			c.Events = err.Error()
		} else {
			c.Events = strconv.Itoa(len(evs))
		}
	}
	_, err = Open(dir)
	if err != nil {
		c.OpenRW = err.Error()
		c.NotWritabl = errors.Is(err, ErrNotWritable)
	}
	// The engine's store, opened while the directory was writable.
	mid := &Store{dir: dir, path: filepath.Join(dir, "ferry.db"), timeout: DefaultTimeout}
	if err := mid.Save(rec("a", upgrade.Upgrading("kv"))); err != nil {
		c.Save = err.Error()
	}
	return c
}

// TestUnwritableDataDir: with the data directory and its file made
// read-only mid-upgrade (chmod 555 and 444; or 311, which also forbids
// listing the directory), a process that is not their owner, or root,
// still reads the current upgrade and its events through the read-only
// store, and the read-write open and the engine's next save fail saying
// which directory, as which uid, what to fix and that the views still
// work. A directory that cannot even be entered (chmod 0) cannot be
// read either: the views then say so, as which uid, and what to do.
// Root ignores permission bits, so as root the checks run in a child
// process as uid 65534 (nobody).
func TestUnwritableDataDir(t *testing.T) {
	for _, mode := range []os.FileMode{0o555, 0o311, 0} {
		t.Run(fmt.Sprintf("%o", mode), func(t *testing.T) {
			base := t.TempDir()
			dir := filepath.Join(base, "data")
			rw, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := rw.Create(rec("a", upgrade.Upgrading("kv"))); err != nil {
				t.Fatal(err)
			}
			if _, err := logged(rw, Event{Kind: "state", Upgrade: "a", Message: "upgrading-kv"}); err != nil {
				t.Fatal(err)
			}
			before := fileSum(t, rw.Path())
			if err := os.Chmod(rw.Path(), 0o444); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, mode); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o700) })

			var c checks
			if os.Getuid() != 0 {
				c = unwritableChecks(dir)
			} else {
				c = asNobody(t, base, dir)
			}
			if mode == 0 {
				want := fmt.Sprintf("the data directory %s cannot be read by uid %d", dir, c.UID)
				if !strings.Contains(c.Current, want) || !strings.Contains(c.Current, "give this one read access") {
					t.Errorf("the views as uid %d on a directory it cannot enter: %q; want %q and what to do", c.UID, c.Current, want)
				}
				return
			}
			if c.Current != "a" || c.Events != "1" {
				t.Errorf("the views as uid %d: current %q, events %q; want upgrade a and 1 event", c.UID, c.Current, c.Events)
			}
			for what, msg := range map[string]string{"Open": c.OpenRW, "a save mid-upgrade": c.Save} {
				for _, want := range []string{"the data directory " + dir + " is not writable by uid " + strconv.Itoa(c.UID), "permission denied",
					"ferry upgrade status, events, members and versions still work"} {
					if !strings.Contains(msg, want) {
						t.Errorf("%s: %q; want it to say %q", what, msg, want)
					}
				}
			}
			if !c.NotWritabl {
				t.Errorf("Open's error is not ErrNotWritable: %s", c.OpenRW)
			}
			if fileSum(t, rw.Path()) != before {
				t.Error("the store file changed")
			}
		})
	}
}

// asNobody runs unwritableChecks in a copy of the test binary as uid
// and gid 65534; base is made traversable for it.
func asNobody(t *testing.T, base, dir string) checks {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "store.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// t.TempDir's directories are 0700: let nobody through them.
	for _, d := range []string{filepath.Dir(bin), filepath.Dir(filepath.Dir(bin)), base, filepath.Dir(base)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), "FERRY_STORE_TEST_CHILD=unwritable", "FERRY_STORE_TEST_PATH="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the checks as uid 65534: %v\n%s", err, out)
	}
	var c checks
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatalf("the checks' output %q: %v", out, err)
	}
	return c
}

// TestLockedStoreNamesHolder: when another process keeps the store's
// file locked past the timeout, reads and writes fail with ErrBusy,
// naming that process (its pid and command line) and what to do.
func TestLockedStoreNamesHolder(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "FERRY_STORE_TEST_CHILD=hold", "FERRY_STORE_TEST_PATH="+s.Path())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("the holder: %q %v", line, err)
	}
	s.timeout = 300 * time.Millisecond
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	ro.timeout = 300 * time.Millisecond
	for what, op := range map[string]func() error{
		"a read":  func() error { _, _, err := ro.Current(); return err },
		"a write": func() error { _, err := s.Append(Fence{}, Event{Kind: "x"}); return err },
	} {
		began := time.Now()
		err := op()
		if d := time.Since(began); d > 3*time.Second {
			t.Errorf("%s took %s", what, d)
		}
		pid := fmt.Sprintf("pid %d (%s", cmd.Process.Pid, self)
		if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), pid) || !strings.Contains(err.Error(), "stop it") ||
			!strings.Contains(err.Error(), s.Path()) {
			t.Errorf("%s: %v; want ErrBusy naming %s) and what to do", what, err, pid)
		}
	}
}

// TestHolders reads /proc/locks lines: holders of the file's device
// and inode only, not the processes waiting for it, each pid once.
func TestHolders(t *testing.T) {
	// Device 253:1 (major 0xfd) as the kernel encodes it.
	const dev, ino = uint64(253<<8 | 1), uint64(5678)
	locks := `1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF
1: -> FLOCK  ADVISORY  WRITE 999 fd:01:5678 0 EOF
2: FLOCK  ADVISORY  READ 1235 fd:01:5678 0 EOF
3: FLOCK  ADVISORY  READ 1235 fd:01:5678 0 EOF
4: POSIX  ADVISORY  WRITE 77 fd:01:9999 0 EOF
5: FLOCK  ADVISORY  WRITE 78 08:01:5678 0 EOF
6: FLOCK  ADVISORY  WRITE 42 fd:01:5678 0 EOF
garbage
`
	cmd := func(pid int) string {
		if pid == 1234 {
			return "ferry upgrade start"
		}
		return ""
	}
	got := strings.Join(holders(locks, dev, ino, 42, cmd), ", ")
	if want := "pid 1234 (ferry upgrade start), pid 1235, pid 42 (this process)"; got != want {
		t.Errorf("holders = %q, want %q", got, want)
	}
	if got := holders("", dev, ino, 42, cmd); got != nil {
		t.Errorf("no locks: %q", got)
	}
}
