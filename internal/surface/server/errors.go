package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/run/engine"
)

// Error codes: stable, documented in api/openapi.yaml; clients match
// on them, never on the message.
const (
	CodeBadRequest          = "bad_request"         // 400: a malformed body or parameter
	CodeUnknownRelease      = "unknown_release"     // 400 (POST) or 404 (GET): not in the catalog
	CodeUnauthorized        = "unauthorized"        // 401
	CodeNotFound            = "not_found"           // 404: no such route
	CodeNoUpgrade           = "no_upgrade"          // 404: no current upgrade
	CodeMethodNotAllowed    = "method_not_allowed"  // 405
	CodeUpgradeInProgress   = "upgrade_in_progress" // 409: a second start, or another process drives it
	CodeClusterLocked       = "cluster_locked"      // 409: the upgrade began with another description
	CodeUpgradeEnded        = "upgrade_ended"       // 409: nothing to pause, resume, abort
	CodeUpgradeNotEnded     = "upgrade_not_ended"   // 409: DELETE while it runs
	CodeAlreadyPaused       = "already_paused"      // 409
	CodeAbortRefused        = "abort_refused"       // 409: rolling back already, or finalized
	CodeFinalizeRefused     = "finalize_refused"    // 409
	CodeBodyTooLarge        = "body_too_large"      // 413
	CodeBodyTimeout         = "body_timeout"        // 408: a body not received within its endpoint's time bound
	CodeUnsupportedMedia    = "unsupported_media_type"
	CodePreflightFailed     = "preflight_failed"      // 422: the cluster is not fit, nothing changed
	CodeDowntimeNotAccepted = "downtime_not_accepted" // 422: the upgrade cannot be zero-downtime and "accept_downtime" was not given
	CodeObserveFailed       = "observe_failed"        // 503: the cluster could not be observed
	CodeNoReport            = "no_report"             // 404: no upgrade ran with traffic
	CodeNoTrafficSpec       = "no_traffic_spec"       // 422: "traffic": true, and the description has no traffic:
	CodeChecksumMismatch    = "checksum_mismatch"     // 422: an imported artifact is not what its sha256 says
	CodeSignatureMismatch   = "signature_mismatch"    // 422: an imported artifact's signature does not verify with the description's signing_key, or cannot be read
	CodeReleaseExists       = "release_exists"        // 409: an import of a version the catalog has, different
	CodeInvalidRelease      = "invalid_release"       // 422: the catalog with the imported release would not be valid
	CodeInvalidOverride     = "invalid_override"      // 422: an unknown predicate, member or effect, or all at once
	CodeArtifactRefused     = "artifact_refused"      // 422: an import's artifact path is not a regular file under an artifact root, or too large
	CodeImportAbandoned     = "import_abandoned"      // 408 or 503: an import or upload stopped before its end (its client left, the deadline, the server stopping)
	CodeInternal            = "internal"              // 500: the store failed
)

// apiError is the one error type handlers return; it becomes the JSON
// body {"code", "message"} with its status.
type apiError struct {
	Status  int            `json:"-"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Checks  []engine.Check `json:"checks,omitempty"` // preflight_failed: every check
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *apiError {
	return errf(http.StatusBadRequest, CodeBadRequest, format, args...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = errf(http.StatusInternalServerError, CodeInternal, "%v", err)
	}
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ferry"`)
	}
	writeJSON(w, ae.Status, ae)
}

// query checks that r's query has only the allowed parameters, each at
// most once, and returns their values.
func query(r *http.Request, allowed ...string) (map[string]string, error) {
	q := r.URL.Query()
	out := map[string]string{}
	for k, vs := range q {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
			}
		}
		if !ok {
			if len(allowed) == 0 {
				return nil, badRequest("unknown query parameter %q: this endpoint takes none", k)
			}
			return nil, badRequest("unknown query parameter %q: this endpoint takes %s", k, strings.Join(allowed, ", "))
		}
		if len(vs) > 1 {
			return nil, badRequest("query parameter %q is given %d times", k, len(vs))
		}
		out[k] = vs[0]
	}
	return out, nil
}

// uintParam parses a non-negative integer parameter no larger than max.
func uintParam(q map[string]string, name string, def, max uint64) (uint64, error) {
	s, ok := q[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > max {
		return 0, badRequest("query parameter %s=%q: want an integer from 0 to %d", name, s, max)
	}
	return n, nil
}

// validVersion reports whether s may be a release version: what the
// catalog could hold, and nothing that would garble a message.
func validVersion(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '.', c == '-', c == '+', c == '_':
		default:
			return false
		}
	}
	return true
}
