package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// Error codes of cluster up and down.
const (
	CodeVersionsDiffer = "versions_differ"     // 422: up, and members run another release; nothing started
	CodeNotHealthy     = "not_healthy"         // 503: members started but not healthy within their deadline
	CodeIncapable      = "substrate_incapable" // 422: the substrate cannot bring a cluster up and down
	CodeArtifact       = "artifact_invalid"    // 422: up, and an artifact is missing or has the wrong sha256
	CodePinned         = "pinned"              // 422: up at a release the catalog does not allow from the one last finalized; nothing started
)

// ClusterUpRequest is the body of POST /v1/cluster/up.
type ClusterUpRequest struct {
	Version string `json:"version"`
}

func (s *Server) postClusterUp(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	var req ClusterUpRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	switch {
	case req.Version == "":
		return badRequest(`field "version" is required: the release every member is to run`)
	case !validVersion(req.Version):
		return badRequest(`field "version": %q is not a release version`, req.Version)
	case s.cfg.Cluster.Release(req.Version) == nil:
		return errf(http.StatusBadRequest, CodeUnknownRelease, `field "version": release %s is not in the catalog; known: %s`, req.Version, s.releaseNames())
	}
	return s.clusterOp(w, r, func(ctx context.Context) (engine.ClusterReport, error) {
		return s.drive.Up(ctx, req.Version, s.clusterProgress("up"))
	})
}

func (s *Server) postClusterDown(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	if r.ContentLength != 0 {
		// An empty object, or no body at all.
		var req struct{}
		if err := decode(r, &req); err != nil {
			return err
		}
	}
	return s.clusterOp(w, r, func(ctx context.Context) (engine.ClusterReport, error) {
		return s.drive.Down(ctx, s.clusterProgress("down"))
	})
}

// clusterProgress logs cluster up's and down's steps.
func (s *Server) clusterProgress(op string) engine.Progress {
	return func(msg string) { s.log.Info("server: cluster " + op + ": " + msg) }
}

// clusterOp runs cluster up or down in the request, holding the server
// (no upgrade starts meanwhile, and none may be running) and the engine
// lock (nor in another process). It answers when the work is done.
func (s *Server) clusterOp(w http.ResponseWriter, r *http.Request, op func(context.Context) (engine.ClusterReport, error)) error {
	if !s.reserve() {
		return errf(http.StatusConflict, CodeUpgradeInProgress, "upgrade %s is being driven by this server (or a cluster up or down runs); follow it with GET /v1/upgrade", s.drivingID())
	}
	defer s.signal()
	defer s.release()
	unlock, err := s.lockEngine()
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			return errf(http.StatusConflict, CodeUpgradeInProgress, "another ferry process drives the cluster: %v", err)
		}
		return err
	}
	defer unlock()
	rep, err := op(r.Context())
	// What runs changed: the views observe anew.
	s.viewMu.Lock()
	s.snapAt = s.snapAt.Add(-s.cfg.ObserveTTL)
	s.viewMu.Unlock()
	if err != nil {
		switch {
		case errors.Is(err, store.ErrActive):
			return errf(http.StatusConflict, CodeUpgradeInProgress, "%v", err)
		case errors.Is(err, engine.ErrVersionsDiffer):
			return errf(http.StatusUnprocessableEntity, CodeVersionsDiffer, "%v", err)
		case errors.Is(err, engine.ErrPinned):
			return errf(http.StatusUnprocessableEntity, CodePinned, "%v", err)
		case errors.Is(err, engine.ErrArtifact):
			return errf(http.StatusUnprocessableEntity, CodeArtifact, "%v", err)
		case errors.Is(err, engine.ErrIncapable):
			return errf(http.StatusUnprocessableEntity, CodeIncapable, "%v", err)
		case errors.Is(err, engine.ErrNotHealthy):
			return errf(http.StatusServiceUnavailable, CodeNotHealthy, "%v", err)
		case errors.Is(err, driver.ErrUnreachable):
			return errf(http.StatusServiceUnavailable, CodeObserveFailed, "%v", err)
		}
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}
