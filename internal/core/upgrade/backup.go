package upgrade

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/step"
)

// A member's backup (its component's backup:, strategy offline): taken
// with the member stopped, verified before its release is installed,
// restored when the upgrade goes back (package step's backing-up and
// restoring). The record keeps where it is and ferry's checksum of each
// of its files, written before the restore is made: a backup that
// changed since is refused rather than restored. Every backup is kept
// until the upgrade completes; then the newest backup.keep of each
// member (ActPrune, before the post_upgrade hooks).

// ErrRefused marks an action's failure that no retry mends (a backup
// that does not verify): the member's move fails at once on it.
var ErrRefused = errors.New("refused")

// MemberBackup is one member's backup in an upgrade.
type MemberBackup struct {
	// Dir is the backup's directory (.Backup); Release the release whose
	// data it holds (the member's before its move).
	Dir     string `json:"dir,omitempty"`
	Release string `json:"release,omitempty"`
	// Sums are ferry's checksums of the backup's files, in path order,
	// as sha256sum writes them ("HEX  PATH" lines: checksum.Sums).
	Sums string `json:"sums,omitempty"`
	// Verified is when it was verified; Restored when it was restored.
	Verified time.Time `json:"verified,omitzero"`
	Restored time.Time `json:"restored,omitzero"`
}

// BackedUp folds the outcome of an ActBackup into the record: the
// checksums of the verified backup's files, or the failure (a refusal
// when it did not verify).
func BackedUp(u Upgrade, a Action, sums string, err error, took time.Duration, now time.Time) Upgrade {
	m := u.Members[a.Member]
	verified := err == nil && m != nil && m.Acting == a.Seq && m.Step == step.BackingUp && m.Backup.Dir == a.Backup
	u = Finished(u, a, err, took, now)
	if verified {
		// Finished made the member's record its own copy: set in place.
		m := u.Members[a.Member]
		b := m.Backup
		b.Sums, b.Verified = sums, now
		m.Backup = b
	}
	return u
}

// backupFacts are what the backup steps read of member m of comp.
func (s *stepper) backupFacts(comp *config.Component, m *Member) step.BackupFacts {
	return step.BackupFacts{
		Described: comp.Backup != nil,
		Back:      s.u.RollingBack(),
		Verified:  !m.Backup.Verified.IsZero(),
		Restored:  !m.Backup.Restored.IsZero(),
	}
}

// backupAction fills in a backup step's action for member m (s.edit's
// copy, the record written before the action): its backup's directory
// recorded first, going forward.
func (s *stepper) backupAction(comp *config.Component, m *Member, a *Action) bool {
	switch ActionKind(a.Kind) {
	case ActBackup:
		if comp.Backup == nil {
			return false
		}
		m.Backup = MemberBackup{Dir: comp.Backup.BackupPath(m.Name, s.u.ID), Release: m.From}
		a.Backup, a.Version = m.Backup.Dir, m.From
	case ActRestore:
		a.Backup, a.Sums, a.Version = m.Backup.Dir, m.Backup.Sums, m.Backup.Release
	}
	return true
}

// pruneBackups keeps, once the upgrade completes, the newest
// backup.keep backups of each member of every component that took one
// (ActPrune, made once per component like a hook list, before the
// post_upgrade hooks); it reports whether all are done.
func (s *stepper) pruneBackups() bool {
	u := &s.u
	if u.Ending != StateCompleted {
		return true
	}
	for i := range s.c.Components {
		comp := &s.c.Components[i]
		if comp.Backup == nil || !s.tookBackup(comp) || u.Pruned(comp.Name) {
			continue
		}
		list := "backup.keep"
		h := u.Hook
		if h == nil || h.List != list || h.Component != comp.Name {
			h = &HookRun{List: list, Component: comp.Name, Since: s.now}
			u.Hook = h
		}
		if h.Done {
			u.Hook = nil
			u.PrunedBackups = append(u.PrunedBackups[:len(u.PrunedBackups):len(u.PrunedBackups)], comp.Name)
			continue
		}
		what := fmt.Sprintf("keeping the newest %d backups of each member of %s", comp.Backup.Keep, comp.Name)
		if h.Acting != 0 {
			if s.inFlight(h.Acting) {
				s.wait("%s", what)
				return false
			}
			h.Acting = 0
		}
		if d := s.maxGateDeadline(); s.now.Sub(h.Since) > d {
			// The end stands (fail notes it): the backups are all kept.
			s.fail("%s failed for %s: %s", what, d, cmp.Or(h.Detail, "-"))
			u.Hook = nil
			u.PrunedBackups = append(u.PrunedBackups[:len(u.PrunedBackups):len(u.PrunedBackups)], comp.Name)
			continue
		}
		if !s.backoff(h.Tries, h.LastTry) {
			s.wait("%s: %s", what, cmp.Or(h.Detail, "-"))
			return false
		}
		h.Tries++
		h.LastTry = s.now
		h.Acting = s.act(Action{Kind: ActPrune, Component: comp.Name, Version: u.To})
		return false
	}
	return true
}

// tookBackup reports whether a member of comp has a backup in this
// upgrade.
func (s *stepper) tookBackup(comp *config.Component) bool {
	for _, cm := range comp.Members {
		if m := s.u.Members[cm.Name]; m != nil && m.Backup.Dir != "" {
			return true
		}
	}
	return false
}

// Pruned reports whether comp's backups were pruned as the upgrade
// completed.
func (u *Upgrade) Pruned(comp string) bool {
	for _, c := range u.PrunedBackups {
		if c == comp {
			return true
		}
	}
	return false
}
