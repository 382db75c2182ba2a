//go:build !linux

package agent

import "errors"

// procStat needs /proc; without it no process can be re-adopted after
// an agent restart (they are reported as exited, status unknown).
func procStat(pid int) (state byte, start uint64, err error) {
	return 0, 0, errors.New("process start times need /proc (Linux)")
}

func findMemberProcess(cwd, exe string) (pid int, start uint64, ok bool) { return 0, 0, false }
