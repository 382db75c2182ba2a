package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// stalled is a request written by hand on its own connection: the head
// and the first bytes of a body, then nothing more (the connection
// stays open, as a slow or hostile client holds it).
type stalled struct {
	t     *testing.T
	conn  net.Conn
	began time.Time
}

// stall sends head (CRLF line ends added) and the start of a body.
func stall(t *testing.T, base, head string, start []byte) *stalled {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := strings.ReplaceAll(strings.TrimSpace(head), "\n", "\r\n") + "\r\nHost: " + u.Host + "\r\n\r\n"
	began := time.Now()
	if _, err := conn.Write(append([]byte(req), start...)); err != nil {
		t.Fatal(err)
	}
	return &stalled{t: t, conn: conn, began: began}
}

// answer reads the response within limit; it returns its status, its
// error code and how long after the request it came.
func (s *stalled) answer(limit time.Duration) (status int, code string, after time.Duration) {
	s.t.Helper()
	_ = s.conn.SetReadDeadline(time.Now().Add(limit))
	resp, err := http.ReadResponse(bufio.NewReader(s.conn), nil)
	if err != nil {
		s.t.Fatalf("no answer within %s: %v", limit, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, response{body: b}.code(), time.Since(s.began)
}

// TestSlowBodies: over real loopback connections, a client that stalls
// its body holds nothing but its own request. Unauthenticated, it gets
// 401 at once (the body is never read); over the limit, even chunked,
// 413 as soon as the limit is crossed; stalled below the limit, 408
// within a second of the endpoint's bound. Three authenticated POSTs
// stalled at once and an import meanwhile: the import goes through
// and reads answer at once. (On the old server the refusals waited for
// the read timeout, the stalled bodies held the catalog's read lock
// while they were read, and an import queued behind them made every
// read wait too: GET /v1/upgrade took 28.5 s.)
func TestSlowBodies(t *testing.T) {
	const bound = 3 * time.Second
	o := offlineCluster(t)
	s := newTestServer(t, o, func(c *Config) { c.BodyTimeout = bound; c.MaxArtifactSize = 1 << 20 })
	c := serve(t, s)
	auth := "Authorization: Bearer " + s.cfg.Token

	for _, tc := range []struct {
		what, head string
		start      []byte
		status     int
		code       string
	}{
		{"no token, a stalled body", "POST /v1/upgrade HTTP/1.1\nContent-Type: application/json\nContent-Length: 100",
			[]byte(`{"to":`), 401, CodeUnauthorized},
		{"no token, a stalled upload", "PUT /v1/artifacts/" + strings.Repeat("a", 64) + " HTTP/1.1\nContent-Length: 1000",
			[]byte("abc"), 401, CodeUnauthorized},
		{"no token, a stalled chunked body", "PATCH /v1/upgrade HTTP/1.1\nTransfer-Encoding: chunked",
			[]byte("3\r\n{\"a"), 401, CodeUnauthorized},
		{"a stalled body to a route that takes none", "GET /v1/upgrade HTTP/1.1\n" + auth + "\nContent-Length: 100",
			[]byte("x"), 404, CodeNoUpgrade},
		{"a stalled body to no route", "POST /v1/nothing HTTP/1.1\nContent-Length: 100", []byte("x"), 404, CodeNotFound},
		{"a chunked body over 64 KiB, then stalled", "POST /v1/upgrade HTTP/1.1\n" + auth + "\nContent-Type: application/json\nTransfer-Encoding: chunked",
			chunks(70 << 10), 413, CodeBodyTooLarge},
		{"a Content-Length over 64 KiB", "POST /v1/upgrade HTTP/1.1\n" + auth + "\nContent-Length: 70000", []byte("{"), 413, CodeBodyTooLarge},
		{"a chunked upload over the limit, then stalled", "PUT /v1/artifacts/" + strings.Repeat("a", 64) + " HTTP/1.1\n" + auth + "\nTransfer-Encoding: chunked",
			chunks(1<<20 + 100), 413, CodeBodyTooLarge},
	} {
		st := stall(t, c.base, tc.head, tc.start)
		status, code, after := st.answer(10 * time.Second)
		if status != tc.status || code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.what, status, code, tc.status, tc.code)
		}
		if after > time.Second {
			t.Errorf("%s: answered after %s, want at once", tc.what, after.Round(time.Millisecond))
		}
		t.Logf("%s: %d after %s", tc.what, status, after.Round(time.Millisecond))
	}

	// Stalled below the limit: 408 at the bound, not before.
	st := stall(t, c.base, "POST /v1/upgrade HTTP/1.1\n"+auth+"\nContent-Type: application/json\nContent-Length: 100", []byte(`{"to":`))
	status, code, after := st.answer(10 * time.Second)
	if status != 408 || code != CodeBodyTimeout || after < bound || after > bound+time.Second {
		t.Errorf("a stalled body: %d %s after %s, want 408 %s within a second of %s", status, code, after, CodeBodyTimeout, bound)
	}

	// Three stalled writes, then an import and reads meanwhile.
	var held []*stalled
	for _, head := range []string{"POST /v1/upgrade", "PATCH /v1/upgrade", "POST /v1/cluster/up"} {
		held = append(held, stall(t, c.base, head+" HTTP/1.1\n"+auth+"\nContent-Type: application/json\nContent-Length: 100", []byte(`{"`)))
	}
	art := []byte("#!/bin/sh\necho 2.1.0\n")
	h := sha256.Sum256(art)
	sum := hex.EncodeToString(h[:])
	var up ArtifactUpload
	withDeadline(t, 5*time.Second, "the upload", func() {
		c.do("PUT", "/v1/artifacts/"+sum, art, "Content-Type", "application/octet-stream").expect(t, "the upload", 201).json(t, &up)
	})
	imported := make(chan response, 1)
	go func() {
		imported <- c.do("POST", "/v1/releases", importBody("2.1.0", up.Path, sum))
	}()
	// Reads go on answering at once until the import has answered.
	deadline := time.Now().Add(5 * time.Second)
	for done := false; !done; {
		select {
		case r := <-imported:
			r.expect(t, "the import beside three stalled writes", 201)
			done = true
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the import beside three stalled writes: no answer within 5s")
		}
		for _, path := range []string{"/v1/upgrade", "/v1/events", "/v1/healthz"} {
			began := time.Now()
			withDeadline(t, 5*time.Second, "GET "+path, func() { c.do("GET", path, nil) })
			if d := time.Since(began); d > time.Second {
				t.Fatalf("GET %s with three stalled writes and an import: %s", path, d.Round(time.Millisecond))
			}
		}
	}
	for i, st := range held {
		if status, _, after := st.answer(10 * time.Second); status != 408 {
			t.Errorf("stalled write %d: %d after %s, want 408", i, status, after)
		}
	}
}

