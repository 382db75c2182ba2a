package ssh

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// A member's backup on its own host (capability backup-on-host): the
// description's backup commands run there through the helper's host
// operation, like a host's lock, and the backup's files are made
// empty, checksummed, read and pruned there by the helper's b*
// operations, so that ferry's checks (the sums, the restore check, the
// sums again before a restore) are of the files the host keeps, never
// copied to ferry's machine.

var _ driver.HostBackups = (*Driver)(nil)

// BackupRun runs argv on host, in its hosts directory, as a host's
// command: stopped there if ferry gives up on it.
func (d *Driver) BackupRun(ctx context.Context, host string, argv []string, timeout time.Duration) (string, error) {
	return d.runHostOut(ctx, "backup command", driver.HostCommand{Host: host, Argv: argv, Timeout: timeout})
}

// BackupEmpty makes dir an empty directory on host.
func (d *Driver) BackupEmpty(ctx context.Context, host, dir string) error {
	_, err := d.backupOp(ctx, host, "emptying "+dir, "bempty", dir)
	return err
}

// BackupSums are the sums of the files under dir on host.
func (d *Driver) BackupSums(ctx context.Context, host, dir string, skip []string) (string, error) {
	if len(skip) > 1 {
		return "", fmt.Errorf("ssh driver: the sums of %s on host %s: at most one file left out, not %d", dir, host, len(skip))
	}
	return d.backupOp(ctx, host, "the sums of "+dir, "bsums", append([]string{dir}, skip...)...)
}

// BackupRead reads the file at path on host, up to limit bytes.
func (d *Driver) BackupRead(ctx context.Context, host, path string, limit int64) ([]byte, error) {
	out, err := d.backupOp(ctx, host, "reading "+path, "bread", path)
	if err != nil {
		return nil, err
	}
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("ssh driver: %s on host %s is longer than %d bytes", path, host, limit)
	}
	return []byte(out), nil
}

// BackupPrune keeps the newest keep directories in dir on host.
func (d *Driver) BackupPrune(ctx context.Context, host, dir string, keep int) ([]string, error) {
	out, err := d.backupOp(ctx, host, "pruning "+dir, "bprune", dir, strconv.Itoa(keep))
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// backupOp runs the helper's operation op on host (what: for errors)
// and returns its output.
func (d *Driver) backupOp(ctx context.Context, host, what, op string, args ...string) (string, error) {
	cn, err := d.hostConn(host)
	if err != nil {
		return "", fmt.Errorf("ssh driver: %s: %w", what, err)
	}
	line, err := helper(false, op, args...)
	if err != nil {
		return "", fmt.Errorf("ssh driver: %s on host %s: %w", what, host, err)
	}
	r, err := cn.run(ctx, line, nil) // bounded by the caller's action
	if err != nil {
		return "", fmt.Errorf("ssh driver: %s on host %s: %w", what, host, err)
	}
	if r.code != 0 {
		return "", fmt.Errorf("ssh driver: %w", cn.failure(what, r))
	}
	return string(r.stdout), nil
}
