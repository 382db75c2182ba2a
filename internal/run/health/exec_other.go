//go:build !unix

package health

import "os/exec"

// killGroup leaves the default: the command alone is killed when its
// context ends.
func killGroup(*exec.Cmd) {}