// chunks is n bytes of a JSON string in chunks of 4 KiB, with no last
// chunk: the body goes on.
func chunks(n int) []byte {
	var b bytes.Buffer
	b.WriteString("1\r\n\"\r\n")
	for n > 0 {
		k := min(n, 4096)
		fmt.Fprintf(&b, "%x\r\n%s\r\n", k, strings.Repeat("a", k))
		n -= k
	}
	return b.Bytes()
}

// withDeadline runs f, failing the test if it has not returned within
// limit (f then goes on in the background; the test ends).
func withDeadline(t *testing.T, limit time.Duration, what string, f func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("%s: no answer within %s", what, limit)
	}
}

// TestDuplicateKeys: a key given twice in an object of a body, at any
// depth, or twice regardless of case where the decoder matches fields
// so, is refused naming it; the same key in two objects, and map keys
// differing in case, are not duplicates.
func TestDuplicateKeys(t *testing.T) {
	sum := strings.Repeat("a", 64)
	for _, tc := range []struct {
		body string
		v    any
		says string // "" for accepted
	}{
		{`{"to":"2.0.0","to":"1.0.0"}`, &StartRequest{}, `duplicate key "to"`},
		{`{"to":"2.0.0","TO":"1.0.0"}`, &StartRequest{}, `duplicate key "TO": the same field as "to"`},
		{`{"to":"2.0.0","traffic":false,"Traffic":true}`, &StartRequest{}, `duplicate key "Traffic"`},
		{`{"action":"pause","action":"abort"}`, &ActionRequest{}, `duplicate key "action"`},
		{`{"version":"1.0.0","version":"2.0.0"}`, &ClusterUpRequest{}, `duplicate key "version"`},
		{`{"predicate":"quorum","member":"kv-1","member":"kv-2"}`, &OverrideRequest{}, `duplicate key "member"`},
		{`{"version":"2.1.0","artifacts":{"*":{"path":"/a","path":"/b","sha256":"` + sum + `"}}}`, &ImportRequest{},
			`duplicate key "path" in "artifacts"."*"`},
		{`{"version":"2.1.0","artifacts":{"app":{"sha256":"` + sum + `"},"app":{"sha256":"` + sum + `"}}}`, &ImportRequest{},
			`duplicate key "app" in "artifacts"`},
		{`{"version":"2.1.0","upgrade_from":["1.0.x"],"Upgrade_From":["2.0.x"],"artifacts":{}}`, &ImportRequest{}, `duplicate key "Upgrade_From"`},
		{`{"to":"2.0.0"}`, &StartRequest{}, ""},
		{`{"version":"2.1.0","artifacts":{"app":{"sha256":"` + sum + `"},"App":{"sha256":"` + sum + `"},"*":{"path":"/a","sha256":"` + sum + `"}}}`, &ImportRequest{}, ""},
	} {
		err := decodeJSON([]byte(tc.body), tc.v)
		switch {
		case tc.says == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", tc.body, err)
		case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says) || err.(*apiError).Status != 400):
			t.Errorf("%s: %v, want a 400 saying %q", tc.body, err, tc.says)
		}
	}
	// Through the API: the upgrade is not started, to either version.
	c := serve(t, newTestServer(t, offlineCluster(t)))
	r := c.do("POST", "/v1/upgrade", `{"to":"2.0.0","to":"1.0.0"}`).expect(t, "a start with the key to twice", 400, CodeBadRequest)
	if !strings.Contains(string(r.body), `duplicate key \"to\"`) {
		t.Errorf("the refusal does not name the key: %s", r.body)
	}
	c.do("GET", "/v1/upgrade", nil).expect(t, "no upgrade after the refusal", 404, CodeNoUpgrade)
}
