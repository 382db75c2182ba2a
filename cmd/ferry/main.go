// Command ferry is the rolling-upgrade orchestrator's single binary:
// the CLI, the per-host agent and the embedded demo.
package main

import (
	"os"

	"github.com/ferry-upgrade/ferry/internal/surface/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
