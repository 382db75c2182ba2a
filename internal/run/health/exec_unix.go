//go:build unix

package health

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// killGroup runs cmd in a process group of its own and, when its
// context ends, kills the whole group: a hook that is a script does not
// leave its children running after its timeout.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
}
