// Package server is ferry as a long-running process: the REST API
// under /v1 (documented in api/openapi.yaml), the web dashboard, and
// Prometheus metrics at /metrics, over one cluster description, its
// driver and the embedded store.
//
// The server owns at most one engine goroutine, which drives the
// current upgrade while it holds the data directory's engine lock, the
// same lock the CLI takes: one process at a time acts on the cluster.
// It is level-triggered like the engine: whenever the store holds an
// upgrade that has not ended and no process drives it (after a restart
// of the server, or after the CLI process driving it died), the server
// takes it up.
//
// An upgrade is answered in the API's own types (package api, made from
// the record by api.FromRecord), never as the record itself; every
// call but /v1/healthz is authenticated by a named token, whose name is
// the request's identity (what an override records as its "by").
//
// Views (members, versions, releases, metrics) share one observation
// of the cluster, refreshed at most every ObserveTTL, so that many
// dashboards do not multiply probes. Events reach the dashboard and
// other subscribers from the store, whichever process wrote them.
package server
