package ssh

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// The states the helper reports of a member.
const (
	stateRunning = "running" // the process ferry started runs
	stateAdopted = "adopted" // a process ferry did not start, found by its pid file
	stateDown    = "down"    // ferry started it; it is not running
	stateNone    = "none"    // ferry never started it here
)

// memberStatus is one line of the helper's status: what the helper
// knows of a member.
type memberStatus struct {
	state   string
	pid     int
	since   time.Time
	version string
	sha     string
	detail  string
}

// maxStatusLines bounds the lines of one answer (a host's members).
const maxStatusLines = 100000

// parseStatus reads the helper's status answer: one line per member,
// eight fields separated by tabs ("member", name, state, pid, since in
// nanoseconds of the Unix epoch or "-", version or "-", sha256 or "-",
// detail). Anything else is refused with the line's number: a host
// whose answer cannot be read is not taken for one whose members are
// down.
func parseStatus(b []byte) (map[string]memberStatus, error) {
	out := map[string]memberStatus{}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if len(b) == 0 {
		return out, nil
	}
	if len(lines) > maxStatusLines {
		return nil, fmt.Errorf("%d lines, more than %d", len(lines), maxStatusLines)
	}
	for i, l := range lines {
		f := strings.Split(string(l), "\t")
		if len(f) != 8 || f[0] != "member" || f[1] == "" {
			return nil, fmt.Errorf("line %d is not a member's status: %.80q", i+1, l)
		}
		st := memberStatus{state: f[2], version: dash(f[5]), sha: dash(f[6]), detail: dash(f[7])}
		switch st.state {
		case stateRunning, stateAdopted, stateDown, stateNone:
		default:
			return nil, fmt.Errorf("line %d: unknown state %.20q", i+1, f[2])
		}
		pid, err := strconv.Atoi(f[3])
		if err != nil || pid < 0 || (pid == 0) == (st.state == stateRunning || st.state == stateAdopted) {
			return nil, fmt.Errorf("line %d: pid %.20q for a member %s", i+1, f[3], st.state)
		}
		st.pid = pid
		if f[4] != "-" && f[4] != "" {
			ns, err := strconv.ParseInt(f[4], 10, 64)
			if err != nil || ns <= 0 {
				return nil, fmt.Errorf("line %d: since %.30q is not nanoseconds", i+1, f[4])
			}
			st.since = time.Unix(0, ns)
		}
		if _, dup := out[f[1]]; dup {
			return nil, fmt.Errorf("line %d: member %.40q twice", i+1, f[1])
		}
		out[f[1]] = st
	}
	return out, nil
}

func dash(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

// driverStatus is the driver's status of a member from the helper's.
func (st memberStatus) driverStatus(name string) driver.Status {
	out := driver.Status{Name: name, Version: st.version, Since: st.since, Detail: st.detail}
	switch st.state {
	case stateRunning:
		out.Running, out.PID, out.Detail = true, st.pid, ""
	case stateAdopted:
		out = driver.Status{Name: name, Running: true, PID: st.pid, Adopted: true}
	case stateNone:
		out.Version = ""
	}
	return out
}
