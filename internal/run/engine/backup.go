package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// The backup steps of a member whose component describes a backup
// (upgrade.ActBackup, ActRestore, ActPrune): the description's exec
// calls, made by ferry on its own machine, and ferry's own checksum of
// the backup's files there; or, on a substrate that keeps backups on
// the member's host (backup-on-host: ssh), both on that host through
// the driver (hostBackups). A backup that does not verify is
// upgrade.ErrRefused: its move fails at once, nothing installed.

// Backups is where the backup steps' files are. ferry reads them (their
// checksums, the sums file the command wrote), makes each backup's
// directory empty before its command runs, and prunes old ones; the
// description's calls do the rest.
type Backups interface {
	// Empty makes dir an empty directory (its parents made).
	Empty(dir string) error
	// Sums are the SHA-256 of every file under dir, in path order,
	// skip left out; anything but files and directories is refused.
	Sums(ctx context.Context, dir string, skip ...string) ([]checksum.Sum, error)
	// ReadFile reads the file at path (a backup's sums file).
	ReadFile(path string) ([]byte, error)
	// Prune keeps the newest keep directories in dir (by modification
	// time), removes the others and returns them; a dir that does not
	// exist has none.
	Prune(ctx context.Context, dir string, keep int) ([]string, error)
}

// FileBackups are backups on ferry's own file system.
type FileBackups struct{}

func (FileBackups) Empty(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o700)
}

func (FileBackups) Sums(ctx context.Context, dir string, skip ...string) ([]checksum.Sum, error) {
	return checksum.Dir(ctx, dir, skip...)
}

func (FileBackups) ReadFile(path string) ([]byte, error) {
	f, _, err := safefile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxSumsFile))
}

// maxSumsFile bounds a sums file: a line per file of a backup.
const maxSumsFile = 16 << 20

func (FileBackups) Prune(ctx context.Context, dir string, keep int) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	type backup struct {
		name string
		at   time.Time
	}
	var bs []backup
	var errs []error
	for _, ent := range entries {
		if !ent.IsDir() {
			continue
		}
		info, err := ent.Info()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		bs = append(bs, backup{ent.Name(), info.ModTime()})
	}
	sort.Slice(bs, func(i, j int) bool {
		if !bs[i].at.Equal(bs[j].at) {
			return bs[i].at.After(bs[j].at)
		}
		return bs[i].name > bs[j].name
	})
	var removed []string
	for _, old := range bs[min(len(bs), keep):] {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		p := filepath.Join(dir, old.name)
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// hostBackups are the backup files of a member on its host, through
// the driver, for the calls made with ctx.
type hostBackups struct {
	ctx  context.Context
	d    driver.HostBackups
	host string
}

func (h hostBackups) Empty(dir string) error { return h.d.BackupEmpty(h.ctx, h.host, dir) }

func (h hostBackups) Sums(ctx context.Context, dir string, skip ...string) ([]checksum.Sum, error) {
	text, err := h.d.BackupSums(ctx, h.host, dir, skip)
	if err != nil {
		return nil, err
	}
	return checksum.ParseSums(text, "the sums of "+dir+" on host "+h.host)
}

func (h hostBackups) ReadFile(path string) ([]byte, error) {
	return h.d.BackupRead(h.ctx, h.host, path, maxSumsFile)
}

func (h hostBackups) Prune(ctx context.Context, dir string, keep int) ([]string, error) {
	return h.d.BackupPrune(ctx, h.host, dir, keep)
}

// backupCall makes one of a backup's calls with data; ok and what it
// answered.
type backupCall func(ctx context.Context, c config.Call, data config.TemplateData) (ok bool, detail string)

// backupsOf is where member n's backup files are, and how its backup's
// calls are made: on the member's host through the driver when it
// keeps backups there (driver.HostBackups: capability backup-on-host),
// on ferry's machine otherwise.
func (e *Engine) backupsOf(ctx context.Context, n string) (Backups, backupCall) {
	local := func(ctx context.Context, c config.Call, data config.TemplateData) (bool, string) {
		r := e.prober.Do(ctx, c, data)
		return r.OK, r.Detail
	}
	hb, ok := e.cfg.Driver.(driver.HostBackups)
	info, known := e.members[n]
	if !ok || !known || info.member.Host == "" {
		return e.cfg.Backups, local
	}
	host := info.member.Host
	return hostBackups{ctx: ctx, d: hb, host: host}, func(ctx context.Context, c config.Call, data config.TemplateData) (bool, string) {
		argv := make([]string, len(c.Exec))
		for i, a := range c.Exec {
			var err error
			if argv[i], err = config.Render(a, data); err != nil {
				return false, fmt.Sprintf("exec[%d]: %v", i, err)
			}
		}
		if len(argv) == 0 {
			return false, "not an exec call: a backup on the member's host runs a command there"
		}
		out, err := hb.BackupRun(ctx, host, argv, c.Timeout.D())
		if err != nil {
			return false, err.Error()
		}
		return true, fmt.Sprintf("%s ran on host %s%s", argv[0], host, tail(out))
	}
}

// tail is the last line of a command's output, as a suffix ("" for none).
func tail(out string) string {
	out = strings.TrimSpace(out)
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		out = out[i+1:]
	}
	if out == "" {
		return ""
	}
	if len(out) > 200 {
		out = out[:200] + "..."
	}
	return ": " + out
}

