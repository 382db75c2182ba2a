package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/proof"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/selfupgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/api"
	"github.com/ferry-upgrade/ferry/internal/surface/client"
	"github.com/ferry-upgrade/ferry/internal/trust/bearer"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// remote reports whether the commands go through a ferry server
// (--addr or FERRY_ADDR) rather than a local data directory.
func (g *globals) remote() bool { return g.addr != "" }

// client returns the server's client; the token is read from
// --token-file (FERRY_TOKEN_FILE), by default DATA-DIR/api-token.
func (g *globals) client() (*client.Client, error) {
	return g.clientAt(g.addr)
}

// clientAt is client for another server of the same store (they share
// the token): the leader a standby names.
func (g *globals) clientAt(addr string) (*client.Client, error) {
	path := g.tokenFile
	if path == "" {
		path = filepath.Join(g.dataDir, "api-token")
	}
	tok, err := bearer.Read(path)
	if err != nil {
		return nil, fmt.Errorf("the server's API token: %w (pass --token-file, or FERRY_TOKEN_FILE)", err)
	}
	return client.New(client.Options{Addr: addr, Token: tok, CAFile: g.caFile})
}

// remoteErr maps the server's refusals to the exit codes the local
// commands use: 3 for a conflict (an upgrade in progress, the lock), 5
// for a failed preflight.
func remoteErr(err error) error {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return err
	}
	switch {
	case ce.Status == http.StatusConflict:
		return &exitError{code: 3, err: err}
	case ce.Code == "preflight_failed", ce.Code == "downtime_not_accepted", ce.Code == "self_upgrade_refused":
		return &exitError{code: 5, err: err}
	}
	return err
}

func (g *globals) get(ctx context.Context, path string, out any) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	return remoteErr(c.Do(ctx, http.MethodGet, path, nil, out))
}

func (g *globals) remoteHealth(ctx context.Context, to string) error {
	var h struct {
		OK     bool           `json:"ok"`
		Checks []engine.Check `json:"checks"`
	}
	path := "/v1/health"
	if to != "" {
		path += "?to=" + url.QueryEscape(to)
	}
	if err := g.get(ctx, path, &h); err != nil {
		return err
	}
	return g.printHealth(h.OK, to, h.Checks)
}

func (g *globals) remoteReleases(ctx context.Context) error {
	var r struct {
		Releases []engine.ReleaseView `json:"releases"`
	}
	if err := g.get(ctx, "/v1/releases", &r); err != nil {
		return err
	}
	return g.printReleases(r.Releases)
}

func (g *globals) remoteVersions(ctx context.Context, builds bool) error {
	var v struct {
		Components []engine.ComponentVersions `json:"components"`
		selfupgrade.Builds
	}
	if err := g.get(ctx, "/v1/versions", &v); err != nil {
		return err
	}
	if g.json() && !builds {
		return g.printVersions(v.Components)
	}
	return g.printVersionsBuilds(v.Components, v.Builds)
}

func (g *globals) remoteMembers(ctx context.Context) error {
	var m struct {
		Members []engine.MemberView `json:"members"`
	}
	if err := g.get(ctx, "/v1/members", &m); err != nil {
		return err
	}
	if g.json() {
		return g.printJSON(m.Members)
	}
	printMembers(g, m.Members)
	return nil
}

func (g *globals) remoteEvents(ctx context.Context, all, follow bool, limit int) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	which := "current"
	if all {
		which = ""
	}
	var after uint64
	show := func(ev store.Event) {
		after = ev.Seq
		if g.json() {
			_ = g.printJSON(ev)
			return
		}
		printEvent(g, ev)
	}
	for {
		q := url.Values{}
		if which != "" {
			q.Set("upgrade", which)
		}
		q.Set("after", strconv.FormatUint(after, 10))
		if limit > 0 {
			q.Set("limit", strconv.Itoa(limit))
		}
		var page struct {
			Events []store.Event `json:"events"`
			Last   uint64        `json:"last"`
		}
		if err := c.Do(ctx, http.MethodGet, "/v1/events?"+q.Encode(), nil, &page); err != nil {
			return remoteErr(err)
		}
		for _, ev := range page.Events {
			show(ev)
		}
		if limit > 0 || len(page.Events) == 0 {
			break
		}
	}
	if !follow {
		return nil
	}
	id := ""
	if u, ok, err := c.Current(ctx); err == nil && ok {
		if u.Terminal() {
			return nil
		}
		id = u.ID
	}
	_, err = c.Follow(ctx, id, after, show, func(u api.Upgrade) bool { return u.Terminal() })
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (g *globals) remoteStatus(ctx context.Context) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	u, ok, err := c.Current(ctx)
	if err != nil {
		return remoteErr(err)
	}
	if !ok {
		return errors.New("no upgrade yet")
	}
	if g.json() {
		return g.printJSON(u)
	}
	printStatus(g, u)
	return nil
}

