package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/agenttest"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
)

func TestLastLines(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 1, ""},
		{"a\n", 1, "a\n"},
		{"a\nb\nc\n", 1, "c\n"},
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc\n", 3, "a\nb\nc\n"},
		{"a\nb\nc\n", 10, "a\nb\nc\n"},
		{"a\nb\nc", 1, "c"},
		{"a\nb\nc", 2, "b\nc"},
		{"\n\n\n", 2, "\n\n"},
		{"no newline", 5, "no newline"},
	} {
		if got := string(lastLines([]byte(c.in), c.n)); got != c.want {
			t.Errorf("lastLines(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// TestLogsCurrentAndPrevious: the output of the current instance and of
// the one before it, by lines, over the API.
func TestLogsCurrentAndPrevious(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	a := startAgent(t, t.TempDir())

	if code, body := a.call("GET", "/v1/members/web/logs", nil); code != 404 || decodeError(t, body).Code != wire.CodeNotFound {
		t.Errorf("logs of an unknown member: %d %s", code, body)
	}
	v1 := a.put("web", spec(p.V1, tag, "-lines=5"))
	want := fmt.Sprintf("line 4 of pid %d\n", v1.PID)
	var out string
	if msg := agenttest.WaitFor(5*time.Second, func() (bool, string) {
		out = a.logs("web", false, 100)
		return strings.HasSuffix(out, want), out
	}); msg != "" {
		t.Fatalf("current output: %s", msg)
	}
	if !strings.HasPrefix(out, "--- ferry agent ") || !strings.Contains(out, "starting web version 1.0.0") ||
		!strings.Contains(out, "instance 1\n") || !strings.Contains(out, fmt.Sprintf("member version 1.0.0 pid %d\n", v1.PID)) {
		t.Errorf("current output:\n%s", out)
	}
	if got := a.logs("web", false, 2); got != fmt.Sprintf("line 3 of pid %d\nline 4 of pid %d\n", v1.PID, v1.PID) {
		t.Errorf("last 2 lines: %q", got)
	}
	// The default is 100 lines; there are 7.
	code, body := a.call("GET", "/v1/members/web/logs", nil)
	if code != 200 || string(body) != out {
		t.Errorf("logs without parameters: %d %q", code, body)
	}
	if code, body := a.call("GET", "/v1/members/web/logs?previous=true", nil); code != 404 || !strings.Contains(decodeError(t, body).Message, "no previous instance") {
		t.Errorf("previous of a first instance: %d %s", code, body)
	}

	v2 := a.put("web", spec(p.V2, tag, "-lines=3"))
	prev := a.logs("web", true, 100)
	if !strings.Contains(prev, want) || !strings.Contains(prev, "got SIGTERM\n") || strings.Contains(prev, "2.0.0") {
		t.Errorf("previous instance's output:\n%s", prev)
	}
	if msg := agenttest.WaitFor(5*time.Second, func() (bool, string) {
		out = a.logs("web", false, 100)
		return strings.HasSuffix(out, fmt.Sprintf("line 2 of pid %d\n", v2.PID)), out
	}); msg != "" {
		t.Fatalf("current output after the swap: %s", msg)
	}
	if strings.Contains(out, fmt.Sprint(v1.PID)) || !strings.Contains(out, "instance 2\n") {
		t.Errorf("current output after the swap:\n%s", out)
	}

	// A third instance: the first one's output is gone.
	a.put("web", spec(p.V1, tag))
	if prev := a.logs("web", true, 100); !strings.Contains(prev, fmt.Sprintf("pid %d", v2.PID)) || strings.Contains(prev, fmt.Sprintf("pid %d", v1.PID)) {
		t.Errorf("previous after a third start:\n%s", prev)
	}

	for _, q := range []string{"lines=0", "lines=-1", "lines=10001", "lines=ten", "previous=maybe"} {
		code, body := a.call("GET", "/v1/members/web/logs?"+q, nil)
		if code != 400 || decodeError(t, body).Code != wire.CodeBadRequest {
			t.Errorf("logs?%s: %d %s", q, code, body)
		}
	}
	if code, _ := a.call("GET", "/v1/members/web/logs?lines=10000", nil); code != 200 {
		t.Errorf("lines=10000: %d", code)
	}
	if code, body := a.callToken("GET", "/v1/members/web/logs", nil, "wrong"); code != 401 {
		t.Errorf("logs with a wrong token: %d %s", code, body)
	}
}

// TestLogsBounded: a member that writes far more than the bound keeps
// only about the bound, its newest lines, and so does its previous
// instance.
func TestLogsBounded(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	const limit = 64 << 10
	dir0 := t.TempDir()
	if err := canCollapse(dir0); err != nil {
		t.Skipf("the file system of %s cannot collapse a file's head (%v): the agent bounds output by copy and truncate there, which loses lines under load; this test needs ext4 or XFS", dir0, err)
	}
	a := startAgentConfig(t, Config{Dir: dir0, logLimit: limit, logEvery: 20 * time.Millisecond})

	// 20,000 lines of about 25 bytes: ~500 KB.
	st := a.put("chatty", spec(p.V1, tag, "-lines=20000"))
	last := fmt.Sprintf("line 19999 of pid %d\n", st.PID)
	dir := filepath.Join(a.dir, "logs", "chatty")
	size := func(names ...string) int64 {
		var n int64
		for _, name := range names {
			if fi, err := os.Stat(filepath.Join(dir, name)); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	// 30 s: on 2 cores under the whole suite, 20,000 unbuffered writes
	// have taken more than 10.
	if msg := agenttest.WaitFor(30*time.Second, func() (bool, string) {
		out := a.logs("chatty", false, 1)
		n := size("current.log", "current.old.log")
		return out == last && n <= limit, fmt.Sprintf("last line %q, %d bytes kept", out, n)
	}); msg != "" {
		t.Fatal(msg)
	}
	all := a.logs("chatty", false, wire.MaxLogLines)
	lines := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
	if !strings.HasSuffix(all, last) || len(all) > limit || strings.Contains(all, "line 0 of") {
		t.Errorf("kept %d bytes, %d lines, from %q to %q", len(all), len(lines), lines[0], lines[len(lines)-1])
	}
	// The kept lines are the newest, in order, whole but perhaps the first.
	var prevN int
	for i, l := range lines[1:] {
		var n, pid int
		if _, err := fmt.Sscanf(l, "line %d of pid %d", &n, &pid); err != nil || (i > 0 && n != prevN+1) {
			t.Fatalf("line %d of the kept output: %q (after line %d)", i+1, l, prevN)
		}
		prevN = n
	}

	// The next instance: the previous one's output stays bounded.
	a.put("chatty", spec(p.V2, tag))
	if prev := a.logs("chatty", true, wire.MaxLogLines); !strings.HasSuffix(prev, "got SIGTERM\n") || len(prev) > limit || !strings.Contains(prev, last) {
		t.Errorf("previous: %d bytes, ends %q", len(prev), prev[max(0, len(prev)-80):])
	}
	if n := size("previous.log", "previous.old.log"); n > limit {
		t.Errorf("previous instance keeps %d bytes, more than %d", n, limit)
	}
}

// canCollapse tells whether collapseHead works in dir.
func canCollapse(dir string) error {
	f, err := os.CreateTemp(dir, "probe")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	bs := blockSize(f)
	if bs <= 0 {
		return fmt.Errorf("no block size")
	}
	if _, err := f.Write(make([]byte, 3*bs)); err != nil {
		return err
	}
	return collapseHead(f, bs)
}

// TestTrimFallback: where a file's head cannot be collapsed, copy and
// truncate still bound the output and keep its newest bytes.
func TestTrimFallback(t *testing.T) {
	dir := t.TempDir()
	live, old := filepath.Join(dir, "current.log"), filepath.Join(dir, "current.old.log")
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	if err := os.WriteFile(live, []byte(b.String()), 0o640); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(live, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const half = 1000
	if err := copyTruncate(f, old, half); err != nil {
		t.Fatal(err)
	}
	kept, _ := os.ReadFile(old)
	if rest, _ := os.ReadFile(live); len(rest) != 0 || len(kept) != half || !strings.HasSuffix(string(kept), "line 1999\n") {
		t.Errorf("old %d bytes ending %q, live %d bytes", len(kept), kept[max(0, len(kept)-12):], len(rest))
	}
}

// TestTrimCollapseKeepsEverything: collapsing moves the head into old,
// old keeps at most half, and live plus old end with every byte of the
// file in order.
func TestTrimCollapseKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	if err := canCollapse(dir); err != nil {
		t.Skipf("the file system of %s cannot collapse a file's head: %v", dir, err)
	}
	live, old := filepath.Join(dir, "current.log"), filepath.Join(dir, "current.old.log")
	var all strings.Builder
	f, err := os.OpenFile(live, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rw, err := os.OpenFile(live, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	const half = 32 << 10
	for round := range 6 {
		for i := range 3000 {
			line := fmt.Sprintf("round %d line %d\n", round, i)
			all.WriteString(line)
			if _, err := f.WriteString(line); err != nil {
				t.Fatal(err)
			}
		}
		fi, _ := rw.Stat()
		if err := collapseInto(rw, old, fi.Size(), half); err != nil {
			t.Fatal(err)
		}
		o, _ := os.ReadFile(old)
		l, _ := os.ReadFile(live)
		if len(o) > half || len(l) > half {
			t.Fatalf("round %d: old %d bytes, live %d, more than %d", round, len(o), len(l), half)
		}
		if !strings.HasSuffix(all.String(), string(o)+string(l)) {
			t.Fatalf("round %d: old and live are not the end of what was written", round)
		}
	}
}