// backupTimeout bounds a backup action: its calls, and the checksums
// (read twice) of what they wrote.
func backupTimeout(b *config.Backup, a upgrade.Action) time.Duration {
	const sums = 2 * time.Minute
	switch a.Kind {
	case upgrade.ActBackup:
		return actionMargin + b.Command.Timeout.D() + b.Check.Timeout.D() + 2*sums
	case upgrade.ActRestore:
		return actionMargin + b.Restore.Timeout.D() + sums
	}
	return actionMargin + sums
}

// backupOf is the backup described for member n's component, and the
// data of its calls with .Backup dir.
func (e *Engine) backupOf(n, version, dir string) (*config.Backup, config.TemplateData, error) {
	info, ok := e.members[n]
	if !ok {
		return nil, config.TemplateData{}, fmt.Errorf("unknown member %q", n)
	}
	b := info.comp.Backup
	if b == nil {
		return nil, config.TemplateData{}, fmt.Errorf("%s describes no backup", info.comp.Name)
	}
	if want := b.BackupPath(n, ""); filepath.Dir(dir) != filepath.Clean(want) {
		// The record names a directory ferry made for this member: any
		// other is not ferry's to empty or restore from.
		return nil, config.TemplateData{}, fmt.Errorf("%w: backup directory %s is not in %s", upgrade.ErrRefused, dir, want)
	}
	data := e.callData(n, "", version)
	data.Backup = dir
	return b, data, nil
}