// remoteStart asks the server to start an upgrade and follows it to its
// end. Interrupting the CLI stops the following, not the upgrade: the
// server drives it. With traffic, the server's impact report is then
// fetched, its verdict printed and the report written to report (by
// default DATA-DIR/reports/ID.json, where 'ferry bundle' finds it).
func (g *globals) remoteStart(ctx context.Context, to string, withTraffic, acceptDowntime, quiet bool, report string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	st, err := c.Start(ctx, to, client.StartOptions{Traffic: withTraffic, AcceptDowntime: acceptDowntime})
	u := st.Upgrade
	if errors.Is(err, client.ErrNothingToDo) {
		return g.nothingToDo(to, err.Error())
	}
	if err != nil {
		return remoteErr(err)
	}
	if !quiet && !g.json() {
		fmt.Fprintf(g.stdout, "upgrade %s: %s → %s (driven by the server at %s)\n", u.ID, u.From, u.To, g.addr)
	}
	err = g.followToEnd(ctx, c, u.ID, quiet)
	if withTraffic && ctx.Err() == nil {
		if rerr := g.remoteReport(ctx, c, u.ID, report); rerr != nil {
			fmt.Fprintf(g.stderr, "ferry: the impact report of upgrade %s: %v\n", u.ID, rerr)
			if err == nil {
				err = rerr
			}
		}
	}
	return err
}

// reportWait bounds the wait for a server's impact report once its
// upgrade has ended: the traffic runs on for its "after" and every
// acknowledged write is read back first.
const reportWait = 2 * time.Minute

// remoteReport waits for the server's impact report of upgrade id (GET
// /v1/upgrade/report), writes it to path (default
// DATA-DIR/reports/ID.json) and prints its verdict.
func (g *globals) remoteReport(ctx context.Context, c *client.Client, id, path string) error {
	ctx, cancel := context.WithTimeout(ctx, reportWait)
	defer cancel()
	var raw json.RawMessage
	for {
		err := c.Do(ctx, http.MethodGet, "/v1/upgrade/report", nil, &raw)
		var ce *client.Error
		if err == nil || !errors.As(err, &ce) || ce.Status != http.StatusNotFound || !strings.Contains(ce.Message, "not ended yet") {
			if err != nil {
				return err
			}
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready within %s: %w", reportWait, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	var r proof.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("the server's answer: %w", err)
	}
	if r.UpgradeID != id {
		return fmt.Errorf("the server's report is of upgrade %s, not %s", r.UpgradeID, id)
	}
	if path == "" {
		path = filepath.Join(g.dataDir, "reports", id+".json")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	if err := safefile.WriteAtomic(path, 0o640, func(w io.Writer) error {
		_, err := w.Write(append(raw, '\n'))
		return err
	}); err != nil {
		return err
	}
	if !g.json() {
		printProof(g, r, path, "", "")
	}
	return nil
}

// followToEnd prints the events of upgrade id until it ends, then its
// status; a state other than completed exits 4.
func (g *globals) followToEnd(ctx context.Context, c *client.Client, id string, quiet bool, ok ...upgrade.State) error {
	start := time.Now()
	show := func(ev store.Event) {}
	if !quiet && !g.json() {
		show = func(ev store.Event) { printLive(g, start, ev) }
	}
	u, err := c.Follow(ctx, id, 0, show, func(u api.Upgrade) bool { return u.Terminal() })
	if ctx.Err() != nil {
		fmt.Fprintf(g.stderr, "ferry: stopped following; the server drives upgrade %s on (ferry upgrade status)\n", id)
		return ctx.Err()
	}
	if err != nil {
		return remoteErr(err)
	}
	if g.json() {
		return g.printJSON(u)
	}
	printStatus(g, u)
	if u.State != upgrade.StateCompleted.String() && !slices.ContainsFunc(ok, func(st upgrade.State) bool { return st.String() == u.State }) {
		return &exitError{code: 4, err: fmt.Errorf("upgrade %s ended %s: %s", u.ID, u.State, u.Reason)}
	}
	return nil
}

// remoteRequest asks the server for pause, resume, abort or finalize.
// Resume, abort and finalize follow the upgrade to its end unless quiet.
func (g *globals) remoteRequest(ctx context.Context, kind upgrade.IntentKind, quiet bool) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	res, err := c.Act(ctx, string(kind))
	if err != nil {
		return remoteErr(err)
	}
	if !g.json() {
		fmt.Fprintf(g.stdout, "%s requested for upgrade %s (%s, driven by %s)\n", kind, res.Upgrade.ID, res.Upgrade.State, res.DrivenBy)
	}
	if kind == upgrade.IntentPause || quiet {
		if g.json() {
			return g.printJSON(res.Upgrade)
		}
		return nil
	}
	return g.followToEnd(ctx, c, res.Upgrade.ID, false, upgrade.StateRolledBack)
}
