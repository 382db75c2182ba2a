package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/run/selfupgrade"
	apiclient "github.com/ferry-upgrade/ferry/internal/surface/client"
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
	path, err := s.rootedBinary(req.Binary, req.SHA256)
	if err != nil {
		return err
	}
	req.Binary = path
	if by := r.Header.Get(ForwardedHeader); req.Servers && by != "" {
		return errf(http.StatusConflict, CodeNotLeader, "a self-upgrade with servers goes to the leader itself, not through the standby %s, which it re-executes: send it to %s (ferry self-upgrade --servers does)", by, s.advertise)
	}
	if req.Servers && s.reexecing.Load() {
		return errf(http.StatusConflict, CodeUpgradeInProgress, "this server is re-executing already")
	}
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
	defer s.forgetBuilds()
	rep, bin, err := selfupgrade.Run(r.Context(), req, s.cfg.Driver, hosts, s.cfg.Store, func(hr selfupgrade.HostResult) {
		s.log.Info("server: self-upgrade: agent", "host", hr.Host, "from", hr.From, "to", hr.To, "skipped", hr.Skipped, "took", hr.Took)
	})
	if err == nil && req.Servers {
		rep.Servers, err = s.upgradeServers(r.Context(), bin, time.Duration(req.WaitMS)*time.Millisecond, bearerToken(r))
		if err != nil {
			// Not a refusal: the agents moved already (502).
			err = fmt.Errorf("the agents are on %s; the server replicas: %v", bin.Release, err)
		}
	}
	switch {
	case errors.Is(err, selfupgrade.ErrBusy):
		return errf(http.StatusConflict, CodeUpgradeInProgress, "%v", err)
	case errors.Is(err, selfupgrade.ErrRefused):
		return errf(http.StatusUnprocessableEntity, CodeSelfUpgradeRefused, "%v", err)
	case err != nil:
		return errf(http.StatusBadGateway, CodeSelfUpgradeFailed, "%v", err)
	}
	if req.Servers && !s.reexecing.CompareAndSwap(false, true) {
		return errf(http.StatusConflict, CodeUpgradeInProgress, "this server is re-executing already")
	}
	writeJSON(w, http.StatusOK, rep)
	if req.Servers {
		// This server last: it answers, then stops and re-executes (a
		// leader's lease is revoked as it closes its store: an
		// upgraded standby leads).
		s.log.Info("server: self-upgrade: re-executing this server last", "path", bin.Path, "release", bin.Release)
		s.reexec <- bin.Path
	}
	return nil
}

// buildsTTL is how long GET /v1/versions reuses the agents' releases it
// asked for (the dashboard polls it; builds change only by a
// self-upgrade, which forgets them).
const buildsTTL = 5 * time.Second

// builds is ferry's and the agents' releases, asked at most once per
// buildsTTL (one asking at a time).
func (s *Server) builds(ctx context.Context) selfupgrade.Builds {
	s.buildsMu.Lock()
	defer s.buildsMu.Unlock()
	if !s.buildsAt.IsZero() && time.Since(s.buildsAt) < buildsTTL {
		return s.buildsCache
	}
	s.buildsCache = selfupgrade.Collect(ctx, s.cfg.Driver, selfupgrade.HostNames(s.cfg.Cluster))
	s.buildsAt = time.Now()
	return s.buildsCache
}

// forgetBuilds makes the next GET /v1/versions ask the agents again.
func (s *Server) forgetBuilds() {
	s.buildsMu.Lock()
	s.buildsAt = time.Time{}
	s.buildsMu.Unlock()
}

// ReexecError is what ListenAndServe returns when the server was asked
// to run on a newer ferry binary: it has stopped (its engine, streams
// and HTTP server); the caller closes the store (a leader's lease is
// revoked: a standby leads) and re-executes the process on Path
// (buildinfo.Reexec).
type ReexecError struct{ Path string }

func (e *ReexecError) Error() string {
	return "server: stopped to re-execute on the ferry binary " + e.Path
}

// Candidates is a shared store that lists the servers of its election
// (etcdstore): the replicas a self-upgrade with servers moves.
type Candidates interface {
	Candidates(ctx context.Context) ([]string, error)
}

// ServerInfo is GET /v1/server: which ferry this server is, and
// whether it leads.
type ServerInfo struct {
	Release string         `json:"release"`
	Build   buildinfo.Info `json:"build"`
	PID     int            `json:"pid"`
	URL     string         `json:"url,omitempty"`
	Leads   bool           `json:"leads"`
	// Leader is the election's leader's URL, on a shared store.
	Leader string `json:"leader,omitempty"`
}

func (s *Server) info(ctx context.Context) ServerInfo {
	i := ServerInfo{Release: buildinfo.Release(), Build: buildinfo.Read(), PID: os.Getpid(), URL: s.advertise, Leads: true}
	if el, ok := s.cfg.Store.(Elector); ok {
		i.Leads = el.Leads()
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		i.Leader, _ = el.Leader(ctx) // "" when etcd does not answer: Leads says enough
	}
	return i
}

func (s *Server) getServer(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.info(r.Context()))
	return nil
}

// ServerReexecRequest is the body of POST /v1/server/reexec: a newer
// ferry binary under one of this server's artifact roots, its sha256,
// and the release it must say.
type ServerReexecRequest struct {
	Binary  string `json:"binary"`
	SHA256  string `json:"sha256"`
	Release string `json:"release"`
}

