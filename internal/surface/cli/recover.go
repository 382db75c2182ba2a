package cli

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/api"
)

func recoverCmd(g *globals) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "recover",
		Short: "recover from a damaged store: restore its backup (with --yes; without, say what it would do)",
		Long: `Recover from a store file that exists but cannot be read (empty, truncated,
overwritten): every other command refuses it and writes nothing over it.

ferry keeps a backup of the store's records (not its events), DATA-DIR/ferry.db.bak,
written with every write of an upgrade's record that changes it (not with a
heartbeat) and before ferry acts on it: it holds every change ferry made
outside the members (a member out of the load balancer, a flag set).
recover restores it, keeping the damaged file beside it (ferry.db.damaged-TIME);
then 'ferry upgrade resume' goes on from there, or 'ferry upgrade abort' rolls
back: either first undoes what the record owes.

With no usable backup, it moves the damaged file aside and runs the undo of
every hook of the description that has one (every member's pre_stop, every
component's pre_phase, the cluster's pre_upgrade): the members back in the
load balancer, the flags unset. Undos are idempotent.

Without --yes it prints what it would do and exits 1, changing nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.recoverStore(cmd, yes)
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do it (without, print what it would do and exit 1)")
	return cmd
}

// recoverStore is 'ferry upgrade recover'.
func (g *globals) recoverStore(cmd *cobra.Command, yes bool) error {
	if g.remote() {
		return errors.New("recover works on a data directory, not through a server: run it on the server's host, with the server stopped, with --data-dir")
	}
	c, err := g.load()
	if err != nil {
		return err
	}
	var de *store.DamagedError
	if err := store.Diagnose(g.dataDir); !errors.As(err, &de) {
		fmt.Fprintf(g.stdout, "the store in %s is not damaged: nothing to recover\n", g.dataDir)
		return nil
	}
	fmt.Fprintf(g.stdout, "the store %s is damaged (%s)\n", de.Path, de.Problem)
	again := fmt.Sprintf("ferry upgrade recover -f %s --data-dir %s --yes", g.file, g.dataDir)
	if de.Backup != "" {
		u, ok, err := store.Backup(g.dataDir)
		if err != nil {
			return err
		}
		fmt.Fprintf(g.stdout, "recover restores its backup %s, written %s, and keeps the damaged file beside it\n",
			de.Backup, de.BackupTime.Local().Format(time.DateTime))
		next := "then nothing else is needed: the backup holds no upgrade"
		if ok {
			fmt.Fprintf(g.stdout, "the backup's upgrade %s: %s, %s → %s\n", u.ID, u.State, u.From, u.To)
			printEffects(g, api.FromRecord(u).Effects)
			if err := engine.CheckLock(u, c.Digest, c.File); err != nil {
				fmt.Fprintf(g.stdout, "note: %v\n", err)
			}
			next = "then nothing else is needed: its upgrade has ended"
			if !u.State.Terminal() {
				next = fmt.Sprintf("then 'ferry upgrade resume -f %s --data-dir %s' goes on with it, or 'ferry upgrade abort' rolls it back: either first undoes what it owes", g.file, g.dataDir)
			}
		}
		if !yes {
			return fmt.Errorf("nothing done: to do it, run '%s'", again)
		}
		unlock, err := lockForRecovery(g.dataDir)
		if err != nil {
			return err
		}
		defer unlock()
		aside, err := store.RestoreBackup(g.dataDir, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(g.stdout, "restored %s from its backup; the damaged file is %s\n%s\n", de.Path, dashIfEmpty(aside), next)
		return nil
	}

	fmt.Fprintf(g.stdout, "it has no usable backup: recover moves it aside (with its backup, if any), so that the next command starts a new store, "+
		"and undoes what an upgrade may have left, running the undo of every hook of %s that has one:\n", g.file)
	progress := func(msg string) { fmt.Fprintln(g.stdout, "  "+msg) }
	if !yes {
		// An engine over an empty store, to list the undos: the damaged
		// one is not opened.
		tmp, err := os.MkdirTemp("", "ferry-recover-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		st, err := store.OpenReadOnly(tmp)
		if err != nil {
			return err
		}
		e, _, err := g.engineWith(c, st, nil)
		if err != nil {
			return err
		}
		if err := e.UndoHooks(cmd.Context(), true, progress); err != nil {
			return err
		}
		return fmt.Errorf("nothing done: to do it, run '%s'", again)
	}
	unlock, err := lockForRecovery(g.dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	aside, err := store.MoveAside(g.dataDir, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "the damaged file is now %s\n", dashIfEmpty(aside))
	e, _, err := g.engineFor(c, nil)
	if err != nil {
		return err
	}
	if err := e.UndoHooks(cmd.Context(), false, progress); err != nil {
		return err
	}
	fmt.Fprintln(g.stdout, "done: nothing an upgrade changed outside the members is left")
	// What the members run now: without a journal ferry cannot know
	// where a member's move stood, so a member found down is said, not
	// started at a guessed release.
	snap, err := e.Observe(cmd.Context())
	if err != nil {
		return fmt.Errorf("the members could not be observed: %w ('ferry members -f %s' shows them)", err, g.file)
	}
	for _, m := range e.MembersView(snap, nil) {
		if m.Status == "down" {
			fmt.Fprintf(g.stdout, "member %s is down (%s): it was stopped mid-move; start it again at the release you want it on\n", m.Name, dash(m.Detail))
		}
	}
	return nil
}

// lockForRecovery takes the data directory's engine lock, so that no
// other ferry acts while the store is replaced (exit 3 when one holds it).
func lockForRecovery(dir string) (unlock func(), err error) {
	unlock, err = store.LockEngineDir(dir)
	if err != nil {
		return nil, &exitError{code: 3, err: fmt.Errorf("%w: stop it first", err)}
	}
	return unlock, nil
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "gone already"
	}
	return s
}
