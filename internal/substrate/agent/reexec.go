package agent

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
)

// handleReexec answers POST /v1/agent/reexec: ferry self-upgrade asks
// the agent to run on a newer ferry binary. The binary must be a file
// of the agent's store (uploaded like a member's artifact), hashed
// again now, and must say, asked `BIN version -o json`, that it is the
// release the request names: an agent never replaces itself with a
// program that is not a ferry. The answer (202) comes first; then
// Serve stops serving, closes the agent (members keep running) and
// execs the binary with the agent's own arguments: the pid stays, the
// members stay its children, and the new program re-adopts them from
// their state files like any new agent.
func (s *Server) handleReexec(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r, maxBodyBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	var req wire.ReexecRequest
	if err := decodeJSON(bytes.NewReader(body), &req); err != nil {
		writeError(w, err)
		return
	}
	req.SHA256 = strings.ToLower(req.SHA256)
	if !validSHA256(req.SHA256) {
		writeError(w, badRequest("sha256 must be 64 hex digits, got %q", truncate(req.SHA256, 80)))
		return
	}
	if req.Release == "" {
		writeError(w, badRequest("release is required: the release the binary must say it is"))
		return
	}
	if s.reexec == nil {
		writeError(w, &apiError{http.StatusConflict, wire.CodeCannotReexec,
			"this agent cannot re-execute itself: its handler is not served by agent.Serve (restart it on the new binary instead)"})
		return
	}
	path, err := s.prepareArtifact(wire.MemberSpec{SHA256: req.SHA256})
	if err == nil {
		err = s.checkStored(path, req.SHA256)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	self, err := buildinfo.Of(r.Context(), path)
	if err != nil {
		writeError(w, &apiError{http.StatusUnprocessableEntity, wire.CodeNotAFerry, err.Error()})
		return
	}
	if self.Release != req.Release {
		writeError(w, &apiError{http.StatusUnprocessableEntity, wire.CodeNotAFerry,
			fmt.Sprintf("artifact %s says it is ferry %s, not %s: not run", req.SHA256, self.Release, req.Release)})
		return
	}
	if !s.reexecing.CompareAndSwap(false, true) {
		writeError(w, &apiError{http.StatusConflict, wire.CodeCannotReexec, "a re-exec of this agent is under way already"})
		return
	}
	s.log.Info("agent re-executing itself on a new ferry binary", "path", path, "release", self.Release, "from", buildinfo.Release())
	writeJSON(w, http.StatusAccepted, wire.ReexecAccepted{PID: os.Getpid(), Path: path, Release: self.Release})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	s.reexec <- path // buffered: one re-exec at a time (reexecing)
}

// reexecGrace bounds how long Serve waits for requests in flight before
// it re-executes.
const reexecGrace = 10 * time.Second

// reapIfChild reaps pid if it is a zombie child of this process: after
// a re-exec, the members the agent before started are still its
// children, watched like re-adopted processes; one that exits must be
// reaped, not left a zombie. ECHILD (not ours) is no error.
func reapIfChild(pid int) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}
