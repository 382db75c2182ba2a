package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/bundle"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/server"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

func bundleCmd(g *globals) *cobra.Command {
	var out string
	var lines int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "bundle [UPGRADE-ID] [-o FILE]",
		Short: "write a troubleshooting bundle of an upgrade: record, events, members' output, versions, health; secrets redacted",
		Long: `Write one archive (tar.gz, mode 0600; default bundle-UPGRADE-ID.tar.gz) with
what it takes to understand an upgrade without access to the cluster: the
description with its secrets redacted and its SHA-256 as recorded, the plan,
the record and every event (hook outputs as recorded), each member's output of
its current and previous instances (from its agent; on Kubernetes its pod's
logs, and the last output of each pod the upgrade replaced, kept in the events
before the pod went), the members, versions and
health now, the impact report if any, the builds of ferry and of each agent, a
manifest and a summary.txt to read first. Without UPGRADE-ID: the current
upgrade, or the last one.

Whatever cannot be collected (an agent that does not answer, a description
that no longer loads) is named in the bundle with the reason, and the rest is
written. The store is opened read-only: it works on a data directory that
cannot be written. With --addr the server builds it (GET
/v1/upgrades/{id}/bundle). The bundle's README.md says what was redacted.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			if lines < 1 || lines > 10000 {
				return fmt.Errorf("--log-lines %d: want 1 to 10000", lines)
			}
			if g.remote() {
				return g.remoteBundle(cmd.Context(), id, out, lines)
			}
			return g.localBundle(cmd.Context(), id, out, lines, timeout)
		},
	}
	// Named like the global --output, which it replaces here: -o is the
	// bundle's file, as for tar and curl.
	cmd.Flags().StringVarP(&out, "output", "o", "", "the bundle's file (default bundle-UPGRADE-ID.tar.gz here; - writes it to stdout)")
	cmd.Flags().IntVar(&lines, "log-lines", bundle.DefaultLogLines, "the last lines kept of each member instance's output (1 to 10000; each at most 1 MiB)")
	cmd.Flags().DurationVar(&timeout, "timeout", bundle.DefaultTimeout, "how long to ask the cluster (outputs, versions, health) before writing the bundle with what came")
	return cmd
}

// localBundle writes the bundle from the data directory, opened
// read-only, and from the cluster as the description reaches it.
func (g *globals) localBundle(ctx context.Context, id, out string, lines int, timeout time.Duration) error {
	st, err := store.OpenReadOnly(g.dataDir)
	if err != nil {
		return err
	}
	u, err := bundle.Resolve(st, id)
	if err != nil {
		if errors.Is(err, bundle.ErrNoUpgrade) {
			return fmt.Errorf("%w (data directory %s; 'ferry events --all' lists every upgrade's events)", err, g.dataDir)
		}
		return err
	}
	cfg := bundle.Config{Store: st, ID: u.ID, DataDir: g.dataDir, DescriptionFile: g.file, By: requester(),
		LogLines: lines, Timeout: timeout}
	cfg.Description, cfg.DescriptionErr = safefile.Read(g.file, config.MaxFileSize, safefile.DefaultTimeout)
	// The server's API token, if a server ran on this data directory:
	// held to be scrubbed, never written.
	if tok, err := safefile.Read(filepath.Join(g.dataDir, server.TokenFile), 4096, safefile.DefaultTimeout); err == nil {
		cfg.Secrets = append(cfg.Secrets, strings.TrimSpace(string(tok)))
	}
	g.bundleLive(ctx, &cfg, st, timeout)

	if out == "" {
		out = bundle.FileName(u.ID)
	}
	var man *bundle.Manifest
	write := func(w io.Writer) error {
		man, err = bundle.Write(ctx, w, cfg)
		return err
	}
	if out == "-" {
		err = write(g.stdout)
	} else {
		// Readable by its owner only: a bundle is about the cluster, if
		// not its secrets.
		err = safefile.WriteAtomic(out, 0o600, write)
	}
	if err != nil {
		return err
	}
	g.reportBundle(man, out)
	return nil
}

// bundleLive loads the description and builds the engine that observes
// the cluster; what fails is said in the bundle (LiveErr), not here.
func (g *globals) bundleLive(ctx context.Context, cfg *bundle.Config, st *store.Store, timeout time.Duration) {
	c, err := g.load()
	if err != nil {
		cfg.LiveErr = fmt.Errorf("%s does not load: %w", g.file, err)
		return
	}
	cfg.Cluster = c
	d, err := newDriver(c, g.driverLogger())
	if err != nil {
		cfg.LiveErr = fmt.Errorf("the %s driver: %w", c.Substrate, err)
		return
	}
	cfg.Driver = d
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := engine.Discover(dctx, c, d); err != nil {
		cfg.LiveErr = fmt.Errorf("the members of the workloads: %w", err)
		return
	}
	e, err := engine.New(engine.Config{Cluster: c, Driver: d, Store: st, Logger: g.logger()})
	if err != nil {
		cfg.LiveErr = err
		return
	}
	cfg.Live = e
}

// reportBundle says what was written, and what is missing from it.
func (g *globals) reportBundle(man *bundle.Manifest, out string) {
	w := g.stdout
	if out == "-" {
		w = g.stderr
	}
	where := out
	if out == "-" {
		where = "stdout"
	}
	fmt.Fprintf(w, "bundle of upgrade %s (%s) written to %s: %d files, %d value(s) of the description redacted\n",
		man.Upgrade, man.State, where, len(man.Files), man.Redacted)
	if n := len(man.NotCollected); n > 0 {
		fmt.Fprintf(w, "not collected (%d), named in its summary.txt and manifest.json:\n", n)
		for _, m := range man.NotCollected {
			fmt.Fprintf(w, "  - %s: %s\n", m.What, m.Why)
		}
	}
	if out != "-" {
		fmt.Fprintf(w, "read first: tar -xzOf %s %s/summary.txt\n", out, strings.TrimSuffix(bundle.FileName(man.Upgrade), ".tar.gz"))
	}
}

// remoteBundle asks the server for the bundle.
func (g *globals) remoteBundle(ctx context.Context, id, out string, lines int) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	if id == "" {
		id = "current"
	}
	if out == "-" {
		_, err := c.Bundle(ctx, id, lines, g.stdout)
		return remoteErr(err)
	}
	path := out
	if path == "" {
		path = ".ferry-bundle-download" // renamed to the server's name below
	}
	var name string
	err = safefile.WriteAtomic(path, 0o600, func(w io.Writer) error {
		var err error
		name, err = c.Bundle(ctx, id, lines, w)
		return err
	})
	if err != nil {
		return remoteErr(err)
	}
	if out == "" {
		out = bundle.FileName(id)
		if b := filepath.Base(name); strings.HasPrefix(b, "bundle-") && strings.HasSuffix(b, ".tar.gz") && bundle.ValidID(strings.TrimSuffix(strings.TrimPrefix(b, "bundle-"), ".tar.gz")) {
			out = b
		}
		if err := os.Rename(path, out); err != nil {
			os.Remove(path)
			return err
		}
	}
	fmt.Fprintf(g.stdout, "bundle written to %s by the server at %s\n", out, g.addr)
	return nil
}

// requester says who wrote a bundle, for its manifest.
func requester() string {
	who := fmt.Sprintf("uid %d", os.Getuid())
	if u, err := user.Current(); err == nil {
		who = fmt.Sprintf("%s (uid %s)", u.Username, u.Uid)
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s on %s, 'ferry bundle' (pid %d)", who, host, os.Getpid())
}
