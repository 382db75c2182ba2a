package demo

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/api"
	"github.com/ferry-upgrade/ferry/internal/surface/client"
)

// viaServer runs the demo's upgrade the way an operator scripts one:
// a ferry server over the cluster (its API, dashboard and metrics on
// loopback), the upgrade started with POST /v1/upgrade and followed
// through the event stream, as 'ferry --addr' does.
type viaServer struct {
	url    string
	client *client.Client
	stop   func()
	// drivenBy is who drives the upgrade, as the server's answer to
	// POST /v1/upgrade said ("server").
	drivenBy string
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
// events (to onEvent) until it ends or pauses; it returns the upgrade's
// id (the demo reads its record from the store it shares with the
// server).
func (v *viaServer) run(ctx context.Context, to string, onEvent func(store.Event)) (string, error) {
	st, err := v.client.Start(ctx, to, client.StartOptions{})
	if err != nil {
		return "", err
	}
	v.drivenBy = st.DrivenBy
	u, err := v.client.Follow(ctx, st.Upgrade.ID, 0, onEvent, func(u api.Upgrade) bool {
		return u.Terminal() || u.State == upgrade.StatePaused.String()
	})
	return u.ID, err
}
