package demo

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/ferry-upgrade/ferry/internal/client"
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

// ServeFunc starts a ferry server over the demo's cluster (its driver
// and store) on loopback and returns its URL, its API token, and how
// to stop it. The CLI passes one (the demo does not import the server,
// whose tests start demo clusters).
type ServeFunc func(ctx context.Context, cl *Cluster, st *store.Store, logger *slog.Logger) (url, token string, stop func(), err error)

func startServer(ctx context.Context, serve ServeFunc, cl *Cluster, st *store.Store, logger *slog.Logger) (*viaServer, error) {
	url, tok, stop, err := serve(ctx, cl, st, logger)
	if err != nil {
		return nil, fmt.Errorf("demo: server: %w", err)
	}
	c, err := client.New(client.Options{Addr: url, Token: tok})
	if err != nil {
		stop()
		return nil, err
	}
	return &viaServer{url: url, client: c, stop: stop}, nil
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
