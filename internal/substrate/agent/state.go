package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// record is what the agent persists of a member in Dir/state/<name>.json
// after every change, so that a new agent finds its members again.
type record struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
	// Artifact is the agent's copy the process was started from.
	Artifact string            `json:"artifact"`
	Args     []string          `json:"args,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	// StopTimeoutMS is the default for stops that give no timeout.
	StopTimeoutMS int64 `json:"stop_timeout_ms,omitempty"`
	// Restart is the restart policy (RestartNo, RestartOnFailure).
	Restart string `json:"restart,omitempty"`
	// StopSignal is the graceful stop's signal ("" is SIGTERM).
	StopSignal string `json:"stop_signal,omitempty"`
	// Adopted: the process was found by an adopt request, not started
	// by an agent; its version is not known here.
	Adopted bool `json:"adopted,omitempty"`
	// FilesDigest is filesDigest of the files the last PUT wrote (the
	// files themselves are not kept here: they may hold secrets).
	FilesDigest string `json:"files_digest,omitempty"`
	// Restarts counts the agent's restarts since the last PUT start;
	// Instance the processes started for the member.
	Restarts int `json:"restarts,omitempty"`
	Instance int `json:"instance,omitempty"`
	// RestartPending is set while a restart is scheduled, so that a new
	// agent makes it if this one died first.
	RestartPending bool `json:"restart_pending,omitempty"`

	// Starting is written just before a process is started, and
	// cleared once its pid is recorded: if the agent dies in between, a
	// new agent looks for that process (see adopt).
	Starting *pending `json:"starting,omitempty"`

	// Running says whether PID was running at the last write; a new
	// agent checks PID and StartTime against /proc before trusting it.
	Running bool `json:"running"`
	PID     int  `json:"pid"`
	// StartTime is field 22 of /proc/<pid>/stat (clock ticks since
	// boot): with PID, it names one process even after pid reuse.
	StartTime uint64    `json:"start_time"`
	Since     time.Time `json:"since"`
	Detail    string    `json:"detail,omitempty"`
	ExitCode  *int      `json:"exit_code"`
}

// pending is a start in progress: what is started, and how.
type pending struct {
	Version       string            `json:"version"`
	SHA256        string            `json:"sha256"`
	Artifact      string            `json:"artifact"`
	Args          []string          `json:"args,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	StopTimeoutMS int64             `json:"stop_timeout_ms,omitempty"`
	Restart       string            `json:"restart,omitempty"`
	StopSignal    string            `json:"stop_signal,omitempty"`
	FilesDigest   string            `json:"files_digest,omitempty"`
	// Restarts is the member's count once this start is done: 0 for a
	// PUT, one more for a restart.
	Restarts int       `json:"restarts,omitempty"`
	Since    time.Time `json:"since"`
}

// running returns the record of pd once its process runs as pid.
func (pd *pending) running(name string, instance, pid int, start uint64) record {
	return record{
		Name:          name,
		Version:       pd.Version,
		SHA256:        pd.SHA256,
		Artifact:      pd.Artifact,
		Args:          pd.Args,
		Env:           pd.Env,
		StopTimeoutMS: pd.StopTimeoutMS,
		Restart:       pd.Restart,
		StopSignal:    pd.StopSignal,
		FilesDigest:   pd.FilesDigest,
		Restarts:      pd.Restarts,
		Instance:      instance,
		Running:       true,
		PID:           pid,
		StartTime:     start,
		Since:         pd.Since,
	}
}

// again returns the start that restarts the member of r as it was.
func (r *record) again(now time.Time) pending {
	return pending{
		Version:       r.Version,
		SHA256:        r.SHA256,
		Artifact:      r.Artifact,
		Args:          r.Args,
		Env:           r.Env,
		StopTimeoutMS: r.StopTimeoutMS,
		Restart:       r.Restart,
		StopSignal:    r.StopSignal,
		FilesDigest:   r.FilesDigest,
		Restarts:      r.Restarts + 1,
		Since:         now,
	}
}

func (r *record) status() wire.Status {
	st := wire.Status{
		Name:     r.Name,
		Running:  r.Running,
		Version:  r.Version,
		SHA256:   r.SHA256,
		Since:    r.Since,
		Detail:   r.Detail,
		ExitCode: r.ExitCode,
		Restart:  r.Restart,
		Restarts: r.Restarts,
		Instance: r.Instance,
		Adopted:  r.Adopted,
	}
	if st.Restart == "" {
		st.Restart = wire.RestartNo
	}
	if r.Running {
		st.PID = r.PID
		st.Detail = ""
		st.ExitCode = nil
	}
	return st
}

func (s *Server) statePath(name string) string {
	return filepath.Join(s.dir, "state", name+".json")
}

// writeRecord writes the record atomically: a temporary file in the
// same directory, synced, then renamed over the old one.
func (s *Server) writeRecord(r *record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := safefile.WriteFileAtomic(s.statePath(r.Name), 0o600, append(b, '\n')); err != nil {
		return fmt.Errorf("state of %s: %w", r.Name, err)
	}
	return nil
}

// readRecords reads every state file. Leftover temporary files (from a
// crash mid-write) are removed; files that are not valid records are
// reported and skipped, never fatal: one bad file must not keep the
// agent from answering for the other members.
func (s *Server) readRecords() ([]*record, error) {
	dir := filepath.Join(s.dir, "state")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var recs []*record
	for _, e := range ents {
		n := e.Name()
		if strings.HasSuffix(n, ".tmp") {
			os.Remove(filepath.Join(dir, n))
			continue
		}
		name, ok := strings.CutSuffix(n, ".json")
		if !ok || !wire.ValidName(name) || !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil || r.Name != name {
			s.log.Error("ignoring unreadable member state", "file", filepath.Join(dir, n), "err", err)
			continue
		}
		recs = append(recs, &r)
	}
	return recs, nil
}