// backup backs member a.Member up into a.Backup and verifies it; it
// returns ferry's sums of its files (sha256sum's format).
func (e *Engine) backup(ctx context.Context, a upgrade.Action) (detail, sums string, err error) {
	b, data, err := e.backupOf(a.Member, a.Version, a.Backup)
	if err != nil {
		return "", "", err
	}
	fs, call := e.backupsOf(ctx, a.Member)
	// Anew: a try lost with ferry's process may have left half of one.
	if err := fs.Empty(a.Backup); err != nil {
		return "", "", err
	}
	ok, ran := call(ctx, *b.Command, data)
	if !ok {
		return "", "", fmt.Errorf("backup command: %s", ran)
	}
	where := ""
	if _, onHost := fs.(hostBackups); onHost {
		where = " (its command: " + ran + ")"
	}
	var skip []string
	if b.Sums != "" {
		skip = append(skip, filepath.ToSlash(b.Sums))
	}
	got, err := fs.Sums(ctx, a.Backup, skip...)
	if err != nil {
		return "", "", fmt.Errorf("%w: checksum of the backup: %w", upgrade.ErrRefused, err)
	}
	if len(got) == 0 {
		return "", "", fmt.Errorf("%w: the backup command wrote no file into %s", upgrade.ErrRefused, a.Backup)
	}
	if b.Sums != "" {
		text, err := fs.ReadFile(filepath.Join(a.Backup, b.Sums))
		if err != nil {
			return "", "", fmt.Errorf("%w: the backup's sums file: %w", upgrade.ErrRefused, err)
		}
		want, err := checksum.ParseSums(string(text), b.Sums)
		if err != nil {
			return "", "", fmt.Errorf("%w: %w", upgrade.ErrRefused, err)
		}
		if d := checksum.Compare(got, want); d != "" {
			return "", "", fmt.Errorf("%w: checksum: %s (%s)", upgrade.ErrRefused, d, b.Sums)
		}
	}
	if ok, detail := call(ctx, *b.Check, data); !ok {
		if ctx.Err() != nil {
			return "", "", fmt.Errorf("restore check: %s", detail)
		}
		return "", "", fmt.Errorf("%w: restore check: %s", upgrade.ErrRefused, detail)
	}
	again, err := fs.Sums(ctx, a.Backup, skip...)
	if err != nil {
		return "", "", fmt.Errorf("%w: checksum of the backup after its restore check: %w", upgrade.ErrRefused, err)
	}
	if d := checksum.Compare(again, got); d != "" {
		return "", "", fmt.Errorf("%w: the backup changed during its restore check: %s", upgrade.ErrRefused, d)
	}
	return fmt.Sprintf("%s in %s, checksummed, restore check passed%s", files(len(got)), a.Backup, where), checksum.FormatSums(got), nil
}

// restore checks member a.Member's backup against the sums recorded
// when it was verified, then restores it.
func (e *Engine) restore(ctx context.Context, a upgrade.Action) (string, error) {
	b, data, err := e.backupOf(a.Member, a.Version, a.Backup)
	if err != nil {
		return "", err
	}
	want, err := checksum.ParseSums(a.Sums, "the record's sums")
	if err != nil {
		return "", fmt.Errorf("%w: %w", upgrade.ErrRefused, err)
	}
	var skip []string
	if b.Sums != "" {
		skip = append(skip, filepath.ToSlash(b.Sums))
	}
	fs, call := e.backupsOf(ctx, a.Member)
	got, err := fs.Sums(ctx, a.Backup, skip...)
	if err != nil {
		return "", fmt.Errorf("%w: checksum of the backup: %w", upgrade.ErrRefused, err)
	}
	if d := checksum.Compare(got, want); d != "" {
		return "", fmt.Errorf("%w: the backup changed since it was verified: %s; not restored", upgrade.ErrRefused, d)
	}
	if ok, detail := call(ctx, *b.Restore, data); !ok {
		return "", fmt.Errorf("restore command: %s", detail)
	}
	return fmt.Sprintf("%s checked, restored from %s", files(len(got)), a.Backup), nil
}

// pruneBackups keeps the newest backup.keep backups of each member of
// component a.Component (the directories ferry made in DIR/MEMBER),
// removing the others.
func (e *Engine) pruneBackups(ctx context.Context, a upgrade.Action) (string, error) {
	comp := e.c.Component(a.Component)
	if comp == nil || comp.Backup == nil {
		return "", fmt.Errorf("component %q describes no backup", a.Component)
	}
	var removed []string
	var errs []error
	for _, m := range comp.Members {
		fs, _ := e.backupsOf(ctx, m.Name)
		gone, err := fs.Prune(ctx, filepath.Dir(comp.Backup.BackupPath(m.Name, "x")), comp.Backup.Keep)
		removed = append(removed, gone...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	if len(removed) == 0 {
		return fmt.Sprintf("kept the newest %d of each member: nothing older", comp.Backup.Keep), nil
	}
	return fmt.Sprintf("kept the newest %d of each member; removed %s", comp.Backup.Keep, strings.Join(removed, ", ")), nil
}

func files(n int) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}
