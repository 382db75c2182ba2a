package server

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/selfupgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/api"
)

// route is one endpoint: the method and path pattern (net/http's),
// whether it needs the token, and its handler.
type route struct {
	Method  string
	Pattern string
	Public  bool
	handle  func(w http.ResponseWriter, r *http.Request) error
	// own: the handler takes the catalog lock itself (the import), or
	// needs none and may run long (the event stream, an upload).
	own bool
	// body: what the route does with a request body (bodyNone,
	// bodyJSON: received by wrap, bounded; bodyStream: the handler's).
	body bodyKind
	// local: a request for this server itself (its own re-exec), never
	// forwarded to the leader.
	local bool
}

// Routes lists the API's endpoints as "METHOD /path" (path templates
// in OpenAPI's {name} form), for the test that checks them against
// api/openapi.yaml.
func (s *Server) Routes() []string {
	var out []string
	for _, rt := range s.routes {
		out = append(out, rt.Method+" "+rt.Pattern)
	}
	return out
}

func (s *Server) buildRoutes() http.Handler {
	s.routes = []route{
		{Method: "GET", Pattern: "/v1/healthz", Public: true, handle: s.getHealthz},
		{Method: "GET", Pattern: "/v1/health", handle: s.getHealth},
		{Method: "GET", Pattern: "/v1/releases", handle: s.getReleases},
		{Method: "GET", Pattern: "/v1/releases/{version}", handle: s.getRelease},
		{Method: "POST", Pattern: "/v1/releases", handle: s.postRelease, own: true, body: bodyJSON},
		{Method: "PUT", Pattern: "/v1/artifacts/{sha256}", handle: s.putArtifact, own: true, body: bodyStream},
		{Method: "GET", Pattern: "/v1/upgrade", handle: s.getUpgrade},
		{Method: "POST", Pattern: "/v1/upgrade", handle: s.postUpgrade, body: bodyJSON},
		{Method: "PATCH", Pattern: "/v1/upgrade", handle: s.patchUpgrade, body: bodyJSON},
		{Method: "DELETE", Pattern: "/v1/upgrade", handle: s.deleteUpgrade},
		{Method: "POST", Pattern: "/v1/upgrade/overrides", handle: s.postOverride, body: bodyJSON},
		{Method: "GET", Pattern: "/v1/upgrade/report", handle: s.getReport},
		{Method: "GET", Pattern: "/v1/upgrades/{id}/bundle", handle: s.getBundle, own: true},
		{Method: "GET", Pattern: "/v1/traffic", handle: s.getTraffic},
		{Method: "POST", Pattern: "/v1/cluster/up", handle: s.postClusterUp, body: bodyJSON},
		{Method: "POST", Pattern: "/v1/cluster/down", handle: s.postClusterDown, body: bodyJSON},
		{Method: "GET", Pattern: "/v1/members", handle: s.getMembers},
		{Method: "GET", Pattern: "/v1/versions", handle: s.getVersions},
		{Method: "POST", Pattern: "/v1/self-upgrade", handle: s.postSelfUpgrade, body: bodyJSON},
		{Method: "GET", Pattern: "/v1/server", handle: s.getServer},
		{Method: "POST", Pattern: "/v1/server/reexec", handle: s.postServerReexec, body: bodyJSON, local: true},
		{Method: "GET", Pattern: "/v1/events", handle: s.getEvents},
		{Method: "GET", Pattern: "/v1/events/stream", handle: s.streamEvents, own: true},
		{Method: "GET", Pattern: "/metrics", handle: s.getMetrics},
	}
	mux := http.NewServeMux()
	paths := http.NewServeMux() // the same paths for any method: 405, not 404
	seen := map[string]bool{}
	for _, rt := range s.routes {
		mux.Handle(rt.Method+" "+rt.Pattern, s.wrap(rt))
		if !seen[rt.Pattern] {
			seen[rt.Pattern] = true
			paths.Handle(rt.Pattern, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		}
	}
	mux.Handle("/v1/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pat := paths.Handler(r); pat != "" {
			var allow []string
			for _, rt := range s.routes {
				if rt.Pattern == pat {
					allow = append(allow, rt.Method)
				}
			}
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, errf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		writeError(w, errf(http.StatusNotFound, CodeNotFound, "no such endpoint: %s %s (the API is described in api/openapi.yaml)", r.Method, r.URL.Path))
	}))
	s.dashboardRoutes(mux)
	return closeUnread(mux)
}

