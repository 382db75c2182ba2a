package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// newClient returns the client probes use. It keeps no idle connection
// (a member restarted since the last probe would otherwise be asked on
// a socket its previous process owned), follows no redirect (a probe
// checks the URL it names) and uses no proxy (a probe checks the
// member, not a proxy's view of it).
func newClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            (&net.Dialer{KeepAlive: -1}).DialContext,
			DisableKeepAlives:      true,
			TLSHandshakeTimeout:    DefaultTimeout,
			MaxResponseHeaderBytes: 64 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

var methods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true,
}

// http is an HTTP call: status, then the JSON match if there is one.
// It returns the body (for a pattern) and, for a version call (read),
// the value at the json path.
func (p *Prober) http(ctx context.Context, call config.Call, d config.TemplateData, timeout time.Duration, read bool) (r Result, body string, value string) {
	method, rawURL := strings.ToUpper(call.Method), strings.TrimSpace(call.HTTP)
	if method == "" {
		// "POST http://…", as hooks are written; config.ApplyDefaults
		// splits it too, but a Call built in Go may not have been.
		if m, u, ok := strings.Cut(rawURL, " "); ok && methods[strings.ToUpper(m)] {
			method, rawURL = strings.ToUpper(m), strings.TrimSpace(u)
		}
	}
	u, err := config.Render(rawURL, d)
	if err != nil {
		return Result{Detail: "http url: " + err.Error()}, "", ""
	}
	reqBody, err := config.Render(call.Body, d)
	if err != nil {
		return Result{Detail: "http body: " + err.Error()}, "", ""
	}
	if method == "" {
		method = "GET"
		if reqBody != "" {
			method = "POST"
		}
	}
	what := method + " " + u
	var rd io.Reader
	if reqBody != "" {
		rd = strings.NewReader(reqBody)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is in what already
		}
		return Result{Detail: what + ": not a valid URL: " + err.Error()}, "", ""
	}
	req.Header.Set("User-Agent", "ferry-probe")
	keys := make([]string, 0, len(call.Headers))
	for k := range call.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := config.Render(call.Headers[k], d)
		if err != nil {
			return Result{Detail: fmt.Sprintf("http header %s: %v", k, err)}, "", ""
		}
		if strings.EqualFold(k, "Host") {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}

	client := p.Client
	if client == nil {
		client = defaultProber.Client
	}
	resp, err := client.Do(req)
	if err != nil {
		return Result{Detail: what + ": " + explain(ctx, err, timeout)}, "", ""
	}
	defer resp.Body.Close()
	data, readErr := io.ReadAll(io.LimitReader(resp.Body, MaxBody))

	if want := call.ExpectStatus; (want == 0 && (resp.StatusCode < 200 || resp.StatusCode > 299)) ||
		(want != 0 && resp.StatusCode != want) {
		wantS := "2xx"
		if want != 0 {
			wantS = fmt.Sprint(want)
		}
		detail := fmt.Sprintf("%s: status %d, want %s", what, resp.StatusCode, wantS)
		if s := oneLine(string(data)); s != "" {
			if len(s) > bodyInDetail {
				s = strings.ToValidUTF8(s[:bodyInDetail], "") + "…"
			}
			detail += fmt.Sprintf(" (body %q)", s)
		}
		return Result{Detail: detail}, "", ""
	}
	if readErr != nil && (call.JSON != nil || call.Pattern != "") {
		return Result{Detail: what + ": reading the response: " + explain(ctx, readErr, timeout)}, "", ""
	}
	if call.JSON == nil {
		return Result{OK: true, Detail: what + ": " + resp.Status}, string(data), ""
	}
	if read {
		v, detail, ok := readJSON(data, call.JSON.Path)
		if !ok {
			return Result{Detail: what + ": " + detail}, "", ""
		}
		return Result{OK: true, Detail: what + ": " + resp.Status + ", " + detail}, string(data), v
	}
	var detail string
	var ok bool
	if call.JSON.EqualsPath != "" {
		detail, ok = matchJSONPaths(data, call.JSON.Path, call.JSON.EqualsPath)
	} else {
		want := call.JSON.Equals
		if s, isString := want.(string); isString && config.IsTemplate(s) {
			r, err := config.Render(s, d)
			if err != nil {
				return Result{Detail: "http json.equals: " + err.Error()}, "", ""
			}
			want = r
		}
		detail, ok = matchJSON(data, call.JSON.Path, want)
	}
	if !ok {
		return Result{Detail: detail}, "", ""
	}
	return Result{OK: true, Detail: what + ": " + resp.Status + ", " + detail}, string(data), ""
}
