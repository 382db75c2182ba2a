package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/agenttest"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
)

func TestValidateFiles(t *testing.T) {
	many := make([]wire.FileSpec, maxFiles+1)
	for i := range many {
		many[i] = wire.FileSpec{Path: fmt.Sprintf("f%d", i)}
	}
	for _, c := range []struct {
		name  string
		files []wire.FileSpec
		err   string
	}{
		{"none", nil, ""},
		{"two", []wire.FileSpec{{Path: "a", Content: "x"}, {Path: "d/b", Mode: "0644"}}, ""},
		{"1 MiB", []wire.FileSpec{{Path: "a", Content: strings.Repeat("x", maxFileBytes)}}, ""},
		{"64 files", many[:maxFiles], ""},
		{"65 files", many, "more than 64 files"},
		{"too big", []wire.FileSpec{{Path: "a", Content: strings.Repeat("x", maxFileBytes+1)}}, "more than 1048576"},
		{"twice", []wire.FileSpec{{Path: "a"}, {Path: "a"}}, "given twice"},
		{"file and dir", []wire.FileSpec{{Path: "conf"}, {Path: "conf/x"}}, "also the directory"},
		{"deep file and dir", []wire.FileSpec{{Path: "a/b/c/d"}, {Path: "a/b"}}, "also the directory"},
		{"bad path", []wire.FileSpec{{Path: "ok"}, {Path: "../x"}}, "files[1]"},
		{"bad mode", []wire.FileSpec{{Path: "ok", Mode: "4755"}}, "files[0] (ok)"},
	} {
		err := validateFiles(c.files)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !isBadRequest(err)):
			t.Errorf("%s: %v, want a bad request with %q", c.name, err, c.err)
		}
	}
}

func TestFilesDigest(t *testing.T) {
	a := []wire.FileSpec{{Path: "a", Content: "1"}, {Path: "b", Mode: "0644", Content: "2"}}
	if filesDigest(nil) != "" {
		t.Errorf("no files: digest %q, want empty", filesDigest(nil))
	}
	same := []wire.FileSpec{{Path: "b", Mode: "644", Content: "2"}, {Path: "a", Mode: "0600", Content: "1"}}
	if filesDigest(a) != filesDigest(same) {
		t.Errorf("the same files in another order, with modes written otherwise, differ")
	}
	for name, other := range map[string][]wire.FileSpec{
		"content": {{Path: "a", Content: "1"}, {Path: "b", Mode: "0644", Content: "3"}},
		"mode":    {{Path: "a", Content: "1"}, {Path: "b", Mode: "0640", Content: "2"}},
		"path":    {{Path: "a", Content: "1"}, {Path: "c", Mode: "0644", Content: "2"}},
		"one":     {{Path: "a", Content: "1"}},
		// Without lengths these two would hash alike.
		"boundary": {{Path: "a", Content: "1b"}, {Path: "", Mode: "0644", Content: "2"}},
	} {
		if filesDigest(other) == filesDigest(a) {
			t.Errorf("a change of %s has the same digest", name)
		}
	}
}

