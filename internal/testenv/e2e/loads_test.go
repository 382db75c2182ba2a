package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	mrand "math/rand/v2"

	"aead.dev/minisign"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// TestSignedLoads: release 2.0.0's load is signed with a minisign key
// the description names (StarlingX's load-import with its .sig). The
// health query prints every named check with its result; a load
// changed by one byte (and listed in the catalog with its new sha256,
// as a forged catalog entry would be) and a load signed by another key
// are each refused by `ferry upgrade start` before any member moves,
// naming the file, the key and why; the release list shows each load's
// state. Then the good load upgrades the cluster.
func TestSignedLoads(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (the signing keys)", seed)
	rnd := mrand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24), byte(seed >> 32), byte(seed >> 40), byte(seed >> 48), byte(seed >> 56)})
	pub, priv, err := minisign.GenerateKey(rnd)
	if err != nil {
		t.Fatal(err)
	}
	otherPub, other, err := minisign.GenerateKey(rnd)
	if err != nil {
		t.Fatal(err)
	}

	// The load is a copy of the sample 2.0.0 (the build is shared by
	// the tests: it is not changed in place).
	dir := t.TempDir()
	load := filepath.Join(dir, "sample-2.0.0")
	good, err := os.ReadFile(bin.sample["2.0.0"])
	if err != nil {
		t.Fatal(err)
	}
	write(t, load, good, 0o755)
	keyFile, sigFile := filepath.Join(dir, "release.pub"), load+".minisig"
	pubText, _ := pub.MarshalText()
	write(t, keyFile, pubText, 0o644)
	goodSig := signFile(t, priv, good)
	write(t, sigFile, goodSig, 0o644)

	cl := startCluster(t, demo.ClusterOptions{Soak: time.Second, Deadline: 20 * time.Second, GateDeadline: 20 * time.Second, KVSoak: 500 * time.Millisecond,
		Releases: []demo.Release{
			{Version: "1.0.0", Path: bin.sample["1.0.0"]},
			{Version: "2.0.0", Path: load, UpgradeFrom: []string{"1.0.x"}, SigningKey: keyFile, Signature: sigFile},
		}})
	// An alarm of the description's, which the health query makes too.
	orig, err := os.ReadFile(cl.File)
	if err != nil {
		t.Fatal(err)
	}
	desc := append(bytes.Clone(orig), "\nalarms: [{name: monitoring quiet, exec: [\"true\"]}]\n"...)
	write(t, cl.File, desc, 0o644)
	keyID := strings.ToUpper(strconv.FormatUint(pub.ID(), 16))

	t.Run("health --to prints every named check", func(t *testing.T) {
		out, code := ferry(t, cl, "health", "--to", "2.0.0")
		if code != 0 || strings.Contains(out, "FAIL") {
			t.Fatalf("exit %d\n%s", code, out)
		}
		t.Logf("ferry health --to 2.0.0:\n%s", out)
		for _, want := range []string{"no upgrade in progress", "engine lock free", "hosts answer", "member kv-1 healthy", "member api-4 healthy",
			"cluster gate kv", "release 2.0.0 in the catalog", "upgrade path to 2.0.0", "artifact of kv 2.0.0", "sha256 matches",
			"alarm monitoring quiet", "signature of kv 2.0.0", "signature of api 2.0.0", "verifies with the minisign key " + keyID, "artifact of kv 1.0.0"} {
			if !strings.Contains(out, want) {
				t.Errorf("health output lacks %q", want)
			}
		}
		if strings.Contains(out, "signature of kv 1.0.0") {
			t.Errorf("1.0.0 is not signed, yet a signature check is listed")
		}
		loads := releaseLoads(t, cl)
		if loads["1.0.0"].Load != engine.LoadActive || loads["2.0.0"].Load != engine.LoadImported || loads["2.0.0"].Signed != keyFile {
			t.Errorf("releases: %+v", loads)
		}
	})

	t.Run("an alarm that fires fails the health query and the start", func(t *testing.T) {
		write(t, cl.File, bytes.Replace(desc, []byte(`exec: ["true"]`), []byte(`exec: ["false"]`), 1), 0o644)
		defer write(t, cl.File, desc, 0o644)
		out, code := ferry(t, cl, "health", "--to", "2.0.0")
		if code != 1 || !regexp.MustCompile(`alarm monitoring quiet +FAIL`).MatchString(out) {
			t.Errorf("health: exit %d, want 1 with the alarm failing\n%s", code, out)
		}
		out, code = ferry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
		if code != 5 || !strings.Contains(out, "FAIL  alarm monitoring quiet") {
			t.Errorf("start: exit %d, want 5 naming the alarm\n%s", code, out)
		}
		if _, ok := status(t, cl); ok {
			t.Errorf("a refused start left an upgrade record")
		}
	})

	t.Run("a release that requires a newer ferry is refused before anything moves", func(t *testing.T) {
		needs := bytes.Replace(desc, []byte("  - version: \"2.0.0\"\n"), []byte("  - version: \"2.0.0\"\n    requires_ferry: 99.0.0\n"), 1)
		if bytes.Equal(needs, desc) {
			t.Fatal("the description has no release 2.0.0 to require a ferry of")
		}
		write(t, cl.File, needs, 0o644)
		defer write(t, cl.File, desc, 0o644)
		want := "release 2.0.0 requires ferry 99.0.0 or later; this is ferry " + buildinfo.Release() + ": upgrade ferry first"
		out, code := ferry(t, cl, "health", "--to", "2.0.0")
		if code != 1 || !regexp.MustCompile(`ferry understands release 2\.0\.0 +FAIL`).MatchString(out) || !strings.Contains(out, want) {
			t.Errorf("health: exit %d, want 1 with %q\n%s", code, want, out)
		}
		out, code = ferry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
		if code != 5 || !strings.Contains(out, "FAIL  ferry understands release 2.0.0: "+want) || !strings.Contains(out, "nothing was changed") {
			t.Errorf("start: exit %d, want 5 naming both versions\n%s", code, out)
		}
		if _, ok := status(t, cl); ok {
			t.Errorf("a refused start left an upgrade record")
		}
		expectAllOn(t, cl, "1.0.0")
	})

	// refused runs a start that must be refused for the signature, and
	// checks that nothing moved.
	refused := func(t *testing.T, says ...string) {
		t.Helper()
		out, code := ferry(t, cl, "health", "--to", "2.0.0")
		if code != 1 || !strings.Contains(out, "signature of kv 2.0.0") {
			t.Errorf("health: exit %d, want 1 with the signature failing\n%s", code, out)
		}
		out, code = ferry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
		t.Logf("ferry upgrade start --to 2.0.0:\n%s", out)
		if code != 5 || !strings.Contains(out, "preflight failed") || !strings.Contains(out, "FAIL  signature of kv 2.0.0") {
			t.Errorf("start: exit %d, want 5 naming the signature", code)
		}
		for _, want := range append([]string{load, sigFile, keyFile, "nothing was changed"}, says...) {
			if !strings.Contains(out, want) {
				t.Errorf("the refusal does not say %q", want)
			}
		}
		if u, ok := status(t, cl); ok {
			t.Errorf("a refused start left an upgrade record: %s %s", u.ID, u.State)
		}
		// cluster up at the release checks its load the same way.
		if out, code := ferry(t, cl, "cluster", "up", "--version", "2.0.0"); code == 0 || !strings.Contains(out, sigFile) || !strings.Contains(out, "nothing was started") {
			t.Errorf("cluster up with the load refused: exit %d\n%s", code, out)
		}
		if out, code := ferry(t, cl, "events", "--all", "-o", "json"); code != 0 || strings.Contains(out, "stopping") || strings.Contains(out, "upgrade-started") {
			t.Errorf("events after a refused start (exit %d):\n%s", code, out)
		}
		expectAllOn(t, cl, "1.0.0")
		if out, code := ferry(t, cl, "releases", "list"); code != 0 || !regexp.MustCompile(`(?m)^2\.0\.0 +false +available +error `).MatchString(out) {
			t.Errorf("releases list: exit %d, want 2.0.0's load in error\n%s", code, out)
		} else {
			t.Logf("ferry releases list:\n%s", out)
		}
		if l := releaseLoads(t, cl)["2.0.0"]; l.Load != engine.LoadError || !strings.Contains(l.LoadDetail, sigFile) {
			t.Errorf("release 2.0.0's load: %+v, want error naming %s", l, sigFile)
		}
	}

	t.Run("a load changed by one byte is refused before anything moves", func(t *testing.T) {
		tampered := bytes.Clone(good)
		tampered[len(tampered)/2] ^= 0x01
		write(t, load, tampered, 0o755)
		// The catalog lists the changed file's own sha256: the checksum
		// passes, the signature is what refuses it.
		write(t, cl.File, bytes.Replace(desc, []byte(sha(good)), []byte(sha(tampered)), 1), 0o644)
		refused(t, "does not verify", "changed since it was signed")
		write(t, load, good, 0o755)
		write(t, cl.File, desc, 0o644)
	})

	t.Run("a load signed by another key is refused before anything moves", func(t *testing.T) {
		write(t, sigFile, signFile(t, other, good), 0o644)
		otherID := strings.ToUpper(strconv.FormatUint(otherPub.ID(), 16))
		refused(t, "made with minisign key "+otherID, "not the minisign key "+keyID)
		write(t, sigFile, goodSig, 0o644)
	})

	t.Run("the verified load upgrades the cluster", func(t *testing.T) {
		out, code := ferry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
		if code != 0 {
			t.Fatalf("start: exit %d\n%s", code, out)
		}
		expectAllOn(t, cl, "2.0.0")
		loads := releaseLoads(t, cl)
		if loads["2.0.0"].Load != engine.LoadActive || loads["1.0.0"].Load != engine.LoadInactive {
			t.Errorf("after the upgrade: %+v", loads)
		}
	})
}

func write(t *testing.T, path string, b []byte, mode os.FileMode) {
	t.Helper()
	// A new file renamed over the old: a member started from the load
	// meanwhile keeps the bytes it runs.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func signFile(t *testing.T, k minisign.PrivateKey, b []byte) []byte {
	t.Helper()
	r := minisign.NewReader(bytes.NewReader(b))
	if _, err := r.Read(make([]byte, len(b)+1)); err != nil {
		t.Fatal(err)
	}
	return r.SignWithComments(k, "timestamp:0 file:sample-2.0.0", "a test key")
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func releaseLoads(t *testing.T, cl *demo.Cluster) map[string]engine.ReleaseView {
	t.Helper()
	var rv []engine.ReleaseView
	jsonOut(t, cl, &rv, "releases", "list")
	out := map[string]engine.ReleaseView{}
	for _, r := range rv {
		out[r.Version] = r
	}
	return out
}
