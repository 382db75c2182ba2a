package config

import (
	"time"

	"path/filepath"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// DefaultBackupTimeout bounds each backup call (the command, the
// restore check, the restore) left without a timeout: copying a
// member's data takes longer than a probe.
const DefaultBackupTimeout = Duration(5 * time.Minute)

// DefaultBackupKeep is how many backups of a member are kept once an
// upgrade completes.
const DefaultBackupKeep = 1

var backupKeepRange = countRange{1, 100, DefaultBackupKeep, "how many backups of each member are kept once an upgrade completes"}

// BackupPath is the directory (.Backup) of the backup of member taken
// by upgrade id: DIR/MEMBER/ID. ferry makes it, and keeps or removes
// only the directories in DIR/MEMBER.
func (b *Backup) BackupPath(member, id string) string {
	return filepath.Join(b.Dir, member, id)
}

// Calls lists the backup's calls by key, in the order they are made.
func (b *Backup) calls() []struct {
	key  string
	call *Call
} {
	return []struct {
		key  string
		call *Call
	}{{"command", b.Command}, {"check", b.Check}, {"restore", b.Restore}}
}

func (b *Backup) applyDefaults(pos positions) {
	if b.Keep == 0 && !pos.written("backup.keep") {
		b.Keep = DefaultBackupKeep
	}
	for _, c := range b.calls() {
		if c.call != nil {
			c.call.applyDefaults(DefaultBackupTimeout)
		}
	}
}

// backup checks a component's backup: a strategy that takes downtime
// (a restore while another member serves would lose the writes it
// took), an absolute directory outside every member's data, three exec
// calls (ferry makes them where it reads the backup's files for their
// checksum: its own machine, or over ssh the member's host), a sums
// file inside the backup.
func (v *validator) backup(comp *Component, cpath string, at func(string) int) {
	b := comp.Backup
	if b == nil {
		return
	}
	path := cpath + ".backup"
	if strategy.Downtime(string(comp.Strategy.Type), comp.Strategy.Settings(), comp.strategyMembers()) == "" {
		if _, known := strategy.Lookup(string(comp.Strategy.Type)); known {
			v.add(at("backup"), path, "strategy %s keeps members serving while others move, so a restore would lose the writes they took since the backup: a backup needs a strategy that takes every member down (this build: %s)",
				comp.Strategy.Type, strings.Join(strategy.TakingDowntime(), ", "))
		}
	}
	dir := strings.TrimSpace(b.Dir)
	switch {
	case dir == "":
		v.add(at("backup"), path+".dir", "must be set: the absolute directory the backups go in, outside the members' data")
	case IsTemplate(dir):
		v.add(at("backup.dir"), path+".dir", "must be a plain directory, not a template: each member's backup gets a directory of its own in it")
	case !filepath.IsAbs(dir) || filepath.Clean(dir) != dir:
		v.add(at("backup.dir"), path+".dir", "%q must be an absolute, clean path (ferry makes and removes backups in it)", b.Dir)
	}
	samples := v.samples(comp)
	if strings.TrimSpace(b.Data) == "" {
		v.add(at("backup"), path+".data", "must be set: the member's data directory (a template over the member), which the backups must stay out of")
	} else if dir != "" {
		for _, data := range v.render(at("backup.data"), path+".data", b.Data, samples) {
			switch {
			case !filepath.IsAbs(data):
				v.add(at("backup.data"), path+".data", "%q must be an absolute path", data)
			case pathWithin(dir, data) || pathWithin(data, dir):
				v.add(at("backup.dir"), path+".dir", "%s is not outside the member's data %s: a restore would read what the failed release wrote, and the data's removal would take the backups with it", dir, filepath.Clean(data))
			default:
				continue
			}
			break
		}
	}
	if s := b.Sums; s != "" && (filepath.IsAbs(s) || filepath.Clean(s) != s || s == "." || strings.HasPrefix(s, "..")) {
		v.add(at("backup.sums"), path+".sums", "%q must be a clean path relative to the backup's directory", s)
	}
	for _, c := range b.calls() {
		p := path + "." + c.key
		if c.call == nil {
			v.add(at("backup"), p, "must be set: the %s (an exec call; .Backup is the backup's directory)", backupCallDoc[c.key])
			continue
		}
		line := at("backup." + c.key)
		v.call(c.call, p, line, samples, false)
		if len(c.call.Exec) == 0 && (c.call.HTTP != "" || c.call.TCP != "") {
			v.add(line, p, "must be an exec call: ferry makes it where it reads the backup's files (its own machine, or the member's host on a substrate that keeps backups there: ssh)")
		}
	}
	if b.Keep != 0 || comp.pos.written("backup.keep") {
		v.count(at("backup.keep"), path+".keep", b.Keep, backupKeepRange)
	}
}

var backupCallDoc = map[string]string{
	"command": "command that writes the backup into .Backup",
	"check":   "restore check, passing when the backup in .Backup can be restored",
	"restore": "command that puts the data of .Backup back in place of the member's",
}

// pathWithin reports whether path p is dir or inside it.
func pathWithin(p, dir string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(p))
	return err == nil && (rel == "." || (rel != ".." && !strings.HasPrefix(rel, "../")))
}
