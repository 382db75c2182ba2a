package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/trust/bearer"
)

// TokenFile is the API token's file name in the data directory.
const TokenFile = "api-token"

// TokenName is the identity of the data directory's token (Config.Token):
// what a server without named tokens records as who made a change.
const TokenName = "api-token"

// LoadOrCreateToken reads the API's bearer token from path, or, at the
// first start, creates the file (bearer.LoadOrCreate: 0600, refused if
// group or others may read it). The token itself is never logged.
func LoadOrCreateToken(path string) (tok string, created bool, err error) {
	tok, created, err = bearer.LoadOrCreate(path)
	if err != nil {
		return "", false, fmt.Errorf("server: %w", err)
	}
	return tok, created, nil
}

// identityKey keys the request's identity in its context.
type identityKey struct{}

// identity is the name of the token a request was authenticated with
// (wrap puts it there): who the server records as making a change.
func identity(r *http.Request) string {
	name, _ := r.Context().Value(identityKey{}).(string)
	return name
}

// authorized checks the request's bearer token against every named
// token (in constant time) and returns the request with its token's
// name as its identity.
func (s *Server) authorized(r *http.Request) (*http.Request, *apiError) {
	switch name, err := s.tokens.Identify(r); {
	case err == nil:
		return r.WithContext(context.WithValue(r.Context(), identityKey{}, name)), nil
	case errors.Is(err, bearer.ErrMissing):
		return r, errf(http.StatusUnauthorized, CodeUnauthorized, "missing bearer token: send 'Authorization: Bearer <token>' with the token from the server's data directory (%s) or the one you were given", TokenFile)
	default:
		return r, errf(http.StatusUnauthorized, CodeUnauthorized, "%v", err)
	}
}

// bearerToken is the token a request was authenticated with: what the
// server presents to the other servers of its election on the caller's
// behalf (they share the tokens).
func bearerToken(r *http.Request) string {
	_, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return strings.TrimSpace(tok)
}
