package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// killWithTwoDrained runs 'ferry upgrade start --to v' and SIGKILLs it
// once two api members are out of the load balancer at once.
func killWithTwoDrained(t *testing.T, cl *demo.Cluster, v string) {
	t.Helper()
	runAndKillWhen(t, cl, []string{"upgrade", "start", "--to", v, "-q"}, func() bool {
		drained, _ := lbState(t, cl)
		return len(drained) == 2
	})
	drained, flags := lbState(t, cl)
	t.Logf("ferry killed with %v drained and flags %v", drained, flags)
	if len(drained) != 2 {
		t.Fatalf("drained after the kill: %v, want two", drained)
	}
}

// refusedUntouched runs each command on the damaged store and checks
// that it fails saying the store is damaged and how to recover, and
// that the file is as it was.
func refusedUntouched(t *testing.T, cl *demo.Cluster, path string, want string) {
	t.Helper()
	before, _ := os.ReadFile(path)
	for _, args := range [][]string{
		{"upgrade", "status"}, {"upgrade", "resume", "-q"}, {"upgrade", "abort", "-q"}, {"upgrade", "start", "--to", "2.0.0", "-q"},
		{"members"}, {"events"}, {"cluster", "up", "--version", "1.0.0"},
	} {
		out, code := ferry(t, cl, args...)
		if code == 0 || !strings.Contains(out, path+" is damaged") || !strings.Contains(out, want) {
			t.Errorf("ferry %s on a damaged store: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(before, after) {
		t.Fatalf("the damaged store was changed: %d bytes, was %d (%v)", len(after), len(before), err)
	}
}

// TestDamagedStoreRecovered: ferry SIGKILLed with two api members out
// of the load balancer, then its store damaged. Each command refuses
// the store, naming it and the way to recover, and leaves it as it is.
// Following the message leaves nothing drained: with the backup,
// 'recover --yes' then 'resume' completes the upgrade; with no backup
// (the store overwritten, its backup gone), 'recover --yes' puts every
// member back and unsets the flags, and names the members found down.
// On the old code the empty store was taken for a new one: resume said
// no upgrade was ever started and wrote a fresh store over the file.
func TestDamagedStoreRecovered(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Soak: 3 * time.Second, KVSoak: 500 * time.Millisecond}, "1.0.1", "2.0.0")
	path := filepath.Join(cl.DataDir, "ferry.db")

	t.Run("empty, with its backup", func(t *testing.T) {
		killWithTwoDrained(t, cl, "1.0.1")
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
		refusedUntouched(t, cl, path, "restores the backup")
		out, code := ferry(t, cl, "upgrade", "recover")
		if code == 0 || !strings.Contains(out, "restores its backup") || !strings.Contains(out, "--yes") {
			t.Fatalf("recover without --yes: exit %d\n%s", code, out)
		}
		if fi, _ := os.Stat(path); fi.Size() != 0 {
			t.Fatalf("recover without --yes changed the store")
		}
		if out, code := ferry(t, cl, "upgrade", "recover", "--yes"); code != 0 || !strings.Contains(out, "ferry upgrade resume") {
			t.Fatalf("recover --yes: exit %d\n%s", code, out)
		}
		if out, code := ferry(t, cl, "upgrade", "resume", "-q"); code != 0 {
			t.Fatalf("resume after the recovery: exit %d\n%s", code, out)
		}
		u, _ := status(t, cl)
		if u.State != upgrade.StateCompleted {
			t.Fatalf("ended %s: %s", u.State, u.Reason)
		}
		expectAllOn(t, cl, "1.0.1")
		expectRestored(t, cl, u)
	})

	t.Run("garbage, no backup", func(t *testing.T) {
		killWithTwoDrained(t, cl, "2.0.0")
		garbage := bytes.Repeat([]byte("not a store "), 2000)
		if err := os.WriteFile(path, garbage, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(path + ".bak"); err != nil {
			t.Fatal(err)
		}
		refusedUntouched(t, cl, path, "there is no usable backup")
		out, code := ferry(t, cl, "upgrade", "recover")
		if code == 0 || !strings.Contains(out, "api-1: undo of pre_stop hook 1") {
			t.Fatalf("recover without --yes: exit %d\n%s", code, out)
		}
		out, code = ferry(t, cl, "upgrade", "recover", "--yes")
		if code != 0 {
			t.Fatalf("recover --yes: exit %d\n%s", code, out)
		}
		t.Logf("recover --yes:\n%s", out)
		if drained, flags := lbState(t, cl); len(drained) > 0 || len(flags) > 0 {
			t.Fatalf("after recover --yes: drained %v, flags %v", drained, flags)
		}
		// A member stopped mid-move (whether the kill came before its
		// stop depends on the moment) is named, for the operator.
		var mv []engine.MemberView
		jsonOut(t, cl, &mv, "members")
		down := 0
		for _, m := range mv {
			if m.Status == "down" {
				down++
				if !strings.Contains(out, "member "+m.Name+" is down") {
					t.Errorf("recover --yes does not name member %s, down:\n%s", m.Name, out)
				}
			}
		}
		t.Logf("%d member(s) down after the recovery", down)
		if b, err := os.ReadFile(path); err == nil && bytes.Equal(b, garbage) {
			t.Fatalf("the damaged store is still in place")
		}
		if out, code := ferry(t, cl, "upgrade", "status"); code == 0 || !strings.Contains(out, "no upgrade yet") {
			t.Errorf("status after the recovery (a new store): exit %d\n%s", code, out)
		}
	})
}
