// Package api is ferry's REST API's bodies (/v1, api/openapi.yaml), as
// the server writes them and the client, the CLI and the dashboard
// read them: an upgrade as an operator sees it, and the requests that
// act on it.
//
// These types are the API's own. The state machine's record
// (upgrade.Upgrade) is what the engine persists and resumes from, and
// changes whenever the engine needs it to; the API is a contract with
// clients that must not move with it. FromRecord is the one place a
// record becomes the API's Upgrade: a field renamed or added in the
// record changes nothing here until FromRecord says so, and the types
// hold no type of another ferry package (TestTypesAreTheAPIsOwn), so
// that their JSON is written in this package alone.
//
// An Upgrade says its version, APIVersion (ferry.dev/v1). Requests may
// name it too (api_version), and are refused (400) naming another;
// without it, a request is of this version, so that clients written
// before the field keep working.
package api