// wrap adds authentication (before any byte of a body is read), the
// reception of a JSON body (before any lock is taken), the error body
// and the request metrics.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		defer func() { s.metrics.request(rt.Method+" "+rt.Pattern, rec.status) }()
		if !rt.Public {
			var err *apiError
			if r, err = s.authorized(r); err != nil {
				writeError(rec, err)
				return
			}
		}
		// A standby forwards a write to the leader, authenticated and
		// before its body is read: the leader reads it.
		if !rt.local && s.forward(rec, r) {
			return
		}
		if rt.body == bodyJSON {
			if err := readBody(rec, r, s.cfg.BodyTimeout); err != nil {
				writeError(rec, err)
				return
			}
		}
		if !rt.own {
			// A release import changes the catalog between requests,
			// never under one.
			s.catalogMu.RLock()
			defer s.catalogMu.RUnlock()
		}
		if err := rt.handle(rec, r); err != nil {
			var ae *apiError
			if !errors.As(err, &ae) {
				s.log.Error("server: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			if !rec.wrote {
				writeError(rec, err)
			}
		}
	})
}

// statusRecorder remembers the status written, for the metrics.
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes
// and deadlines of the event stream).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Healthz is the server's own health.
type Healthz struct {
	Status string `json:"status"` // ok
	// Cluster is the description's cluster name.
	Cluster string `json:"cluster"`
	// Driving is the upgrade this server's engine drives, if any.
	Driving string    `json:"driving,omitempty"`
	Time    time.Time `json:"time"`
}

func (s *Server) getHealthz(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	s.mu.Lock()
	h := Healthz{Status: "ok", Cluster: s.cfg.Cluster.Name, Driving: s.driving, Time: time.Now().UTC()}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, h)
	return nil
}

// HealthReport is the preflight's result (GET /v1/health).
type HealthReport struct {
	OK     bool           `json:"ok"`
	To     string         `json:"to,omitempty"`
	Checks []engine.Check `json:"checks"`
}

func (s *Server) getHealth(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "to")
	if err != nil {
		return err
	}
	to, given := q["to"]
	if given && !validVersion(to) {
		return badRequest("query parameter to=%q is not a release version", to)
	}
	pf := s.preflight(r.Context(), to)
	writeJSON(w, http.StatusOK, HealthReport{OK: pf.OK(), To: to, Checks: pf.Checks})
	return nil
}

// Releases is the catalog with each release's state (GET /v1/releases).
type Releases struct {
	Releases []engine.ReleaseView `json:"releases"`
}

func (s *Server) getReleases(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	snap, err := s.observe(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, Releases{Releases: nonNil(s.withImporting(s.view.ReleasesView(r.Context(), snap)))})
	return nil
}

func (s *Server) getRelease(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	v := r.PathValue("version")
	if !validVersion(v) {
		return badRequest("%q is not a release version", v)
	}
	if s.cfg.Cluster.Release(v) == nil {
		return errf(http.StatusNotFound, CodeUnknownRelease, "release %s is not in the catalog; known: %s", v, s.releaseNames())
	}
	snap, err := s.observe(r.Context())
	if err != nil {
		return err
	}
	for _, rv := range s.view.ReleasesView(r.Context(), snap) {
		if rv.Version == v {
			writeJSON(w, http.StatusOK, rv)
			return nil
		}
	}
	return errf(http.StatusNotFound, CodeUnknownRelease, "release %s is not in the catalog", v)
}

func (s *Server) releaseNames() string {
	var out []string
	for _, r := range s.cfg.Cluster.Releases {
		out = append(out, r.Version)
	}
	return strings.Join(out, ", ")
}

// The API's bodies of the upgrade resource (package api: its own
// types, made from the record in one place, api.FromRecord).
type (
	UpgradeStatus   = api.UpgradeStatus
	ActionResult    = api.ActionResult
	StartRequest    = api.StartRequest
	ActionRequest   = api.ActionRequest
	OverrideRequest = api.OverrideRequest
)

// status is the answer about upgrade u: the API's, and who drives it.
func status(u upgrade.Upgrade, drivenBy string) UpgradeStatus {
	return UpgradeStatus{Upgrade: api.FromRecord(u), DrivenBy: drivenBy}
}