// postServerReexec is POST /v1/server/reexec, sent to one server (never
// forwarded): it checks the binary as a self-upgrade does (under a
// root, its sha256, a release newer than its own and the one asked),
// refuses while it drives an upgrade, answers 202 with what it is now,
// and then stops and re-executes on the binary (ReexecError): the
// leader's self-upgrade sends it to each standby.
func (s *Server) postServerReexec(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	var req ServerReexecRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	path, err := s.rootedBinary(req.Binary, req.SHA256)
	if err != nil {
		return err
	}
	bin, err := selfupgrade.Check(r.Context(), path, req.SHA256, buildinfo.Release())
	if err != nil {
		return errf(http.StatusUnprocessableEntity, CodeSelfUpgradeRefused, "%v", err)
	}
	if bin.Release != req.Release {
		return errf(http.StatusUnprocessableEntity, CodeSelfUpgradeRefused, "the binary %s says it is ferry %s, not %s", path, bin.Release, req.Release)
	}
	if !s.reserve() {
		return errf(http.StatusConflict, CodeUpgradeInProgress, "upgrade %s is being driven by this server: it re-executes between upgrades", s.drivingID())
	}
	if !s.reexecing.CompareAndSwap(false, true) {
		s.release()
		return errf(http.StatusConflict, CodeUpgradeInProgress, "this server is re-executing already")
	}
	s.log.Info("server: re-executing on a newer ferry", "path", path, "release", bin.Release)
	writeJSON(w, http.StatusAccepted, s.info(r.Context()))
	s.reexec <- path // buffered; the reservation is never released: the server stops
	return nil
}

// rootedBinary is the new ferry binary a request names: an absolute
// path under one of the server's artifact roots (symbolic links
// resolved), as an import's artifacts.
func (s *Server) rootedBinary(p, sum string) (string, error) {
	switch {
	case p == "" || sum == "":
		return "", badRequest(`fields "binary" (the new ferry binary's path on the server's host) and "sha256" are required`)
	case !filepath.IsAbs(p):
		return "", badRequest(`field "binary": %q is not an absolute path`, p)
	}
	path := filepath.Clean(p)
	outside := func(p string) error {
		return errf(http.StatusUnprocessableEntity, CodeArtifactRefused, "binary %s is not under an artifact root of this server (%s): upload it with PUT /v1/artifacts/{sha256}, or start the server with --artifact-root naming its directory",
			p, strings.Join(s.rootNames(), ", "))
	}
	if _, _, ok := s.underRoot(path); !ok {
		return "", outside(path)
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", errf(http.StatusUnprocessableEntity, CodeArtifactRefused, "binary %s cannot be opened: %v", path, unwrapPath(err))
	}
	if _, _, ok := s.underRoot(resolved); !ok {
		return "", outside(resolved)
	}
	return resolved, nil
}

// peers are the other servers of the election, seen as a self-upgrade
// sees agents (selfupgrade.Agents, by URL), so that the standbys move
// one at a time, each waited for on the new release, exactly as the
// agents do. They are called as the CLI calls a server (package client),
// with this server's token, which the servers of one store share.
type peers struct{ token string }

// peerTimeout bounds one call to another server (its re-exec request
// waits on its `BIN version` too).
const peerTimeout = 30 * time.Second

func (p peers) call(ctx context.Context, method, url, path string, in, out any) error {
	c, err := apiclient.New(apiclient.Options{Addr: url, Token: p.token})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	return c.Do(ctx, method, path, in, out)
}

func (p peers) AgentRelease(ctx context.Context, url string) (string, string, error) {
	var i ServerInfo
	if err := p.call(ctx, http.MethodGet, url, "/v1/server", nil, &i); err != nil {
		return "", "", err
	}
	return i.Release, i.Build.String(), nil
}

func (p peers) ReexecAgent(ctx context.Context, url, path, sum, release string) error {
	var i ServerInfo
	return p.call(ctx, http.MethodPost, url, "/v1/server/reexec", ServerReexecRequest{Binary: path, SHA256: sum, Release: release}, &i)
}

// upgradeServers moves the other servers of the election (standbys:
// this one holds the engine lock, so it leads) to the binary, one at a
// time; this server's own turn, after its answer, is the caller's. It
// calls them with the caller's token (token): the servers of one store
// share their tokens.
func (s *Server) upgradeServers(ctx context.Context, bin selfupgrade.Binary, wait time.Duration, token string) ([]selfupgrade.HostResult, error) {
	var others []string
	if c, ok := s.cfg.Store.(Candidates); ok {
		all, err := c.Candidates(ctx)
		if err != nil {
			return nil, err
		}
		for _, u := range all {
			if u != s.advertise {
				others = append(others, u)
			}
		}
	}
	rep, err := selfupgrade.UpgradeAgents(ctx, selfupgrade.Config{Binary: bin, Hosts: others, Wait: wait,
		Agents: peers{token: token},
		Progress: func(hr selfupgrade.HostResult) {
			s.log.Info("server: self-upgrade: server", "url", hr.Host, "from", hr.From, "to", hr.To, "skipped", hr.Skipped, "took", hr.Took)
		}})
	self := selfupgrade.HostResult{Host: cmp.Or(s.advertise, "this server"), From: buildinfo.Release(), To: bin.Release, Handover: true}
	return append(rep.Agents, self), err
}
