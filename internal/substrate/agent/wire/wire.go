// Package wire is the agent's HTTP API as both ends see it: the bodies
// ferry's process driver sends and the agent answers, their error codes
// and the names each side checks. The driver imports this, not the
// agent's server.
package wire

import (
	"regexp"
	"syscall"
	"time"
)

// Error codes of the API. Every error response is an ErrorBody with
// one of these codes.
const (
	CodeBadRequest       = "bad_request"       // 400: malformed or invalid input
	CodeUnauthorized     = "unauthorized"      // 401: missing or wrong token
	CodeNotFound         = "not_found"         // 404: unknown member or endpoint
	CodeChecksumMismatch = "checksum_mismatch" // 422: artifact does not have the sha256
	CodeArtifactUnknown  = "artifact_unknown"  // 403: the artifact is not in the agent's store
	CodeTooLarge         = "too_large"         // 413: an upload over the agent's bound
	CodeUploadAbandoned  = "upload_abandoned"  // 408: an upload that did not complete in time
	CodeStartFailed      = "start_failed"      // 500: the process could not be started
	CodeNotAFerry        = "not_a_ferry"       // 422: a re-exec's binary does not say the release asked
	CodeCannotReexec     = "cannot_reexec"     // 409: this agent cannot re-exec (not run by Serve, or one pending)
	CodeInternal         = "internal"          // 500: anything else
)

