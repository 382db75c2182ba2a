package agent

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/agenttest"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
)

// TestParseProcAddr reads the addresses of /proc/net/tcp and tcp6.
func TestParseProcAddr(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ip   string
		port int
		ok   bool
	}{
		{"0100007F:0CEA", "127.0.0.1", 3306, true},
		{"00000000:1F90", "0.0.0.0", 8080, true},
		{"00000000000000000000000001000000:0050", "::1", 80, true},
		{"00000000000000000000000000000000:2379", "::", 9081, true},
		{"0000000000000000FFFF00000100007F:0CEA", "127.0.0.1", 3306, true}, // ::ffff:127.0.0.1
		{"0100007F", "", 0, false},
		{"0100007F:XYZ", "", 0, false},
		{"01007F:0CEA", "", 0, false},
	} {
		ip, port, ok := parseProcAddr(tc.in)
		if ok != tc.ok || (ok && (!ip.Equal(net.ParseIP(tc.ip)) || port != tc.port)) {
			t.Errorf("parseProcAddr(%q) = %v, %d, %v; want %s, %d, %v", tc.in, ip, port, ok, tc.ip, tc.port, tc.ok)
		}
	}
}

// TestListeningInodes picks the listening sockets on a port, bound to
// the address or to the wildcard, and nothing else.
func TestListeningInodes(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0000000000000000 100 0 0 10 0
   1: 0100007F:0CEA 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0000000000000000 20 4 30 10 -1
   2: 00000000:0CEB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 333 1 0000000000000000 100 0 0 10 0
   3: 0200007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 444 1 0000000000000000 100 0 0 10 0
   4: garbage
`
	for _, tc := range []struct {
		name string
		ip   string
		port int
		want string
	}{
		{"bound to the address", "127.0.0.1", 3306, "[111]"},
		{"an established connection is not a listener", "127.0.0.1", 3306, "[111]"},
		{"the wildcard", "10.1.2.3", 3307, "[333]"},
		{"another address", "127.0.0.2", 3306, "[444]"},
		{"nothing on that port", "127.0.0.1", 3308, "[]"},
	} {
		got := fmt.Sprint(listeningInodes([]byte(table), []net.IP{net.ParseIP(tc.ip)}, tc.port))
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestTopmost: among processes sharing a socket, the one whose parent
// does not hold it.
func TestTopmost(t *testing.T) {
	for _, tc := range []struct {
		holders map[int]int
		want    int
	}{
		{map[int]int{10: 1}, 10},
		{map[int]int{10: 1, 11: 10, 12: 10}, 10},  // workers of 10
		{map[int]int{20: 1, 30: 1}, 20},           // two unrelated: the lowest
		{map[int]int{30: 20, 20: 30}, 20},         // a cycle (impossible): the lowest
		{map[int]int{50: 40, 51: 50, 52: 51}, 50}, // a chain
	} {
		if got := topmost(tc.holders); got != tc.want {
			t.Errorf("topmost(%v) = %d, want %d", tc.holders, got, tc.want)
		}
	}
}

// outside starts the member program as a process the agent did not
// start (a script's, systemd's), in its own process group; the test's
// end kills it.
func outside(t *testing.T, tag string, dir string, extra ...string) *exec.Cmd {
	t.Helper()
	a := progs(t).V1
	args := append([]string{"-ready=" + filepath.Join(dir, "ready.json"), agenttest.TagArg(tag)}, extra...)
	cmd := exec.Command(a.Path, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait() // reaped here: the agent sees it gone, not a zombie
	t.Cleanup(func() { cmd.Process.Kill() })
	waitReady(t, dir, cmd.Process.Pid)
	return cmd
}

// TestAdoptByPIDFile: a member started outside the agent is adopted
// from its pid file: reported running, adopted, without a version;
// adopting again changes nothing; its stop signals it alone (not its
// process group) with the member's stop signal; the agent does not
// restart it.
func TestAdoptByPIDFile(t *testing.T) {
	tag := testTag(t)
	a := startAgent(t, t.TempDir())
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	pidFile := filepath.Join(dir, "m.pid")
	cmd := outside(t, tag, dir, "-addr=127.0.0.1:0", "-pid-file="+pidFile, "-marker="+marker)
	// A second process in the member's process group: a stop of the
	// adopted member must not reach it.
	sib := exec.Command(progs(t).V1.Path, "-addr=127.0.0.1:0", agenttest.TagArg(tag))
	sib.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: cmd.Process.Pid}
	if err := sib.Start(); err != nil {
		t.Fatal(err)
	}
	go sib.Wait()
	t.Cleanup(func() { sib.Process.Kill() })

	req := wire.AdoptRequest{PIDFile: pidFile, StopTimeoutMS: 5000, StopSignal: "SIGUSR2"}
	code, body := a.call("POST", "/v1/members/m1/adopt", req)
	if code != 200 {
		t.Fatalf("adopt: %d %s", code, body)
	}
	st := decodeStatus(t, body)
	if !st.Running || !st.Adopted || st.PID != cmd.Process.Pid || st.Version != "" || st.Restart != wire.RestartNo {
		t.Fatalf("adopted status %+v, want running, adopted, pid %d, no version", st, cmd.Process.Pid)
	}
	if d := time.Since(st.Since); d < 0 || d > time.Minute {
		t.Errorf("since %v: want the process's start, a moment ago", st.Since)
	}
	if code, body := a.call("POST", "/v1/members/m1/adopt", wire.AdoptRequest{Listen: "127.0.0.1:1"}); code != 200 || decodeStatus(t, body).PID != st.PID {
		t.Errorf("adopting a running member again: %d %s, want its status unchanged", code, body)
	}
	if sts := a.srv.List(); len(sts) != 1 || !sts[0].Adopted {
		t.Errorf("list: %+v", sts)
	}

	stopped := a.stop("m1", 0)
	if stopped.Running || !stopped.Adopted || !strings.HasPrefix(stopped.Detail, "stopped (SIGUSR2)") {
		t.Errorf("stopped: %+v", stopped)
	}
	if b, _ := os.ReadFile(marker); !strings.Contains(string(b), fmt.Sprintf("SIGUSR2 %d", st.PID)) {
		t.Errorf("the adopted process did not get its stop signal: marker %q", b)
	}
	if !processAlive(sib.Process.Pid) {
		t.Errorf("the stop of an adopted member reached its process group")
	}
	if st := a.get("m1"); st.Running || st.NextRestart != nil {
		t.Errorf("the agent restarts an adopted member: %+v", st)
	}
}

// TestAdoptByListenThenPut: a member found by the address it listens
// on is handed to the agent by the first PUT: the adopted process is
// stopped gracefully, the agent's own started; the member is the
// agent's from then on. A new agent on the same directory re-adopts an
// adopted process as adopted.
func TestAdoptByListenThenPut(t *testing.T) {
	tag := testTag(t)
	agentDir := t.TempDir()
	a := startAgent(t, agentDir)
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := outside(t, tag, dir, "-addr="+addr, "-marker="+marker)

	code, body := a.call("POST", "/v1/members/m1/adopt", wire.AdoptRequest{Listen: addr})
	if code != 200 {
		t.Fatalf("adopt: %d %s", code, body)
	}
	if st := decodeStatus(t, body); st.PID != cmd.Process.Pid || !st.Adopted {
		t.Fatalf("adopted %+v, want pid %d", st, cmd.Process.Pid)
	}

	// The agent restarts: the adopted process is found again, adopted.
	a.close()
	a = startAgent(t, agentDir)
	if st := a.get("m1"); !st.Running || !st.Adopted || st.PID != cmd.Process.Pid {
		t.Fatalf("after an agent restart: %+v", st)
	}

	st := a.put("m1", spec(progs(t).V2, tag, "-marker="+marker))
	if st.Adopted || st.Version != "2.0.0" || st.PID == cmd.Process.Pid || !st.Running {
		t.Fatalf("after the PUT: %+v", st)
	}
	waitGone(t, cmd.Process.Pid)
	if b, _ := os.ReadFile(marker); !strings.Contains(string(b), fmt.Sprintf("SIGTERM %d", cmd.Process.Pid)) {
		t.Errorf("the adopted process was not stopped gracefully: marker %q", b)
	}
}

// TestAdoptRefusals: nothing to adopt is 404 and leaves no member
// behind; bad requests are 400; a process that is another member's is
// refused.
func TestAdoptRefusals(t *testing.T) {
	tag := testTag(t)
	a := startAgent(t, t.TempDir())
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "m.pid")
	outside(t, tag, dir, "-addr=127.0.0.1:0", "-pid-file="+pidFile)
	if code, body := a.call("POST", "/v1/members/m1/adopt", wire.AdoptRequest{PIDFile: pidFile}); code != 200 {
		t.Fatalf("adopt: %d %s", code, body)
	}
	garbage := filepath.Join(dir, "garbage.pid")
	os.WriteFile(garbage, []byte("not a pid\n"), 0o644)
	huge := filepath.Join(dir, "huge.pid")
	os.WriteFile(huge, []byte("1"+strings.Repeat(" ", maxPIDFile)), 0o644)
	for _, tc := range []struct {
		name string
		body any
		code int
		msg  string
	}{
		{"no pid file", wire.AdoptRequest{PIDFile: filepath.Join(dir, "none.pid")}, 404, "no process to adopt: pid file: open"},
		{"not a pid", wire.AdoptRequest{PIDFile: garbage}, 404, "does not hold a process id"},
		{"a directory as pid file", wire.AdoptRequest{PIDFile: dir}, 400, dir + ": a directory, not a regular file"},
		{"a pid file too large", wire.AdoptRequest{PIDFile: huge}, 400, "more than the 4 KiB allowed"},
		{"nothing listens", wire.AdoptRequest{Listen: closedAddr(t)}, 404, "nothing listens on"},
		{"another member's process", wire.AdoptRequest{PIDFile: pidFile}, 400, "which is member m1"},
		{"neither", wire.AdoptRequest{}, 400, "one of pid_file and listen is required"},
		{"both", wire.AdoptRequest{PIDFile: pidFile, Listen: "127.0.0.1:1"}, 400, "exclusive"},
		{"relative pid file", wire.AdoptRequest{PIDFile: "m.pid"}, 400, "not an absolute path"},
		{"bad listen", wire.AdoptRequest{Listen: "127.0.0.1"}, 400, "listen \"127.0.0.1\""},
		{"bad signal", wire.AdoptRequest{Listen: "127.0.0.1:1", StopSignal: "SIGKILL"}, 400, "stop_signal \"SIGKILL\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := a.call("POST", "/v1/members/m2/adopt", tc.body)
			e := decodeError(t, body)
			if code != tc.code || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("%d %s, want %d and %q", code, body, tc.code, tc.msg)
			}
		})
	}
	if code, _ := a.call("GET", "/v1/members/m2", nil); code != 404 {
		t.Errorf("a failed adoption left member m2 known: GET answered %d", code)
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestAdoptFIFOPIDFile: a FIFO named as pid file is refused at once
// with what it is (it used to block the adoption forever, and with it
// every later PUT of that member), while another member's slow stop
// is under way: neither member's requests wait on the other's.
func TestAdoptFIFOPIDFile(t *testing.T) {
	tag := testTag(t)
	a := startAgent(t, t.TempDir())
	fifo := filepath.Join(t.TempDir(), "m.pid")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Runs before the agent closes: a reader left blocked on the FIFO
	// (the bug) is released, so that the test fails instead of hanging.
	t.Cleanup(func() {
		if fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			syscall.Close(fd)
		}
	})

	// Member slow: ignores SIGTERM, so its stop takes its whole 4 s.
	sp := spec(progs(t).V1, tag, "-ignore-term")
	st := a.put("slow", sp)
	waitReady(t, filepath.Join(a.dir, "members", "slow"), st.PID)
	stopped := make(chan error, 1)
	go func() {
		code, body, err := a.try("POST", "/v1/members/slow/stop", wire.StopRequest{TimeoutMS: 4000}, time.Minute)
		if err == nil && code != 200 {
			err = fmt.Errorf("stop: %d %s", code, body)
		}
		stopped <- err
	}()
	// The stop has begun once the agent has signalled the member.
	if msg := agenttest.WaitFor(10*time.Second, func() (bool, string) {
		return strings.Contains(a.log.String(), `msg="stopping member" member=slow`), "no stop logged"
	}); msg != "" {
		t.Fatal(msg)
	}

	t0 := time.Now()
	code, body, err := a.try("POST", "/v1/members/m1/adopt", wire.AdoptRequest{PIDFile: fifo}, 2*time.Second)
	if err != nil {
		t.Fatalf("adopt with a FIFO as pid file: no answer within 2 s: %v", err)
	}
	if e := decodeError(t, body); code != 400 || !strings.Contains(e.Message, fifo+": a named pipe (FIFO), not a regular file") {
		t.Errorf("adopt with a FIFO: %d %s, want 400 naming the file and what it is", code, body)
	}
	t.Logf("a FIFO as pid file answered in %v", time.Since(t0))

	// Member m1 is free: a PUT starts it, within a bound.
	code, body, err = a.try("PUT", "/v1/members/m1", spec(progs(t).V1, tag), 10*time.Second)
	if err != nil || code != 200 {
		t.Fatalf("PUT m1 after the refused adoption: %d %s %v", code, body, err)
	}
	// The list and member slow's own status answer during its stop.
	for _, path := range []string{"/v1/members", "/v1/members/slow", "/v1/members/m1"} {
		if code, body, err := a.try("GET", path, nil, 2*time.Second); err != nil || code != 200 {
			t.Errorf("GET %s during another member's stop: %d %s %v", path, code, body, err)
		}
	}
	select {
	case err := <-stopped:
		t.Errorf("member slow's stop ended (%v) before the other requests were made: the test proves nothing; rerun", err)
	default:
	}
	if err := <-stopped; err != nil {
		t.Error(err)
	}
}
