package cli

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// TestDamagedStoreAtEveryCommand: with the store file empty, truncated
// or garbage (an upgrade was in progress), every command that reads or
// writes the store fails, saying that the file is damaged, how, and
// 'ferry upgrade recover'; not a byte of the file changes and no file
// is added beside it. An empty file used to be taken for a new store:
// 'upgrade status' said "write ...: bad file descriptor", and 'upgrade
// resume' said none was ever started and wrote a fresh store over it.
func TestDamagedStoreAtEveryCommand(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	dir := t.TempDir()
	file := offlineDescription(t, dir)
	good := filepath.Join(dir, "good")
	st, u := midwayStore(t, good)
	f, err := st.Fence()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := st.Append(f, store.Event{Time: time.Now(), Upgrade: u.ID, Kind: "state", Message: strings.Repeat("e", 300) + string(rune('a'+i%26))}); err != nil {
			t.Fatal(err)
		}
	}
	whole, err := os.ReadFile(st.Path())
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, len(whole))
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	damages := []struct {
		name    string
		bytes   []byte
		problem string
	}{
		{"empty", nil, "it is empty: 0 bytes"},
		{"truncated", whole[:len(whole)/2], "truncated: "},
		{"garbage", garbage, "not a ferry store: "},
	}
	commands := [][]string{
		{"upgrade", "status"}, {"upgrade", "start", "--to", "2.0.0", "-q"}, {"upgrade", "resume", "-q"}, {"upgrade", "abort", "-q"},
		{"upgrade", "pause"}, {"upgrade", "finalize", "-q"}, {"upgrade", "override", "quorum", "--member", "app-1"},
		{"events"}, {"members"}, {"versions"}, {"bundle", "-o", filepath.Join(dir, "b.tar.gz")},
		{"server", "--listen", "127.0.0.1:0"}, {"cluster", "up", "--version", "1.0.0"}, {"cluster", "down"},
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			os.Mkdir(data, 0o700)
			path := filepath.Join(data, "ferry.db")
			if err := os.WriteFile(path, d.bytes, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range commands {
				r := run(t, 30*time.Second, ferryCmd("", append([]string{"-f", file, "--data-dir", data}, args...)...))
				for _, want := range []string{path + " is damaged (" + d.problem, "ferry upgrade recover -f DESCRIPTION --data-dir " + data} {
					if r.code == 0 || !strings.Contains(r.stderr, want) {
						t.Errorf("ferry %s: exit %d, stderr %q; want it to say %q", strings.Join(args, " "), r.code, r.stderr, want)
						break
					}
				}
				if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, d.bytes) {
					t.Fatalf("ferry %s changed the damaged store: %d bytes, was %d (%v)", strings.Join(args, " "), len(b), len(d.bytes), err)
				}
			}
			if ents, _ := os.ReadDir(data); len(ents) != 1 {
				t.Errorf("files added beside the damaged store: %v", ents)
			}
			// recover without --yes says what it would do, changes nothing
			// and exits 1.
			r := run(t, 30*time.Second, ferryCmd("", "-f", file, "--data-dir", data, "upgrade", "recover"))
			if r.code != 1 || !strings.Contains(r.stdout, "has no usable backup") || !strings.Contains(r.stderr, "nothing done") {
				t.Errorf("recover without --yes: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, d.bytes) {
				t.Errorf("recover without --yes changed the store")
			}
		})
	}
}
