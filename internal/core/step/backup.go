package step

// The steps of a member whose component describes a backup (config's
// backup:, with strategy offline: StarlingX's simplex upgrade). Going
// forward the member is stopped, then backed up and the backup verified
// before anything is installed; going back (an abort, a rollback) the
// member is stopped, then its data restored from that backup before
// its release is started again. The restore is the backup's undo: the
// data as it was when the member stopped, so no write acknowledged
// before the stop is lost (what the failed release acknowledged is).
const (
	// BackingUp runs the component's backup command into the member's
	// backup directory, then verifies it: ferry's checksum of its files
	// (against the sums file the command wrote, if described), the
	// restore check, the checksum again. A backup that does not verify
	// fails the move at once: nothing was installed.
	BackingUp Name = "backing-up"
	// Restoring checks the backup's files against the checksums
	// recorded when it was taken, then runs the restore command.
	Restoring Name = "restoring"
)

const (
	ActBackup  Action = "backup"  // back the member's data up and verify the backup
	ActRestore Action = "restore" // restore the member's data from its verified backup
)

// BackupFacts are what the backup steps read of a member.
type BackupFacts struct {
	// Described: the member's component describes a backup.
	Described bool
	// Back: the upgrade goes back (an abort, a rollback).
	Back bool
	// Verified: a backup of the member was taken and verified in this
	// upgrade; Restored: it was restored since.
	Verified, Restored bool
}

var backingUp = Def{
	Name: BackingUp, Action: ActBackup,
	// Once per upgrade, going forward: a member moved again (a resume
	// after a pause) keeps the backup of its release before.
	Skip:     func(f Facts) bool { return !f.Backup.Described || f.Backup.Back || f.Backup.Verified },
	Complete: func(f Facts) bool { return f.Acted },
}

var restoring = Def{
	Name: Restoring, Action: ActRestore,
	// Going back, once, when there is a verified backup: a member that
	// failed before its backup verified has nothing to restore (its
	// data was never touched by the release it did not get).
	Skip:     func(f Facts) bool { return !f.Backup.Back || !f.Backup.Verified || f.Backup.Restored },
	Complete: func(f Facts) bool { return f.Acted },
}
