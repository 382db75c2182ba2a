// Package all links every substrate of this build: a program (or a
// test) that reads descriptions imports it for its side effect, so that
// each substrate's package registers itself (package substrate).
// Adding a substrate to the build is one import here.
package all

import (
	// Each registers itself in its init.
	_ "github.com/ferry-upgrade/ferry/internal/substrate/kubernetes"
	_ "github.com/ferry-upgrade/ferry/internal/substrate/process"
	_ "github.com/ferry-upgrade/ferry/internal/substrate/ssh"
)
