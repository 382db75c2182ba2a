package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/ferry-upgrade/ferry/internal/buildinfo"
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
	CodeInternal         = "internal"          // 500: anything else
)

// DefaultStopTimeout bounds a graceful stop when neither the request
// nor the member's last spec gives one.
const DefaultStopTimeout = 10 * time.Second

// Limits on what the API accepts.
const (
	maxBodyBytes = 1 << 20
	// maxSpecBytes bounds a PUT body, which may carry maxFiles files
	// of maxFileBytes each.
	maxSpecBytes   = maxFiles*maxFileBytes + 2<<20
	maxStopTimeout = time.Hour
	maxVersionLen  = 128
	maxArgs        = 4096
	maxEnv         = 4096
	maxPathLen     = 4096
)

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

// stopSignal returns the signal named, SIGTERM for "".
func stopSignal(name string) syscall.Signal {
	if sig, ok := StopSignals[name]; ok {
		return sig
	}
	return syscall.SIGTERM
}

func checkStopSignal(name, field string) error {
	if _, ok := StopSignals[name]; name != "" && !ok {
		return badRequest("%s %q: want one of SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2", field, truncate(name, 20))
	}
	return nil
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

// DecodeAdoptRequest reads and validates an adopt body.
func DecodeAdoptRequest(body []byte) (AdoptRequest, error) {
	var r AdoptRequest
	if len(body) > maxBodyBytes {
		return r, badRequest("body larger than %d bytes", maxBodyBytes)
	}
	if err := decodeJSON(bytes.NewReader(body), &r); err != nil {
		return AdoptRequest{}, err
	}
	switch {
	case r.PIDFile == "" && r.Listen == "":
		return r, badRequest("one of pid_file and listen is required")
	case r.PIDFile != "" && r.Listen != "":
		return r, badRequest("pid_file and listen are exclusive: give one way to find the process")
	case r.PIDFile != "" && (!filepath.IsAbs(r.PIDFile) || len(r.PIDFile) > maxPathLen || strings.IndexByte(r.PIDFile, 0) >= 0):
		return r, badRequest("pid_file %q is not an absolute path", truncate(r.PIDFile, 80))
	}
	if r.Listen != "" {
		if _, _, err := splitListen(r.Listen); err != nil {
			return r, badRequest("listen %q: %v", truncate(r.Listen, 80), err)
		}
	}
	if _, err := stopTimeout(r.StopTimeoutMS, "stop_timeout_ms"); err != nil {
		return r, err
	}
	if err := checkStopSignal(r.StopSignal, "stop_signal"); err != nil {
		return r, err
	}
	return r, nil
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
}

// agentBuild is this agent's build, read once.
var agentBuild = buildinfo.Version()

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidName reports whether name may name a member: lower-case
// letters, digits, '.', '_' and '-', starting with a letter or digit,
// at most 63 characters. Such a name is safe as a file name.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// errBadRequest marks validation errors (400).
type badRequestError struct{ msg string }

func (e *badRequestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &badRequestError{msg: fmt.Sprintf(format, args...)}
}

// decodeJSON reads exactly one JSON value from r into v. Unknown
// fields are ignored (an older agent accepts a newer client's body);
// trailing data is not.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	if err := dec.Decode(v); err != nil {
		return badRequest("malformed JSON body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("malformed JSON body: data after the JSON value")
	}
	return nil
}

// DecodeMemberSpec reads and validates a PUT body. The returned spec
// has its SHA256 in lower case. Any error is a bad request.
func DecodeMemberSpec(body []byte) (MemberSpec, error) {
	var w struct {
		MemberSpec
		// Path named a file on the agent's host, which the agent copied
		// and ran if its sum was the one the caller sent: any file, for
		// whoever had the token. An older client's body is refused
		// rather than its path ignored.
		Path *string `json:"path"`
	}
	if len(body) > maxSpecBytes {
		return MemberSpec{}, badRequest("body larger than %d bytes", maxSpecBytes)
	}
	if err := decodeJSON(bytes.NewReader(body), &w); err != nil {
		return MemberSpec{}, err
	}
	if w.Path != nil {
		return MemberSpec{}, badRequest("path: this agent runs no path of its host, only artifacts of its own store: upload the artifact (PUT /v1/artifacts/{sha256}), then name it by sha256 alone (a ferry older than its agent sends a path: upgrade ferry)")
	}
	s := w.MemberSpec
	if err := s.validate(); err != nil {
		return MemberSpec{}, err
	}
	return s, nil
}

func (s *MemberSpec) validate() error {
	switch {
	case s.Version == "":
		return badRequest("version is required")
	case len(s.Version) > maxVersionLen:
		return badRequest("version longer than %d bytes", maxVersionLen)
	case !printable(s.Version):
		return badRequest("version %q has control characters", s.Version)
	}
	s.SHA256 = strings.ToLower(s.SHA256)
	if !validSHA256(s.SHA256) {
		return badRequest("sha256 must be 64 hex digits, got %q", truncate(s.SHA256, 80))
	}
	if len(s.Args) > maxArgs {
		return badRequest("more than %d args", maxArgs)
	}
	for i, a := range s.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return badRequest("args[%d] has a NUL byte", i)
		}
	}
	if len(s.Env) > maxEnv {
		return badRequest("more than %d env entries", maxEnv)
	}
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return badRequest("env name %q is empty or has '=' or NUL", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return badRequest("env %s has a NUL byte", k)
		}
	}
	if _, err := stopTimeout(s.StopTimeoutMS, "stop_timeout_ms"); err != nil {
		return err
	}
	if err := checkStopSignal(s.StopSignal, "stop_signal"); err != nil {
		return err
	}
	switch s.Restart {
	case "":
		s.Restart = RestartNo
	case RestartNo, RestartOnFailure:
	default:
		return badRequest("restart %q: want %q or %q", truncate(s.Restart, 40), RestartNo, RestartOnFailure)
	}
	return validateFiles(s.Files)
}

// DecodeStopRequest reads a stop body; an empty body is a zero request.
func DecodeStopRequest(body []byte) (StopRequest, error) {
	var r StopRequest
	if len(bytes.TrimSpace(body)) == 0 {
		return r, nil
	}
	if len(body) > maxBodyBytes {
		return r, badRequest("body larger than %d bytes", maxBodyBytes)
	}
	if err := decodeJSON(bytes.NewReader(body), &r); err != nil {
		return StopRequest{}, err
	}
	if _, err := stopTimeout(r.TimeoutMS, "timeout_ms"); err != nil {
		return StopRequest{}, err
	}
	if err := checkStopSignal(r.Signal, "signal"); err != nil {
		return StopRequest{}, err
	}
	return r, nil
}

// stopTimeout converts a millisecond field, 0 meaning "not given".
func stopTimeout(ms int64, field string) (time.Duration, error) {
	if ms < 0 {
		return 0, badRequest("%s must not be negative", field)
	}
	if ms > maxStopTimeout.Milliseconds() {
		return 0, badRequest("%s must be at most %d", field, maxStopTimeout.Milliseconds())
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func validSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// isBadRequest reports whether err is a validation error.
func isBadRequest(err error) bool {
	var b *badRequestError
	return errors.As(err, &b)
}