// TestFilesWrittenBeforeStart: the files are there, with their modes,
// when the process starts; a PUT with other files restarts the member
// with them; the same files are a no-op.
func TestFilesWrittenBeforeStart(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	a := startAgent(t, t.TempDir())
	memberDir := filepath.Join(a.dir, "members", "cfg")
	marker := filepath.Join(t.TempDir(), "sigterm")

	sp := spec(p.V1, tag, "-read=conf/app.conf", "-marker="+marker)
	sp.Files = []wire.FileSpec{
		{Path: "conf/app.conf", Mode: "0640", Content: "listen = 1\n"},
		{Path: "secret", Content: "s3cret"},
	}
	st := a.put("cfg", sp)
	info := waitReady(t, memberDir, st.PID)
	if info.File != "listen = 1\n" || info.FileMode != "0640" {
		t.Errorf("the member saw conf/app.conf as %q, mode %s", info.File, info.FileMode)
	}
	if fi, err := os.Stat(filepath.Join(memberDir, "secret")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secret: %v %v, want mode 0600", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(memberDir, "secret")); string(b) != "s3cret" {
		t.Errorf("secret holds %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(a.dir, "state", "cfg.json")); strings.Contains(string(b), "s3cret") {
		t.Errorf("the state file holds a file's content: %s", b)
	}
	if left, _ := filepath.Glob(filepath.Join(memberDir, "*", ".*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	// The same files, in another order: a no-op.
	again := sp
	again.Files = []wire.FileSpec{sp.Files[1], sp.Files[0]}
	if st2 := a.put("cfg", again); st2.PID != st.PID || st2.Instance != 1 {
		t.Fatalf("the same files restarted the member: %+v", st2)
	}

	// Changed content: a graceful restart with the new file.
	changed := sp
	changed.Files = []wire.FileSpec{{Path: "conf/app.conf", Mode: "0640", Content: "listen = 2\n"}, sp.Files[1]}
	st3 := a.put("cfg", changed)
	if st3.PID == st.PID || st3.Instance != 2 || st3.Version != "1.0.0" {
		t.Fatalf("changed files: %+v", st3)
	}
	if b, _ := os.ReadFile(marker); !strings.Contains(string(b), fmt.Sprintf("SIGTERM %d", st.PID)) {
		t.Errorf("the old process was not stopped gracefully: %q", b)
	}
	if info := waitReady(t, memberDir, st3.PID); info.File != "listen = 2\n" {
		t.Errorf("the new process saw %q", info.File)
	}
	// A changed mode alone is a change too.
	mode := changed
	mode.Files = []wire.FileSpec{{Path: "conf/app.conf", Mode: "0600", Content: "listen = 2\n"}, sp.Files[1]}
	if st4 := a.put("cfg", mode); st4.Instance != 3 {
		t.Errorf("a changed mode: %+v", st4)
	}
	if fi, _ := os.Stat(filepath.Join(memberDir, "conf", "app.conf")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after the change: %v", fi.Mode().Perm())
	}
}

// TestFilesRefused: bad files are 400 and start nothing; a symbolic
// link in the member's directory does not let a write out of it.
func TestFilesRefused(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	a := startAgent(t, t.TempDir())
	for _, f := range []wire.FileSpec{
		{Path: "/etc/ferry-test"},
		{Path: "../escape"},
		{Path: "a/../../escape"},
		{Path: "./a"},
		{Path: ""},
		{Path: "ok", Mode: "4755"},
		{Path: "ok", Mode: "0666"},
		{Path: "ok", Mode: "rw"},
		{Path: "ok", Content: strings.Repeat("x", maxFileBytes+1)},
	} {
		sp := spec(p.V1, tag)
		sp.Files = []wire.FileSpec{f}
		code, body := a.call("PUT", "/v1/members/bad", sp)
		if code != 400 || decodeError(t, body).Code != wire.CodeBadRequest || !strings.Contains(string(body), "files[0]") {
			t.Errorf("file %+.60v: %d %s", f, code, body)
		}
	}
	if live := agenttest.Tagged(tag); len(live) != 0 {
		t.Errorf("refused PUTs started %v", live)
	}
	if code, _ := a.call("GET", "/v1/members/bad", nil); code != 404 {
		t.Errorf("a member refused at once is known: %d", code)
	}

	// A link the member made towards the outside.
	outside := t.TempDir()
	memberDir := filepath.Join(a.dir, "members", "linked")
	os.MkdirAll(memberDir, 0o755)
	if err := os.Symlink(outside, filepath.Join(memberDir, "out")); err != nil {
		t.Fatal(err)
	}
	sp := spec(p.V1, tag)
	sp.Files = []wire.FileSpec{{Path: "out/pwned", Content: "x"}}
	code, body := a.call("PUT", "/v1/members/linked", sp)
	if code < 400 || !strings.Contains(string(body), "out/pwned") {
		t.Errorf("write through a link: %d %s", code, body)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("a file was written outside the member's directory: %v", ents)
	}
	if live := agenttest.Tagged(tag); len(live) != 0 {
		t.Errorf("a member whose files could not be written was started: %v", live)
	}
}