// version refuses a request naming an API version this server does not
// speak.
func version(v string) error {
	if why := api.CheckVersion(v); why != "" {
		return badRequest("field \"api_version\": %s", why)
	}
	return nil
}

func (s *Server) getUpgrade(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	u, ok, err := s.cfg.Store.Current()
	if err != nil {
		return err
	}
	if !ok {
		return errf(http.StatusNotFound, CodeNoUpgrade, "no current upgrade: start one with POST /v1/upgrade")
	}
	writeJSON(w, http.StatusOK, status(u, s.drivenBy(u)))
	return nil
}

func (s *Server) postUpgrade(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	var req StartRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := version(req.APIVersion); err != nil {
		return err
	}
	switch {
	case req.To == "":
		return badRequest(`field "to" is required: the release version to upgrade to`)
	case !validVersion(req.To):
		return badRequest(`field "to": %q is not a release version`, req.To)
	case s.cfg.Cluster.Release(req.To) == nil:
		return errf(http.StatusBadRequest, CodeUnknownRelease, `field "to": release %s is not in the catalog; known: %s`, req.To, s.releaseNames())
	}
	if req.Traffic && s.cfg.Cluster.Traffic == nil {
		return errf(http.StatusUnprocessableEntity, CodeNoTrafficSpec, "%s has no traffic: spec to drive during the upgrade; add one, or start without \"traffic\"", s.cfg.Cluster.File)
	}
	if !s.reserveAfterEnd(r.Context(), 5*time.Second) {
		id := s.drivingID()
		return errf(http.StatusConflict, CodeUpgradeInProgress, "upgrade %s is in progress, driven by this server; follow it with GET /v1/upgrade", id)
	}
	unlock, err := s.lockEngine()
	if err != nil {
		s.release()
		if errors.Is(err, store.ErrLocked) {
			return errf(http.StatusConflict, CodeUpgradeInProgress, "another ferry process drives the cluster: %v", err)
		}
		return err
	}
	if req.Traffic {
		// Not fit: say so now, not after the baseline. (Begin runs the
		// preflight again, after it.)
		if pf := s.preflight(r.Context(), req.To); !pf.OK() {
			unlock()
			s.release()
			e := errf(http.StatusUnprocessableEntity, CodePreflightFailed, "the cluster is not fit to upgrade to %s, nothing was changed (no traffic was started): %s", req.To, failedChecks(pf))
			e.Checks = pf.Checks
			return e
		}
		if _, err := s.startTraffic(r.Context()); err != nil {
			unlock()
			s.release()
			return err
		}
	}
	u, err := s.drive.BeginWith(r.Context(), req.To, engine.BeginOptions{AcceptDowntime: req.AcceptDowntime})
	if err != nil {
		s.stopTraffic(nil)
		unlock()
		s.release()
		var pe *engine.PreflightError
		switch {
		case errors.Is(err, store.ErrActive):
			return errf(http.StatusConflict, CodeUpgradeInProgress, "%v", err)
		case errors.Is(err, engine.ErrNothingToDo):
			writeJSON(w, http.StatusOK, engine.NothingToDo{NothingToDo: true, To: req.To, Message: err.Error()})
			return nil
		case errors.Is(err, engine.ErrDowntime):
			return errf(http.StatusUnprocessableEntity, CodeDowntimeNotAccepted, "%v (field \"accept_downtime\": true)", err)
		case errors.As(err, &pe):
			e := errf(http.StatusUnprocessableEntity, CodePreflightFailed, "the cluster is not fit to upgrade to %s, nothing was changed: %s", req.To, failedChecks(pe.Preflight))
			e.Checks = pe.Preflight.Checks
			return e
		case errors.Is(err, plan.ErrNoPath), errors.Is(err, plan.ErrNotUpgradable), errors.Is(err, plan.ErrUnknownRelease),
			errors.Is(err, plan.ErrNoArtifact), errors.Is(err, plan.ErrUnknownStrategy):
			return errf(http.StatusUnprocessableEntity, CodePreflightFailed, "nothing was changed: %v", err)
		}
		return err
	}
	if req.Traffic {
		s.trafficBegun(u.ID)
	}
	s.run(unlock)
	s.signal()
	w.Header().Set("Location", "/v1/upgrade")
	writeJSON(w, http.StatusAccepted, status(u, DrivenByServer))
	return nil
}

