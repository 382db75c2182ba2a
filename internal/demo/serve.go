package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/ferry-upgrade/ferry/internal/client"
	"github.com/ferry-upgrade/ferry/internal/server"
	"github.com/ferry-upgrade/ferry/internal/store"
	"github.com/ferry-upgrade/ferry/internal/upgrade"
)

// viaServer runs the demo's upgrade the way an operator scripts one:
// a ferry server over the cluster (its API, dashboard and metrics on
// loopback), the upgrade started with POST /v1/upgrade and followed
// through the event stream, as 'ferry --addr' does.
type viaServer struct {
	url    string
	client *client.Client
	stop   func()
}

func startServer(ctx context.Context, cl *Cluster, st *store.Store, logger *slog.Logger) (*viaServer, error) {
	tok, _, err := server.LoadOrCreateToken(filepath.Join(cl.DataDir, server.TokenFile))
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s, err := server.New(server.Config{Cluster: cl.Config, Driver: cl.Driver, Store: st, Token: tok, Logger: logger})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.ListenAndServe(sctx, server.ListenConfig{Addr: "127.0.0.1:0", OnListen: func(u string) { urls <- u }})
	}()
	var url string
	select {
	case url = <-urls:
	case err := <-done:
		cancel()
		return nil, fmt.Errorf("demo: server: %w", err)
	case <-time.After(30 * time.Second):
		cancel()
		return nil, errors.New("demo: the server did not listen within 30s")
	}
	c, err := client.New(client.Options{Addr: url, Token: tok})
	if err != nil {
		cancel()
		return nil, err
	}
	return &viaServer{url: url, client: c, stop: func() { cancel(); <-done }}, nil
}

// run starts the upgrade to version to through the API and follows its
// events (to onEvent) until it ends; it returns the ended record.
func (v *viaServer) run(ctx context.Context, to string, onEvent func(store.Event)) (upgrade.Upgrade, error) {
	var started struct {
		Upgrade upgrade.Upgrade `json:"upgrade"`
	}
	if err := v.client.Do(ctx, http.MethodPost, "/v1/upgrade", map[string]string{"to": to}, &started); err != nil {
		return upgrade.Upgrade{}, err
	}
	id := started.Upgrade.ID
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	streamed := make(chan error, 1)
	go func() {
		streamed <- v.client.Stream(sctx, 0, func(ev store.Event) bool {
			if ev.Upgrade == id && onEvent != nil {
				onEvent(ev)
			}
			return true
		})
	}()
	for {
		var cur struct {
			Upgrade upgrade.Upgrade `json:"upgrade"`
		}
		if err := v.client.Do(ctx, http.MethodGet, "/v1/upgrade", nil, &cur); err != nil {
			return upgrade.Upgrade{}, err
		}
		if cur.Upgrade.ID == id && (cur.Upgrade.State.Terminal() || cur.Upgrade.State == upgrade.StatePaused) {
			// Let the stream deliver the last events before it is cut.
			select {
			case <-time.After(300 * time.Millisecond):
			case <-streamed:
			}
			return cur.Upgrade, nil
		}
		select {
		case <-ctx.Done():
			return upgrade.Upgrade{}, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
