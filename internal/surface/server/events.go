package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// heartbeat is how often an idle event stream sends a comment, so
// that proxies and clients see the connection alive.
const heartbeat = 15 * time.Second

// streamEvents sends the event log as server-sent events: first the
// events after ?after= (or the Last-Event-ID a reconnecting client
// sends), then each new one as it is stored, by whichever process.
// Each event's id is its Seq, its data the event as JSON.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "after", "upgrade")
	if err != nil {
		return err
	}
	after, err := uintParam(q, "after", 0, 1<<62)
	if err != nil {
		return err
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			return badRequest("Last-Event-ID %q: want an event's seq", id)
		}
		after = max(after, n)
	}
	only, err := s.upgradeParam(q)
	if err != nil {
		return err
	}
	// Subscribe before reading the backlog: an event stored meanwhile
	// arrives twice (skipped by its seq), never not at all.
	ch, unsubscribe := s.hub.subscribe()
	defer unsubscribe()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(ev store.Event) error {
		if ev.Seq <= after || (only != "" && ev.Upgrade != only) {
			return nil
		}
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		after = ev.Seq
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err = fmt.Fprintf(w, "id: %d\ndata: %s\n\n", ev.Seq, b)
		return err
	}
	flush := func() error { return rc.Flush() }
	// retry: how long a client waits before it reconnects.
	if _, err := fmt.Fprint(w, "retry: 1000\n\n"); err != nil {
		return nil
	}
	for {
		evs, err := s.cfg.Store.Events(only, after, 1000)
		if err != nil {
			fmt.Fprintf(w, "event: error\ndata: %q\n\n", err.Error())
			_ = flush()
			return nil
		}
		for _, ev := range evs {
			if err := send(ev); err != nil {
				return nil
			}
		}
		if len(evs) < 1000 {
			break
		}
	}
	if err := flush(); err != nil {
		return nil
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return nil // fell behind: the client reconnects from its last id
			}
			if err := send(ev); err != nil {
				return nil
			}
			// Send what else is queued before flushing.
			for n := len(ch); n > 0; n-- {
				if err := send(<-ch); err != nil {
					return nil
				}
			}
		case <-tick.C:
			_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
		case <-r.Context().Done():
			return nil
		case <-s.ctx.Done():
			return nil
		}
		if err := flush(); err != nil {
			return nil
		}
	}
}
