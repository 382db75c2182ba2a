// Command agentmain runs agent.Serve as its own process, for the
// agent's crash tests: `agentmain -listen ADDR -dir DIR -token-file F`.
// `agentmain version -o json` answers as `ferry version -o json` does,
// so that an agent may re-execute itself on another build of it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		json.NewEncoder(os.Stdout).Encode(buildinfo.Running())
		return
	}
	listen := flag.String("listen", "127.0.0.1:0", "listen address")
	dir := flag.String("dir", "", "agent directory")
	tokenFile := flag.String("token-file", "", "token file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := agent.Serve(ctx, *listen, agent.Config{Dir: *dir, TokenFile: *tokenFile, Logger: log}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
