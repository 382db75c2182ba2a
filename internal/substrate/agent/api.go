package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
)

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

// stopSignal returns the signal named, SIGTERM for "".
func stopSignal(name string) syscall.Signal {
	if sig, ok := wire.StopSignals[name]; ok {
		return sig
	}
	return syscall.SIGTERM
}

func checkStopSignal(name, field string) error {
	if _, ok := wire.StopSignals[name]; name != "" && !ok {
		return badRequest("%s %q: want one of SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2", field, truncate(name, 20))
	}
	return nil
}

// DecodeAdoptRequest reads and validates an adopt body.
func DecodeAdoptRequest(body []byte) (wire.AdoptRequest, error) {
	var r wire.AdoptRequest
	if len(body) > maxBodyBytes {
		return r, badRequest("body larger than %d bytes", maxBodyBytes)
	}
	if err := decodeJSON(bytes.NewReader(body), &r); err != nil {
		return wire.AdoptRequest{}, err
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

// agentBuild is this agent's build, read once.
var agentBuild = buildinfo.Version()

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
func DecodeMemberSpec(body []byte) (wire.MemberSpec, error) {
	var w struct {
		wire.MemberSpec
		// Path named a file on the agent's host, which the agent copied
		// and ran if its sum was the one the caller sent: any file, for
		// whoever had the token. An older client's body is refused
		// rather than its path ignored.
		Path *string `json:"path"`
	}
	if len(body) > maxSpecBytes {
		return wire.MemberSpec{}, badRequest("body larger than %d bytes", maxSpecBytes)
	}
	if err := decodeJSON(bytes.NewReader(body), &w); err != nil {
		return wire.MemberSpec{}, err
	}
	if w.Path != nil {
		return wire.MemberSpec{}, badRequest("path: this agent runs no path of its host, only artifacts of its own store: upload the artifact (PUT /v1/artifacts/{sha256}), then name it by sha256 alone (a ferry older than its agent sends a path: upgrade ferry)")
	}
	s := w.MemberSpec
	if err := validateSpec(&s); err != nil {
		return wire.MemberSpec{}, err
	}
	return s, nil
}

func validateSpec(s *wire.MemberSpec) error {
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
		s.Restart = wire.RestartNo
	case wire.RestartNo, wire.RestartOnFailure:
	default:
		return badRequest("restart %q: want %q or %q", truncate(s.Restart, 40), wire.RestartNo, wire.RestartOnFailure)
	}
	return validateFiles(s.Files)
}

// DecodeStopRequest reads a stop body; an empty body is a zero request.
func DecodeStopRequest(body []byte) (wire.StopRequest, error) {
	var r wire.StopRequest
	if len(bytes.TrimSpace(body)) == 0 {
		return r, nil
	}
	if len(body) > maxBodyBytes {
		return r, badRequest("body larger than %d bytes", maxBodyBytes)
	}
	if err := decodeJSON(bytes.NewReader(body), &r); err != nil {
		return wire.StopRequest{}, err
	}
	if _, err := stopTimeout(r.TimeoutMS, "timeout_ms"); err != nil {
		return wire.StopRequest{}, err
	}
	if err := checkStopSignal(r.Signal, "signal"); err != nil {
		return wire.StopRequest{}, err
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
