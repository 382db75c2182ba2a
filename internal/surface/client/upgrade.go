package client

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// Current returns the server's current upgrade record; ok is false when
// there is none (404).
func (c *Client) Current(ctx context.Context) (u upgrade.Upgrade, ok bool, err error) {
	var st struct {
		Upgrade upgrade.Upgrade `json:"upgrade"`
	}
	err = c.Do(ctx, http.MethodGet, "/v1/upgrade", nil, &st)
	var ce *Error
	if errors.As(err, &ce) && ce.Status == http.StatusNotFound {
		return upgrade.Upgrade{}, false, nil
	}
	if err != nil {
		return upgrade.Upgrade{}, false, err
	}
	return st.Upgrade, true, nil
}

// Start asks the server to start an upgrade to version to (with the
// description's traffic around it, if traffic) and returns its record.
// StartOptions are a start's: the description's traffic around it,
// and the downtime the operator accepts (a component of strategy
// offline).
type StartOptions struct {
	Traffic, AcceptDowntime bool
}

func (c *Client) Start(ctx context.Context, to string, opts StartOptions) (upgrade.Upgrade, error) {
	body := map[string]any{"to": to}
	if opts.Traffic {
		body["traffic"] = true
	}
	if opts.AcceptDowntime {
		body["accept_downtime"] = true
	}
	var st struct {
		Upgrade     upgrade.Upgrade `json:"upgrade"`
		NothingToDo bool            `json:"nothing_to_do"`
		Message     string          `json:"message"`
	}
	if err := c.Do(ctx, http.MethodPost, "/v1/upgrade", body, &st); err != nil {
		return upgrade.Upgrade{}, err
	}
	if st.NothingToDo {
		return upgrade.Upgrade{}, nothingToDo(st.Message)
	}
	return st.Upgrade, nil
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
func (c *Client) Follow(ctx context.Context, id string, after uint64, onEvent func(store.Event), done func(upgrade.Upgrade) bool) (upgrade.Upgrade, error) {
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
