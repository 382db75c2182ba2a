package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/ferry-upgrade/ferry/internal/trust/bearer"
)

// TokenFile is the API token's file name in the data directory.
const TokenFile = "api-token"

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

// authorized checks the request's bearer token (in constant time).
func (s *Server) authorized(r *http.Request) *apiError {
	switch err := s.token.Check(r); {
	case err == nil:
		return nil
	case errors.Is(err, bearer.ErrMissing):
		return errf(http.StatusUnauthorized, CodeUnauthorized, "missing bearer token: send 'Authorization: Bearer <token>' with the token from the server's data directory (%s)", TokenFile)
	default:
		return errf(http.StatusUnauthorized, CodeUnauthorized, "%v", err)
	}
}
