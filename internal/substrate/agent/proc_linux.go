package agent

import (
	"os"
	"path/filepath"
	"strconv"
)

// procStat reads /proc/<pid>/stat and returns the process state (field
// 3) and start time in clock ticks since boot (field 22). The start
// time tells a process from a later one that reused its pid.
func procStat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseStat(b)
}

// findMemberProcess looks for a session leader whose working directory
// is cwd and whose executable is exe: a member process started by an
// agent that died before recording its pid.
func findMemberProcess(cwd, exe string) (pid int, start uint64, ok bool) {
	// /proc shows resolved paths.
	if r, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = r
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, false
	}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := "/proc/" + e.Name()
		if c, err := os.Readlink(dir + "/cwd"); err != nil || c != cwd {
			continue
		}
		if x, err := os.Readlink(dir + "/exe"); err != nil || x != exe {
			continue
		}
		b, err := os.ReadFile(dir + "/stat")
		if err != nil {
			continue
		}
		state, st, err := parseStat(b)
		if err != nil || state == 'Z' || state == 'X' || sessionOf(b) != p {
			continue
		}
		return p, st, true
	}
	return 0, 0, false
}