func (s *Server) drivingID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.driving != "" {
		return s.driving
	}
	return "(starting)"
}

func failedChecks(pf engine.Preflight) string {
	var out []string
	for _, c := range pf.Failed() {
		out = append(out, c.Name+": "+c.Detail)
	}
	return strings.Join(out, "; ")
}

func (s *Server) patchUpgrade(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	var req ActionRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := version(req.APIVersion); err != nil {
		return err
	}
	kind := upgrade.IntentKind(req.Action)
	switch kind {
	case upgrade.IntentPause, upgrade.IntentResume, upgrade.IntentAbort, upgrade.IntentFinalize:
	case "":
		return badRequest(`field "action" is required: pause, resume, abort or finalize`)
	default:
		return badRequest(`field "action": %q is not one of pause, resume, abort, finalize`, req.Action)
	}
	cur, err := s.currentLocked(string(kind))
	if err != nil {
		return err
	}
	// The same checks as 'ferry upgrade pause|resume|abort|finalize',
	// made on the record as stored, in the request's transaction.
	u, err := s.cfg.Store.Request(cur.ID, kind, time.Now(), func(u upgrade.Upgrade) error {
		if u.State.Terminal() {
			return errf(http.StatusConflict, CodeUpgradeEnded, "upgrade %s has ended (%s): nothing to %s", u.ID, u.State, kind)
		}
		switch kind {
		case upgrade.IntentAbort:
			if why := upgrade.NoAbort(&u); why != "" {
				return errf(http.StatusConflict, CodeAbortRefused, "abort refused: %s", why)
			}
		case upgrade.IntentFinalize:
			if why := upgrade.NoFinalize(&u); why != "" {
				return errf(http.StatusConflict, CodeFinalizeRefused, "finalize refused: %s", why)
			}
		case upgrade.IntentPause:
			if u.State == upgrade.StatePaused {
				return errf(http.StatusConflict, CodeAlreadyPaused, "upgrade %s is already paused; resume goes on", u.ID)
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errf(http.StatusNotFound, CodeNoUpgrade, "%v", err)
		}
		return err
	}
	s.signal()
	// Whoever drives the upgrade acts on the request; if nobody does,
	// this server takes it up (a paused upgrade stays paused).
	by, err := s.ensureDriving()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, ActionResult{Action: string(kind), Upgrade: api.FromRecord(u), DrivenBy: by})
	return nil
}

func (s *Server) postOverride(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	var req OverrideRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := version(req.APIVersion); err != nil {
		return err
	}
	// Who made it is the name of the token the request carries, never
	// what the client says: req.By is read (clients before named tokens
	// send it, and must not be refused) and ignored.
	o := upgrade.Override{Predicate: req.Predicate, Member: req.Member, Effect: req.Effect, Reason: req.Reason,
		Component: req.Component, Revoke: req.Revoke, By: identity(r), At: time.Now()}
	if req.For != "" {
		d, err := time.ParseDuration(req.For)
		if err != nil || d <= 0 || req.Revoke {
			return errf(http.StatusUnprocessableEntity, CodeInvalidOverride, "override refused: for: %q is not a positive duration (30m), or given with revoke", req.For)
		}
		o.Until = o.At.Add(d)
	}
	cur, err := s.currentLocked("override")
	if err != nil {
		return err
	}
	if req.ThisPhase {
		o.Phase, o.PhaseRollback = cur.Phase+1, cur.RollingBack()
	}
	u, err := s.cfg.Store.Override(cur.ID, o, func(u upgrade.Upgrade) error {
		if why := upgrade.CheckOverride(&u, o, strategy.Known, strings.Join(strategy.PredicateNames(), ", ")); why != "" {
			if u.State.Terminal() {
				return errf(http.StatusConflict, CodeUpgradeEnded, "override refused: %s", why)
			}
			return errf(http.StatusUnprocessableEntity, CodeInvalidOverride, "override refused: %s", why)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errf(http.StatusNotFound, CodeNoUpgrade, "%v", err)
		}
		return err
	}
	s.signal()
	writeJSON(w, http.StatusCreated, status(u, s.drivenBy(u)))
	return nil
}

// currentLocked returns the current upgrade, which this server's
// description may act on: 404 when there is none, 409 when another
// description locks the cluster.
func (s *Server) currentLocked(what string) (upgrade.Upgrade, error) {
	cur, ok, err := s.cfg.Store.Current()
	if err != nil {
		return cur, err
	}
	if !ok {
		return cur, errf(http.StatusNotFound, CodeNoUpgrade, "no upgrade to %s: none is current", what)
	}
	if err := engine.CheckLock(cur, s.cfg.Cluster.Digest, s.cfg.Cluster.File); err != nil {
		return cur, errf(http.StatusConflict, CodeClusterLocked, "%v", err)
	}
	return cur, nil
}

func (s *Server) deleteUpgrade(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	u, err := s.cfg.Store.ClearCurrent()
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errf(http.StatusNotFound, CodeNoUpgrade, "no current upgrade to clear")
	case errors.Is(err, store.ErrActive):
		return errf(http.StatusConflict, CodeUpgradeNotEnded, "%v: abort it, or let it end, first", err)
	case err != nil:
		return err
	}
	s.signal()
	writeJSON(w, http.StatusOK, status(u, DrivenByNone))
	return nil
}

// Members is every member, observed and joined with the current
// upgrade (GET /v1/members).
type Members struct {
	Members    []engine.MemberView `json:"members"`
	ObservedAt time.Time           `json:"observed_at"`
}

func (s *Server) getMembers(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	snap, err := s.observe(r.Context())
	if err != nil {
		return err
	}
	var up *upgrade.Upgrade
	if u, ok, err := s.cfg.Store.Current(); err != nil {
		return err
	} else if ok {
		up = &u
	}
	writeJSON(w, http.StatusOK, Members{Members: nonNil(s.view.MembersView(snap, up)), ObservedAt: snap.Time.UTC()})
	return nil
}

// Versions counts members per component per running version
// (GET /v1/versions), and says this server's ferry release and build
// and each agent's (ferry, agents; asked at most every 5 s).
type Versions struct {
	Components []engine.ComponentVersions `json:"components"`
	ObservedAt time.Time                  `json:"observed_at"`
	selfupgrade.Builds
}

func (s *Server) getVersions(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	snap, err := s.observe(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, Versions{Components: nonNil(s.view.VersionsView(snap)), ObservedAt: snap.Time.UTC(),
		Builds: s.builds(r.Context())})
	return nil
}

// Events is a page of the event log (GET /v1/events).
type Events struct {
	Events []store.Event `json:"events"`
	// Last is the Seq of the last event returned (after, when none):
	// the after of the next page.
	Last uint64 `json:"last"`
}

const maxEvents = 10000

func (s *Server) getEvents(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "after", "limit", "upgrade")
	if err != nil {
		return err
	}
	after, err := uintParam(q, "after", 0, 1<<62)
	if err != nil {
		return err
	}
	limit, err := uintParam(q, "limit", 1000, maxEvents)
	if err != nil {
		return err
	}
	if limit == 0 {
		return badRequest("query parameter limit=0: want 1 to %d", maxEvents)
	}
	id, err := s.upgradeParam(q)
	if err != nil {
		return err
	}
	evs, err := s.cfg.Store.Events(id, after, int(limit))
	if err != nil {
		return err
	}
	out := Events{Events: nonNil(evs), Last: after}
	if len(evs) > 0 {
		out.Last = evs[len(evs)-1].Seq
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// upgradeParam resolves ?upgrade=: an upgrade's id, "current", or
// absent for every upgrade.
func (s *Server) upgradeParam(q map[string]string) (string, error) {
	id, ok := q["upgrade"]
	if !ok {
		return "", nil
	}
	if id == "current" {
		u, ok, err := s.cfg.Store.Current()
		if err != nil {
			return "", err
		}
		if !ok {
			return "", errf(http.StatusNotFound, CodeNoUpgrade, "no current upgrade")
		}
		return u.ID, nil
	}
	if id == "" || len(id) > 128 || strings.ContainsAny(id, " \t\r\n") {
		return "", badRequest("query parameter upgrade=%q is not an upgrade id", id)
	}
	if _, err := s.cfg.Store.Get(id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return "", errf(http.StatusNotFound, CodeNoUpgrade, "no upgrade %s", id)
		}
		return "", err
	}
	return id, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
