package client

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/api"
)

// Current returns the server's current upgrade; ok is false when
// there is none (404).
func (c *Client) Current(ctx context.Context) (u api.Upgrade, ok bool, err error) {
	var st api.UpgradeStatus
	err = c.Do(ctx, http.MethodGet, "/v1/upgrade", nil, &st)
	var ce *Error
	if errors.As(err, &ce) && ce.Status == http.StatusNotFound {
		return api.Upgrade{}, false, nil
	}
	if err != nil {
		return api.Upgrade{}, false, err
	}
	return st.Upgrade, true, nil
}

// StartOptions are a start's: the description's traffic around it,
// and the downtime the operator accepts (a component of strategy
// offline).
type StartOptions struct {
	Traffic, AcceptDowntime bool
}

// Start asks the server to start an upgrade to version to (with the
// description's traffic around it, if traffic) and returns it, with who
// drives it. The request names no api_version: a server before the
// field would refuse it as unknown.
func (c *Client) Start(ctx context.Context, to string, opts StartOptions) (api.UpgradeStatus, error) {
	var st struct {
		api.UpgradeStatus
		NothingToDo bool   `json:"nothing_to_do"`
		Message     string `json:"message"`
	}
	req := api.StartRequest{To: to, Traffic: opts.Traffic, AcceptDowntime: opts.AcceptDowntime}
	if err := c.Do(ctx, http.MethodPost, "/v1/upgrade", req, &st); err != nil {
		return api.UpgradeStatus{}, err
	}
	if st.NothingToDo {
		return api.UpgradeStatus{}, nothingToDo(st.Message)
	}
	return st.UpgradeStatus, nil
}

// Act asks the server for pause, resume, abort or finalize of the
// current upgrade (PATCH /v1/upgrade): recorded, acted on by whoever
// drives it at its next step.
func (c *Client) Act(ctx context.Context, action string) (api.ActionResult, error) {
	var res api.ActionResult
	err := c.Do(ctx, http.MethodPatch, "/v1/upgrade", api.ActionRequest{Action: action}, &res)
	return res, err
}

// Override records an override of the current upgrade (POST
// /v1/upgrade/overrides) and returns the upgrade with it: its last
// override is the one recorded, with who the server says made it.
func (c *Client) Override(ctx context.Context, req api.OverrideRequest) (api.Upgrade, error) {
	var st api.UpgradeStatus
	err := c.Do(ctx, http.MethodPost, "/v1/upgrade/overrides", req, &st)
	return st.Upgrade, err
}

// ErrNothingToDo is Start's error when the server started no upgrade
// because every member runs the target already; its text is the
// server's.
var ErrNothingToDo = errors.New("nothing to do")

type nothingToDo string

func (e nothingToDo) Error() string { return string(e) }
func (e nothingToDo) Unwrap() error { return ErrNothingToDo }

// Follow streams the events of upgrade id (of any upgrade, if id is
// empty) after sequence number after to onEvent until the current
// record satisfies done (polled every 250ms), then returns that record.
// The stream says what happens; the record says when it is over.
func (c *Client) Follow(ctx context.Context, id string, after uint64, onEvent func(store.Event), done func(api.Upgrade) bool) (api.Upgrade, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	streamed := make(chan error, 1)
	go func() {
		streamed <- c.Stream(ctx, after, func(ev store.Event) bool {
			if (id == "" || ev.Upgrade == id) && onEvent != nil {
				onEvent(ev)
			}
			return true
		})
	}()
	for {
		u, ok, err := c.Current(ctx)
		if err != nil {
			return u, err
		}
		if ok && (id == "" || u.ID == id) && done(u) {
			// Let the stream deliver the last events before it is cut.
			select {
			case <-time.After(300 * time.Millisecond):
			case <-streamed:
			}
			return u, nil
		}
		select {
		case <-ctx.Done():
			return u, ctx.Err()
		case err := <-streamed:
			if err != nil && ctx.Err() == nil {
				return u, err
			}
			streamed = nil // the stream ended: poll on
		case <-time.After(250 * time.Millisecond):
		}
	}
}
