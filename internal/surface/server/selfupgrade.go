package server

import (
	"errors"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/run/selfupgrade"
)

// The self-upgrade's error codes.
const (
	CodeSelfUpgradeRefused = "self_upgrade_refused" // 422: the binary's sha256 or release refused (a downgrade, the same release), or an agent newer or not answering; nothing changed
	CodeSelfUpgradeFailed  = "self_upgrade_failed"  // 502: an agent refused to re-execute or did not come back on the new release; the hosts before it are upgraded
)

// postSelfUpgrade is POST /v1/self-upgrade (ferry self-upgrade --addr):
// ferry's agents, host by host, re-executed on a newer ferry binary, a
// file under one of the server's artifact roots (as an import's
// artifacts). The server holds itself and the engine lock throughout,
// so that no upgrade starts meanwhile, and refuses while one has not
// ended. It runs the binary (`BIN version -o json`, once its sha256
// matched) to learn its release: the API's token already lets its
// holder run programs on every host through the agents.
func (s *Server) postSelfUpgrade(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	var req selfupgrade.Request
	if err := decode(r, &req); err != nil {
		return err
	}
	switch {
	case req.Binary == "" || req.SHA256 == "":
		return badRequest(`fields "binary" (the new ferry binary's path on the server's host) and "sha256" are required`)
	case !filepath.IsAbs(req.Binary):
		return badRequest(`field "binary": %q is not an absolute path`, req.Binary)
	}
	path := filepath.Clean(req.Binary)
	outside := func(p string) error {
		return errf(http.StatusUnprocessableEntity, CodeArtifactRefused, "binary %s is not under an artifact root of this server (%s): upload it with PUT /v1/artifacts/{sha256}, or start the server with --artifact-root naming its directory",
			p, strings.Join(s.rootNames(), ", "))
	}
	if _, _, ok := s.underRoot(path); !ok {
		return outside(path)
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return errf(http.StatusUnprocessableEntity, CodeArtifactRefused, "binary %s cannot be opened: %v", path, unwrapPath(err))
	}
	if _, _, ok := s.underRoot(resolved); !ok {
		return outside(resolved)
	}
	req.Binary = resolved
	if !s.reserve() {
		return errf(http.StatusConflict, CodeUpgradeInProgress, "upgrade %s is being driven by this server (or a cluster up or down runs): ferry upgrades itself between upgrades of the cluster", s.drivingID())
	}
	defer s.signal()
	defer s.release()
	unlock, err := s.lockEngine()
	if err != nil {
		return errf(http.StatusConflict, CodeUpgradeInProgress, "another ferry process drives the cluster: %v", err)
	}
	defer unlock()
	hosts := selfupgrade.HostNames(s.cfg.Cluster)
	rep, err := selfupgrade.Run(r.Context(), req, s.cfg.Driver, hosts, s.cfg.Store, func(hr selfupgrade.HostResult) {
		s.log.Info("server: self-upgrade: agent", "host", hr.Host, "from", hr.From, "to", hr.To, "skipped", hr.Skipped, "took", hr.Took)
	})
	switch {
	case errors.Is(err, selfupgrade.ErrBusy):
		return errf(http.StatusConflict, CodeUpgradeInProgress, "%v", err)
	case errors.Is(err, selfupgrade.ErrRefused):
		return errf(http.StatusUnprocessableEntity, CodeSelfUpgradeRefused, "%v", err)
	case err != nil:
		return errf(http.StatusBadGateway, CodeSelfUpgradeFailed, "%v", err)
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}
