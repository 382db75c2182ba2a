package lb

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// A host's maintenance mode: the backends on a host (name=addr@host on
// the command line) leave the rotation together while the host is
// locked, and come back when it is unlocked, whatever each backend's
// own drain says. An orchestrator locks a host before it upgrades
// what runs on it (StarlingX's host-lock), asking first whether the
// backends left can take the load (GET /admin/hosts/{host}/capacity).

// inRotation reports whether b may be sent requests: enabled, and its
// host not locked. l.mu is held.
func (l *LB) inRotation(b *backend) bool { return b.enabled && !l.locked[b.Host] }

// LockHost takes every backend of host out of rotation at once, then
// waits until none of them has a request in flight or ctx ends; it
// returns the requests still in flight. Locking a locked host just
// waits again; a host with no backend is locked all the same (its
// other members serve no client through the balancer).
func (l *LB) LockHost(ctx context.Context, host string) (int, error) {
	l.mu.Lock()
	if l.locked == nil {
		l.locked = map[string]bool{}
	}
	if !l.locked[host] {
		l.locked[host] = true
		l.log.Info("host locked", "host", host)
	}
	l.mu.Unlock()
	return l.waitIdle(ctx, "host "+host, func(b *backend) bool { return b.Host == host })
}

// UnlockHost puts the backends of host back into rotation (each as its
// own drain or enable left it); unlocking an unlocked host is no error.
func (l *LB) UnlockHost(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.locked[host] {
		delete(l.locked, host)
		l.log.Info("host unlocked", "host", host)
	}
}

// Capacity says how many backends, and on how many hosts, would stay
// in rotation and healthy with host locked too, and which hosts are
// locked now.
func (l *LB) Capacity(host string) (left, hostsLeft int, locked []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	on := map[string]bool{}
	for _, b := range l.backends {
		if b.Host != host && l.inRotation(b) && b.healthy {
			left++
			on[b.Host] = true
		}
	}
	for h := range l.locked {
		locked = append(locked, h)
	}
	slices.Sort(locked)
	return left, len(on), locked
}

// HostsStatus is GET /admin/hosts: the hosts locked now.
type HostsStatus struct {
	Locked []string `json:"locked"`
}

func (l *LB) handleHosts(w http.ResponseWriter, _ *http.Request) {
	l.mu.Lock()
	st := HostsStatus{Locked: []string{}}
	for h := range l.locked {
		st.Locked = append(st.Locked, h)
	}
	l.mu.Unlock()
	slices.Sort(st.Locked)
	writeJSON(w, http.StatusOK, st)
}

// handleLock answers 200 once the host's backends have nothing in
// flight, or 504 (still locked) if ?timeout= ran out first.
func (l *LB) handleLock(w http.ResponseWriter, r *http.Request) {
	host := r.PathValue("host")
	timeout, ok := durationParam(w, r, "timeout", defaultDrainTimeout)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	if n, err := l.LockHost(ctx, host); err != nil {
		writeJSON(w, http.StatusGatewayTimeout, map[string]any{"host": host, "state": "locked", "inflight": n, "error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"host": host, "state": "locked", "inflight": 0})
}

func (l *LB) handleUnlock(w http.ResponseWriter, r *http.Request) {
	host := r.PathValue("host")
	l.UnlockHost(host)
	writeJSON(w, http.StatusOK, map[string]any{"host": host, "state": "unlocked"})
}

// handleCapacity answers 200 when at least ?min= backends (default 1)
// on at least ?min_hosts= hosts (default 1) would stay in rotation with
// the host locked too, 409 with the counts otherwise:
// {"fits":false,"left":1,"hosts_left":1,"min":1,"min_hosts":2,"locked":["host-1"]}.
func (l *LB) handleCapacity(w http.ResponseWriter, r *http.Request) {
	host := r.PathValue("host")
	mins := map[string]int{"min": 1, "min_hosts": 1}
	for k := range mins {
		if v := r.URL.Query().Get(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("bad %s %q", k, v)})
				return
			}
			mins[k] = n
		}
	}
	left, hostsLeft, locked := l.Capacity(host)
	ok := left >= mins["min"] && hostsLeft >= mins["min_hosts"]
	status := http.StatusOK
	if !ok {
		status = http.StatusConflict
	}
	writeJSON(w, status, map[string]any{"host": host, "fits": ok, "left": left, "hosts_left": hostsLeft, "min": mins["min"],
		"min_hosts": mins["min_hosts"], "locked": locked})
}

// durationParam reads query parameter key as a duration (def when
// absent); a bad one is answered 400 and ok is false.
func durationParam(w http.ResponseWriter, r *http.Request, key string, def time.Duration) (time.Duration, bool) {
	v := r.URL.Query().Get(key)
	if v == "" {
		return def, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("bad %s %q", key, v)})
		return 0, false
	}
	return d, true
}
