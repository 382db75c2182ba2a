package agent

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// Adoption: a member already running when ferry did not start it (by
// systemd, a script, a tool before ferry) is found by its pid file or
// by the address it listens on, and then watched like a re-adopted
// process: its status is running with its pid and adopted: true, an
// exit is recorded (status unknown), a stop signals it, and a PUT stops
// it gracefully and starts the agent's own process in its place. The
// agent does not know what version it runs (ferry asks the member
// itself, through the description's version call), and never restarts
// it: it has no artifact to restart it from.

func (s *Server) handleAdopt(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !wire.ValidName(name) {
		writeError(w, badName(name))
		return
	}
	body, err := readBody(w, r, maxBodyBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	req, err := DecodeAdoptRequest(body)
	if err != nil {
		writeError(w, err)
		return
	}
	st, err := s.adoptRunning(r.Context(), name, req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// adoptRunning finds the member's process as req says and takes it
// over. A member whose process runs already (adopted or started by the
// agent) is left as it is: adopting is idempotent, and it never
// replaces a process the agent knows. Nothing found is 404.
//
// The process is looked for before the member's operation lock is
// taken: a pid file on a hung filesystem or a slow name lookup holds
// no lock that another request, for this member or another, waits on.
func (s *Server) adoptRunning(ctx context.Context, name string, req wire.AdoptRequest) (wire.Status, error) {
	m := s.getMember(name, true)
	if st, ok := m.runningStatus(); ok {
		return st, nil
	}
	var pid int
	var how string
	var err error
	if req.PIDFile != "" {
		pid, err = pidFromFile(req.PIDFile)
		how = "pid file " + req.PIDFile
	} else {
		pid, err = pidListening(ctx, req.Listen)
		how = "listening on " + req.Listen
	}
	if err != nil {
		var sfe *safefile.Error
		if errors.As(err, &sfe) && !errors.Is(err, safefile.ErrTimeout) {
			return wire.Status{}, badRequest("member %s: cannot adopt: %v", name, err)
		}
		return wire.Status{}, &apiError{http.StatusNotFound, wire.CodeNotFound, fmt.Sprintf("member %s: no process to adopt: %v", name, err)}
	}

	m.op.Lock()
	defer m.op.Unlock()
	if st, ok := m.runningStatus(); ok {
		return st, nil // adopted or started while the process was looked for
	}
	if pid <= 1 || pid == os.Getpid() {
		return wire.Status{}, badRequest("member %s: %s names process %d, which cannot be a member", name, how, pid)
	}
	if other := s.memberOfPID(pid, m); other != "" {
		return wire.Status{}, badRequest("member %s: %s names process %d, which is member %s", name, how, pid, other)
	}
	state, start, err := procStat(pid)
	if err != nil || state == 'Z' || state == 'X' || state == 'x' {
		return wire.Status{}, &apiError{http.StatusNotFound, wire.CodeNotFound, fmt.Sprintf("member %s: no process to adopt: %s names process %d, which does not run", name, how, pid)}
	}
	p := &proc{pid: pid, start: start, adopted: true, done: make(chan struct{})}
	m.mu.Lock()
	m.known = true
	m.proc = p
	m.rec = record{
		Name:          name,
		Adopted:       true,
		Restart:       wire.RestartNo,
		StopTimeoutMS: req.StopTimeoutMS,
		StopSignal:    req.StopSignal,
		Instance:      m.rec.Instance + 1,
		Running:       true,
		PID:           pid,
		StartTime:     start,
		Since:         startedAt(start),
	}
	perr := s.persistLocked(m)
	st := m.statusLocked()
	m.mu.Unlock()
	s.log.Info("adopted a member ferry did not start", "member", name, "pid", pid, "found", how)
	s.wg.Add(1)
	go s.watch(m, p)
	if perr != nil {
		return wire.Status{}, fmt.Errorf("member %s adopted (pid %d) but its state was not saved: %w", name, pid, perr)
	}
	return st, nil
}

// memberOfPID names the member (other than self) whose process is pid.
func (s *Server) memberOfPID(pid int, self *member) string {
	s.mu.Lock()
	ms := make([]*member, 0, len(s.members))
	for _, m := range s.members {
		if m != self {
			ms = append(ms, m)
		}
	}
	s.mu.Unlock()
	for _, m := range ms {
		m.mu.Lock()
		p := m.proc
		m.mu.Unlock()
		if p != nil && p.pid == pid {
			return m.name
		}
	}
	return ""
}

// maxPIDFile bounds a pid file, and pidFileTimeout its read: a pid
// file is a user's file like any other (a FIFO, a device or a hung
// filesystem must not hold a request).
const (
	maxPIDFile     = 4096
	pidFileTimeout = 2 * time.Second
)

// pidFromFile reads a pid file: a decimal process id, alone on its
// first line. A file that is not regular, too large or not read within
// pidFileTimeout is refused at once (*safefile.Error).
func pidFromFile(path string) (int, error) {
	b, err := safefile.Read(path, maxPIDFile, pidFileTimeout)
	if err != nil {
		if errors.As(err, new(*safefile.Error)) {
			return 0, fmt.Errorf("pid file %w", err)
		}
		return 0, fmt.Errorf("pid file: %w", err)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pid, err := strconv.Atoi(string(bytes.TrimSpace(line)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s does not hold a process id", path)
	}
	return pid, nil
}

// splitListen splits a host:port into the addresses it may stand for
// (a name is resolved later) and the port.
func splitListen(addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	if host == "" {
		return "", 0, errors.New("no host")
	}
	return host, p, nil
}

// pidListening finds the process listening on addr: the listening
// sockets of /proc/net/tcp and tcp6 on its port and address (or on the
// wildcard address), then the process holding such a socket among
// /proc/PID/fd. When several do (a server's workers share its socket),
// the one whose parent does not hold it is the member.
func pidListening(ctx context.Context, addr string) (int, error) {
	host, port, err := splitListen(addr)
	if err != nil {
		return 0, err
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		addrs, err := net.DefaultResolver.LookupIPAddr(rctx, host)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("listen %s: %v", addr, err)
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	inodes := map[uint64]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // no IPv6 here
		}
		for _, ino := range listeningInodes(b, ips, port) {
			inodes[ino] = true
		}
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("nothing listens on %s", addr)
	}
	holders := socketHolders(inodes)
	if len(holders) == 0 {
		return 0, fmt.Errorf("a socket listens on %s, but no process this agent may inspect holds it (the agent must run as the member's user or as root)", addr)
	}
	return topmost(holders), nil
}

// listeningInodes returns the inodes of the sockets in LISTEN state of
// a /proc/net/tcp or tcp6 table on port, bound to one of ips or to the
// wildcard address.
func listeningInodes(table []byte, ips []net.IP, port int) []uint64 {
	var out []uint64
	lines := strings.Split(string(table), "\n")
	for _, line := range lines[min(1, len(lines)):] { // the first line is the header
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != "0A" { // 0A: TCP_LISTEN
			continue
		}
		ip, p, ok := parseProcAddr(f[1])
		if !ok || p != port {
			continue
		}
		match := ip.IsUnspecified()
		for _, want := range ips {
			if ip.Equal(want) {
				match = true
			}
		}
		if !match {
			continue
		}
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if err == nil && ino != 0 {
			out = append(out, ino)
		}
	}
	return out
}

// parseProcAddr parses an address of /proc/net/tcp ("0100007F:0CEA":
// the IPv4 address as a little-endian 32-bit word, the port in hex) or
// tcp6 (four such words).
func parseProcAddr(s string) (net.IP, int, bool) {
	h, ps, ok := strings.Cut(s, ":")
	if !ok {
		return nil, 0, false
	}
	port, err := strconv.ParseUint(ps, 16, 16)
	if err != nil {
		return nil, 0, false
	}
	b, err := hex.DecodeString(h)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil, 0, false
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.IP(b), int(port), true
}

// socketHolders maps each process holding one of the socket inodes to
// its parent's pid.
func socketHolders(inodes map[uint64]bool) map[int]int {
	out := map[int]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fds, err := os.ReadDir("/proc/" + e.Name() + "/fd")
		if err != nil {
			continue // not ours to inspect, or gone
		}
		for _, fd := range fds {
			l, err := os.Readlink("/proc/" + e.Name() + "/fd/" + fd.Name())
			if err != nil || !strings.HasPrefix(l, "socket:[") {
				continue
			}
			ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]"), 10, 64)
			if err == nil && inodes[ino] {
				out[pid] = parentOf(pid)
				break
			}
		}
	}
	return out
}

// topmost picks, among processes holding a socket (pid → parent), one
// whose parent does not hold it; the lowest such pid.
func topmost(holders map[int]int) int {
	best := 0
	for pid, parent := range holders {
		if _, inherited := holders[parent]; inherited {
			continue
		}
		if best == 0 || pid < best {
			best = pid
		}
	}
	if best == 0 { // a cycle cannot happen; be safe anyway
		for pid := range holders {
			if best == 0 || pid < best {
				best = pid
			}
		}
	}
	return best
}

// parentOf returns field 4 of /proc/PID/stat, or 0.
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(string(f[1]))
	return ppid
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's start time: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// startedAt turns a process's start time (clock ticks since boot) into
// a time, from the boot time in /proc/stat; now when unknown. It is
// what an adopted member's since says: its soak counts from its start.
func startedAt(ticks uint64) time.Time {
	now := time.Now()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return now
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			boot, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return now
			}
			t := time.Unix(boot, 0).Add(time.Duration(ticks) * time.Second / clockTicks)
			if t.After(now) {
				return now
			}
			return t
		}
	}
	return now
}
