package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/bundle"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// getBundle serves the troubleshooting bundle of an upgrade (its id,
// or "current": the current one, else the last), the same archive as
// 'ferry bundle' writes: built into a temporary file first, so that an
// error is an error answer and not a truncated archive, and so that
// the client gets its length. The server's own API token and its
// agents' tokens are scrubbed from it like the description's secrets.
func (s *Server) getBundle(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "log_lines")
	if err != nil {
		return err
	}
	lines, err := uintParam(q, "log_lines", bundle.DefaultLogLines, 10000)
	if err != nil {
		return err
	}
	if lines == 0 {
		return badRequest("query parameter log_lines=0: want 1 to 10000")
	}
	id := r.PathValue("id")
	if id != "current" && !bundle.ValidID(id) {
		return badRequest("%q is not an upgrade id (letters, digits, '.', '_', '-'), nor current", id)
	}
	u, err := bundle.Resolve(s.cfg.Store, id)
	if errors.Is(err, bundle.ErrNoUpgrade) {
		return errf(http.StatusNotFound, CodeNoUpgrade, "%v", err)
	}
	if err != nil {
		return err
	}
	cfg := bundle.Config{Store: s.cfg.Store, ID: u.ID, DataDir: s.cfg.DataDir,
		DescriptionFile: s.cfg.Cluster.File, Cluster: s.cfg.Cluster, Live: serverLive{s}, Driver: s.cfg.Driver,
		Secrets: s.cfg.secrets(), LogLines: int(lines), By: s.requester(r), Report: s.reportOf(u.ID)}
	cfg.Description, cfg.DescriptionErr = safefile.Read(s.cfg.Cluster.File, config.MaxFileSize, safefile.DefaultTimeout)

	f, err := os.CreateTemp("", "ferry-bundle-*.tar.gz")
	if err != nil {
		return fmt.Errorf("server: a temporary file for the bundle: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	man, err := bundle.Write(r.Context(), f, cfg)
	if err != nil {
		return fmt.Errorf("server: bundle of %s: %w", u.ID, err)
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return fmt.Errorf("server: bundle of %s: %w", u.ID, err)
	}
	s.log.Info("server: troubleshooting bundle", "upgrade", u.ID, "bytes", size, "files", len(man.Files),
		"not_collected", len(man.NotCollected), "for", r.RemoteAddr)
	h := w.Header()
	h.Set("Content-Type", "application/gzip")
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", bundle.FileName(u.ID)))
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f) // a client that left: nothing to answer it
	return nil
}

// requester says who asked for a bundle, for its manifest.
func (s *Server) requester(r *http.Request) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("ferry server (uid %d on %s), GET %s for a client at %s", os.Getuid(), host, r.URL.Path, r.RemoteAddr)
}

// reportOf is the impact report the server holds for upgrade id, as
// JSON, or nil.
func (s *Server) reportOf(id string) []byte {
	s.trafficMu.Lock()
	rep := s.report
	s.trafficMu.Unlock()
	if rep == nil || rep.UpgradeID != id {
		return nil
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil
	}
	return append(b, '\n')
}

// serverLive is the server's view engine for a bundle, under the locks
// the API's views take: the catalog's (an import changes it) and the
// view engine's (its checksum cache is not safe for two preflights).
type serverLive struct{ s *Server }

func (l serverLive) Members() []driver.Member { return l.s.view.Members() }

func (l serverLive) Observe(ctx context.Context) (engine.Snapshot, error) {
	l.s.catalogMu.RLock()
	defer l.s.catalogMu.RUnlock()
	l.s.viewMu.Lock()
	defer l.s.viewMu.Unlock()
	return l.s.view.Observe(ctx)
}

func (l serverLive) RunPreflight(ctx context.Context, to string) engine.Preflight {
	l.s.catalogMu.RLock()
	defer l.s.catalogMu.RUnlock()
	return l.s.preflight(ctx, to)
}

func (l serverLive) MembersView(snap engine.Snapshot, u *upgrade.Upgrade) []engine.MemberView {
	return l.s.view.MembersView(snap, u)
}

func (l serverLive) VersionsView(snap engine.Snapshot) []engine.ComponentVersions {
	return l.s.view.VersionsView(snap)
}
