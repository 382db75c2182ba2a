package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"reflect"
	"strings"
	"time"
)

// maxBody bounds every JSON request body: the API's bodies are a few
// bytes (an import's, a few hundred).
const maxBody = 64 << 10

// DefaultBodyTimeout is the default bound on receiving a JSON body.
const DefaultBodyTimeout = 10 * time.Second

// bodyKind says what a route does with a request body.
type bodyKind int

const (
	// bodyNone: the route reads no body; one sent is left unread and
	// the connection closed after the answer.
	bodyNone bodyKind = iota
	// bodyJSON: the body is received whole (at most maxBody bytes,
	// within Config.BodyTimeout) before the handler runs and before any
	// lock is taken; the handler decodes it with decode.
	bodyJSON
	// bodyStream: the handler streams the body itself under its own
	// bounds (an artifact's upload).
	bodyStream
)

// readBody receives r's JSON body whole, within the bounds of its
// endpoint: at most maxBody bytes (413 as soon as one more arrives, at
// once when Content-Length says so) and within timeout (408). A slow
// client thus holds its own request only: the handler, and the locks
// it takes, see a body in memory. r.Body is replaced by it.
func readBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return errf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "Content-Type %q: the API takes application/json", ct)
		}
	}
	if r.ContentLength > maxBody {
		return tooLarge(maxBody)
	}
	rc := http.NewResponseController(w)
	// Reset after: a handler that runs long (cluster up) must not see
	// its request cancelled by a read deadline once its body is in.
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	_ = rc.SetReadDeadline(time.Time{})
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
	case errors.As(err, &mbe):
		return tooLarge(mbe.Limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errf(http.StatusRequestTimeout, CodeBodyTimeout, "the body was not received within %s (%d bytes came)", timeout, len(b))
	default:
		return badRequest("the body could not be read: %v", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	return nil
}

func tooLarge(limit int64) error {
	return errf(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the body is larger than %d bytes", limit)
}

// decode decodes the request's JSON body, which readBody received (the
// route is bodyJSON), into v.
func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return badRequest("the body could not be read: %v", err)
	}
	if len(b) > maxBody {
		return tooLarge(maxBody)
	}
	return decodeJSON(b, v)
}

// decodeJSON decodes body into v: one object, known fields only, no
// key given twice in an object (Go's decoder would keep the last one
// silently, matching keys regardless of case: {"to":"2.0.0","to":"1.0.0"}
// would start an upgrade to 1.0.0). Its errors name what was wrong.
func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return badRequest("the body holds more than one JSON value (or data after its object)")
	}
	if msg := duplicateKey(body, reflect.TypeOf(v)); msg != "" {
		return badRequest("%s", msg)
	}
	return nil
}

func decodeError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return badRequest("the body is empty: a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("the body is not complete JSON")
	case errors.As(err, &se):
		return badRequest("the body is not valid JSON (at byte %d): %v", se.Offset, err)
	case errors.As(err, &te):
		if te.Field == "" {
			return badRequest("the body must be a JSON object, not %s", te.Value)
		}
		return badRequest("field %q must be %s, not %s", te.Field, te.Type.Kind(), te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badRequest("the body could not be read: %v", err)
}

// duplicateKey says which key of the JSON document body (valid, and
// decoded into a value of type t) an object gives twice, or "". Keys
// of a struct are compared as the decoder matches them, regardless of
// case; keys of a map exactly.
func duplicateKey(body []byte, t reflect.Type) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	msg, err := dupWalk(dec, t, "")
	if err != nil {
		return "" // not reached: body was decoded already
	}
	return msg
}

func dupWalk(dec *json.Decoder, t reflect.Type, path string) (string, error) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return "", nil
	}
	if d == '[' {
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if msg, err := dupWalk(dec, elem, fmt.Sprintf("%s[%d]", path, i)); msg != "" || err != nil {
				return msg, err
			}
		}
		_, err := dec.Token()
		return "", err
	}
	seen := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		key, _ := tok.(string)
		id, child := key, reflect.Type(nil)
		if t != nil && t.Kind() == reflect.Struct {
			if f, ok := jsonField(t, key); ok {
				id, child = f.name, f.typ
			}
		} else if t != nil && t.Kind() == reflect.Map {
			child = t.Elem()
		}
		if first, ok := seen[id]; ok {
			where := ""
			if path != "" {
				where = " in " + path
			}
			if first != key {
				return fmt.Sprintf("duplicate key %q%s: the same field as %q (keys are matched regardless of case); give each once", key, where, first), nil
			}
			return fmt.Sprintf("duplicate key %q%s: give each key once", key, where), nil
		}
		seen[id] = key
		sub := fmt.Sprintf("%q", key)
		if path != "" {
			sub = path + "." + sub
		}
		if msg, err := dupWalk(dec, child, sub); msg != "" || err != nil {
			return msg, err
		}
	}
	_, err = dec.Token()
	return "", err
}

type field struct {
	name string
	typ  reflect.Type
}

// jsonField is the field of struct t that encoding/json decodes key
// into (its JSON name equal to key regardless of case).
func jsonField(t reflect.Type, key string) (field, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.EqualFold(name, key) {
			return field{name: name, typ: f.Type}, true
		}
	}
	return field{}, false
}

// closeUnread makes every answer to an HTTP/1 request whose body was
// not read to its end close the connection. Otherwise net/http, before
// writing the answer, reads what remains of the body to reuse the
// connection, and a client that stalls its body held a 401 (or a 413,
// or a 404) until the server's read timeout. (HTTP/2 resets the
// stream instead: nothing to do.)
func closeUnread(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 1 || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		body := &eofReader{ReadCloser: r.Body}
		r.Body = body
		h.ServeHTTP(&unreadCloser{ResponseWriter: w, body: body}, r)
	})
}

// eofReader remembers whether its body was read to its end.
type eofReader struct {
	io.ReadCloser
	eof bool
}

func (b *eofReader) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

type unreadCloser struct {
	http.ResponseWriter
	body   *eofReader
	headed bool
}

func (u *unreadCloser) WriteHeader(code int) {
	if !u.headed {
		u.headed = true
		if !u.body.eof {
			closeAfterAnswer(u.ResponseWriter)
		}
	}
	u.ResponseWriter.WriteHeader(code)
}

// closeAfterAnswer tells net/http's ResponseWriter w to close the
// connection after the answer without reading the rest of the body,
// as MaxBytesReader does (its documented contract) once a body passes
// its limit: a limit of 0 passed by one byte of a reader of our own.
// The server then closes gracefully (its write side first, so that the
// client still reads the answer while it sends).
func closeAfterAnswer(w http.ResponseWriter) {
	_, _ = http.MaxBytesReader(w, io.NopCloser(strings.NewReader("x")), 0).Read(make([]byte, 1))
	w.Header().Set("Connection", "close")
}

func (u *unreadCloser) Write(b []byte) (int, error) {
	if !u.headed {
		u.WriteHeader(http.StatusOK)
	}
	return u.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (u *unreadCloser) Unwrap() http.ResponseWriter { return u.ResponseWriter }
