package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/bundle"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// Store is what the server keeps its records, events and engine lock
// in: the embedded bbolt store (store.Store, one machine, the default)
// or a store shared by several servers (etcdstore, which is also an
// Elector).
type Store interface {
	engine.Store
	bundle.Store
	Request(id string, kind upgrade.IntentKind, now time.Time, check func(u upgrade.Upgrade) error) (upgrade.Upgrade, error)
	Override(id string, o upgrade.Override, check func(u upgrade.Upgrade) error) (upgrade.Upgrade, error)
	ClearCurrent() (upgrade.Upgrade, error)
	// LockEngine takes the lock that lets one process at a time act on
	// the cluster; store.ErrLocked while another holds it.
	LockEngine() (func(), error)
}

var _ Store = (*store.Store)(nil)

// Elector is a store shared by several servers that elects the one
// that drives upgrades and accepts writes (etcdstore: an etcd election
// on leases). Its LockEngine is held by the leader alone.
type Elector interface {
	// Campaign returns once this server leads, or ctx ends; lost
	// closes when its lease ends.
	Campaign(ctx context.Context, value string) (lost <-chan struct{}, err error)
	// Leader is the leading server's URL ("" when none leads).
	Leader(ctx context.Context) (string, error)
	// Leads says whether this server leads now.
	Leads() bool
}

// CatalogKeeper is a store that keeps the server's catalog (the
// imported releases) itself, so that every server sharing it sees one
// catalog; without it they are a file of the data directory.
type CatalogKeeper interface {
	ReadCatalog(name string) ([]byte, error)
	WriteCatalog(name string, b []byte) error
}

// ForwardedHeader marks a write a standby forwarded to the leader: a
// server that does not lead answers it 503 rather than forward it on.
const ForwardedHeader = "X-Ferry-Forwarded-By"

// CodeNotLeader is the 503 of a write to a standby when no server
// leads (or the leader it names does not lead yet).
const CodeNotLeader = "not_leader"

// campaign runs while the server runs, on a shared store: it joins the
// election with the server's URL, and once it leads, wakes the watcher
// to take the current upgrade up from the record; when its lease ends
// it stops the engine at once (its saves would be refused anyway) and
// campaigns again.
func (s *Server) campaign(el Elector) {
	defer s.wg.Done()
	for s.ctx.Err() == nil {
		lost, err := el.Campaign(s.ctx, s.advertise)
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Warn("server: campaign for the lead failed; again in 1s", "err", err)
				select {
				case <-s.ctx.Done():
				case <-time.After(time.Second):
				}
			}
			continue
		}
		s.log.Info("server: leads the election: drives upgrades and accepts writes", "url", s.advertise)
		s.mu.Lock()
		s.lastTry = time.Time{} // take the upgrade up now, not after Retry
		s.mu.Unlock()
		s.signal()
		select {
		case <-s.ctx.Done():
			return
		case <-lost:
		}
		s.log.Error("server: its lease ended: it no longer leads, and stops driving at once", "url", s.advertise)
		s.stopDriving()
	}
}

// stopDriving cancels the engine goroutine's run, if one runs.
func (s *Server) stopDriving() {
	s.mu.Lock()
	stop := s.stopRun
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// forward sends a write that reached a standby to the leader, or
// answers 503 naming the leader (or that there is none); it returns
// false when the request is this server's to handle.
func (s *Server) forward(w http.ResponseWriter, r *http.Request) bool {
	el, ok := s.cfg.Store.(Elector)
	if !ok || r.Method == http.MethodGet || r.Method == http.MethodHead || el.Leads() {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	leader, err := el.Leader(ctx)
	cancel()
	switch {
	case err != nil:
		writeError(w, errf(http.StatusServiceUnavailable, CodeNotLeader, "this ferry server is a standby and cannot reach the election to find the leader: %v", err))
		return true
	case leader == "" || leader == s.advertise:
		w.Header().Set("Retry-After", "1")
		writeError(w, errf(http.StatusServiceUnavailable, CodeNotLeader, "no ferry server leads yet (the leader's lease may be ending): try again in a few seconds"))
		return true
	case r.Header.Get(ForwardedHeader) != "":
		w.Header().Set("Retry-After", "1")
		writeError(w, errf(http.StatusServiceUnavailable, CodeNotLeader, "this ferry server is a standby; the leader is %s (a forwarded write is not forwarded again)", leader))
		return true
	}
	target, err := url.Parse(leader)
	if err != nil {
		writeError(w, errf(http.StatusServiceUnavailable, CodeNotLeader, "the leader's address %q: %v", leader, err))
		return true
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(ForwardedHeader, s.advertise)
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			w.Header().Set("Retry-After", "1")
			writeError(w, errf(http.StatusServiceUnavailable, CodeNotLeader, "this ferry server is a standby; the leader %s did not answer: %v", leader, err))
		},
	}
	w.Header().Set("X-Ferry-Leader", leader)
	proxy.ServeHTTP(w, r)
	return true
}

// syncCatalog adds to this server's catalog the releases another server
// imported into the shared store's (CatalogKeeper) since it last
// looked, so that a standby shows them, and drives to them once it
// leads. A release this server knows already is left as it is.
func (s *Server) syncCatalog() {
	k, ok := s.cfg.Store.(CatalogKeeper)
	if !ok {
		return
	}
	b, err := k.ReadCatalog(ImportedFile)
	if err != nil {
		s.log.Warn("server: read the shared catalog", "err", err)
		return
	}
	if b == nil || bytes.Equal(b, s.catalogSeen) {
		return
	}
	var all []ImportRequest
	if err := json.Unmarshal(b, &all); err != nil {
		s.log.Error("server: the shared catalog cannot be read", "where", s.importedWhere(), "err", err)
		return
	}
	next := *s.cfg.Cluster
	next.Releases = slices.Clip(next.Releases)
	for _, ir := range all {
		if next.Release(ir.Version) == nil {
			next.Releases = append(next.Releases, ir.release())
			s.log.Info("server: release imported by another server joins the catalog", "version", ir.Version)
		}
	}
	if len(next.Releases) != len(s.cfg.Cluster.Releases) {
		if err := s.catalogMu.Lock(s.ctx); err != nil {
			return
		}
		s.cfg.Cluster.Releases = next.Releases
		s.catalogMu.Unlock()
	}
	s.catalogSeen = b
}
