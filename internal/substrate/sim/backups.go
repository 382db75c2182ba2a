package sim

import (
	"context"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
)

// backups are the backup steps' files in a simulation: none. A backup
// holds one file whose sums always match, and nothing is pruned: the
// simulated world writes no file, and a simulation of a description
// must not touch the directories it names.
type backups struct{}

// backupSum is the SHA-256 of a simulated backup's one file.
var backupSum = strings.Repeat("0", 64)

func (backups) Empty(string) error { return nil }

func (backups) Sums(context.Context, string, ...string) ([]checksum.Sum, error) {
	return []checksum.Sum{{Path: "data", SHA256: backupSum}}, nil
}

func (backups) ReadFile(string) ([]byte, error) {
	return []byte(checksum.FormatSums([]checksum.Sum{{Path: "data", SHA256: backupSum}})), nil
}

func (backups) Prune(context.Context, string, int) ([]string, error) { return nil, nil }

// rewriteBackup makes a component's backup calls the sim's (answered
// like hooks).
func rewriteBackup(comp *config.Component, sim func(kind string, call config.Call) config.Call) {
	if comp.Backup == nil {
		return
	}
	b := *comp.Backup
	for _, c := range []**config.Call{&b.Command, &b.Check, &b.Restore} {
		if *c != nil {
			r := sim(callHook, **c)
			*c = &r
		}
	}
	comp.Backup = &b
}