// DefaultStopTimeout bounds a graceful stop when neither the request
// nor the member's last spec gives one.
const DefaultStopTimeout = 10 * time.Second

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// MemberSpec is the body of PUT /v1/members/{name}: the artifact the
// member must run and how to run it.
type MemberSpec struct {
	Version string `json:"version"`
	// SHA256 names the artifact, by its hex checksum, in the agent's
	// artifact store (PUT /v1/artifacts/{sha256} put it there): the
	// agent runs nothing else.
	SHA256 string            `json:"sha256"`
	Args   []string          `json:"args,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	// StopTimeoutMS bounds the graceful stop of the process this one
	// replaces, and of later stops that give no timeout; 0 means
	// DefaultStopTimeout.
	StopTimeoutMS int64 `json:"stop_timeout_ms,omitempty"`
	// Restart is RestartNo (the default, also "") or RestartOnFailure.
	Restart string `json:"restart,omitempty"`
	// StopSignal is the signal of a graceful stop of this process (and
	// of the one it replaces): one of StopSignals, "" for SIGTERM.
	StopSignal string `json:"stop_signal,omitempty"`
	// Files are written into the member's directory before it starts.
	Files []FileSpec `json:"files,omitempty"`
}

// StopSignals are the signals a graceful stop may send: those servers
// take as a request to stop.
var StopSignals = map[string]syscall.Signal{
	"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT, "SIGQUIT": syscall.SIGQUIT,
	"SIGHUP": syscall.SIGHUP, "SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2,
}

// AdoptRequest is the body of POST /v1/members/{name}/adopt: how to
// find the member's process when ferry did not start it. Exactly one
// of PIDFile and Listen is set.
type AdoptRequest struct {
	// PIDFile is the absolute path of a file holding the process id.
	PIDFile string `json:"pid_file,omitempty"`
	// Listen is a host:port: the process listening on it is the member.
	Listen string `json:"listen,omitempty"`
	// StopTimeoutMS and StopSignal are how the adopted process is
	// stopped gracefully (by a stop, or by the PUT that replaces it).
	StopTimeoutMS int64  `json:"stop_timeout_ms,omitempty"`
	StopSignal    string `json:"stop_signal,omitempty"`
}

// Restart policies of MemberSpec.Restart.
const (
	// RestartNo leaves a member that exits down: ferry, not the agent,
	// decides what happens next.
	RestartNo = "no"
	// RestartOnFailure restarts a member whose process exits when
	// nobody asked it to stop, with exponential backoff. Any such exit
	// counts, status 0 too: a member is a server, and one that exits on
	// its own is down whatever its status says.
	RestartOnFailure = "on-failure"
)

// FileSpec is one file of MemberSpec.Files.
type FileSpec struct {
	// Path is relative to the member's directory (DIR/members/NAME),
	// clean, without "..".
	Path string `json:"path"`
	// Mode is the permission bits in octal ("0640"); "" means 0600.
	// Setuid, setgid, sticky and world-writable modes are refused.
	Mode string `json:"mode,omitempty"`
	// Content is the file's content, at most 1 MiB.
	Content string `json:"content"`
}

// StopRequest is the (optional) body of POST /v1/members/{name}/stop.
type StopRequest struct {
	// TimeoutMS bounds the graceful stop before SIGKILL; 0 means the
	// member's stop_timeout_ms, or DefaultStopTimeout.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Signal is the graceful stop's signal; "" means the member's
	// stop_signal, or SIGTERM.
	Signal string `json:"signal,omitempty"`
}

// Status is what the agent reports of one member.
type Status struct {
	Name    string `json:"name"`
	Running bool   `json:"running"`
	// PID is the member's process while it runs, 0 otherwise.
	PID int `json:"pid"`
	// Version and SHA256 are those of the artifact the agent last
	// started for the member; kept after it exits.
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
	// Since is when the process was started.
	Since time.Time `json:"since"`
	// Detail says why the member is down ("exited with status 1").
	Detail string `json:"detail"`
	// ExitCode is the exit status of the last process when it exited
	// normally; null while running, after a signal, or when unknown.
	ExitCode *int `json:"exit_code"`
	// Restart is the member's restart policy (RestartNo,
	// RestartOnFailure).
	Restart string `json:"restart"`
	// Restarts counts the restarts the agent made (policy on-failure)
	// since the member was last started by a PUT: a crash loop shows
	// here even when every look finds the member running.
	Restarts int `json:"restarts"`
	// Instance numbers the member's processes: it grows by one at every
	// process the agent starts for it (by a PUT or a restart), so two
	// looks with the same instance saw the same process.
	Instance int `json:"instance"`
	// NextRestart is when a restart is due, while one is pending.
	NextRestart *time.Time `json:"next_restart,omitempty"`
	// Adopted is set when the member's process (running, or last seen)
	// was not started by the agent but found by an adopt request: the
	// agent knows its pid, not its version (Version is empty), and does
	// not restart it. A PUT replaces it with a process of the agent's.
	Adopted bool `json:"adopted,omitempty"`
}

// Health is the body of GET /v1/health.
type Health struct {
	OK bool `json:"ok"`
	// TLS is true when the agent serves HTTPS (false also when its
	// handler is served by another server than Serve's).
	TLS bool `json:"tls"`
	// Warning is set when the agent listens beyond loopback without
	// TLS (--insecure-listen).
	Warning string `json:"warning,omitempty"`
	// Version is the agent's build (the ferry binary's module version
	// and VCS revision, package buildinfo), for troubleshooting bundles
	// that must name every build involved. Health needs no token, so
	// the version is told only to a caller that presents the token:
	// the build is no business of anyone who can merely reach the port.
	Version string `json:"version,omitempty"`
	// Release is the ferry release the agent is (buildinfo.Release):
	// what ferry self-upgrade waits for after it asked the agent to
	// re-execute itself on a newer binary. Told, like Version, only to
	// a caller with the token; empty from an agent older than the field.
	Release string `json:"release,omitempty"`
	// PID is the agent's process, to a caller with the token: a re-exec
	// keeps it (the members stay the agent's children), a restart does
	// not.
	PID int `json:"pid,omitempty"`
}

// ReexecRequest is the body of POST /v1/agent/reexec: run the agent
// on another ferry binary, one of the agent's artifact store (uploaded
// like a member's artifact), which must say it is Release.
type ReexecRequest struct {
	SHA256  string `json:"sha256"`
	Release string `json:"release"`
}

// ReexecAccepted is the answer (202) to a ReexecRequest: the agent
// answers, stops serving, and replaces its program with the binary at
// Path, keeping its pid, arguments and environment; the new program
// re-adopts the members, which never stop. Poll GET /v1/health until
// it says Release.
type ReexecAccepted struct {
	PID     int    `json:"pid"`
	Path    string `json:"path"`
	Release string `json:"release"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidName reports whether name may name a member: lower-case
// letters, digits, '.', '_' and '-', starting with a letter or digit,
// at most 63 characters. Such a name is safe as a file name.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// MaxLogLines is the most lines GET .../logs returns at once.
const MaxLogLines = 10000

// DefaultUploadTimeout bounds the receiving of one upload: the
// server's ReadTimeout is for small bodies.
const DefaultUploadTimeout = 10 * time.Minute

// ArtifactNameRE is the name an upload may give its file in the
// store (the program's name, as ps shows it): a plain file name.
var ArtifactNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$`)

// ValidArtifactName reports whether name may name an uploaded artifact's
// file in the store (PUT /v1/artifacts/{sha256}?name=).
func ValidArtifactName(name string) bool { return ArtifactNameRE.MatchString(name) }
