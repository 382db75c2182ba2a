// Package agent is the ferry agent: a small long-running process per
// host (`ferry agent --listen ADDR --dir DIR --token-file F`) that owns
// the member processes of that host and answers for them over HTTP.
// ferry's process driver (internal/driver/process) is its client.
//
// The agent exists so that ferry itself can die at any time: members
// run in their own session (setsid), so neither signals to ferry's or
// the agent's process group nor the death of either reaches them, and
// a new agent on the same directory finds them again.
//
// # API
//
// Every call but GET /v1/health needs "Authorization: Bearer <token>"
// (compared in constant time); the token is read from the token file,
// which is created with 32 random bytes, hex-encoded, mode 0600, if it
// does not exist. An existing token file that group or others may
// read or write is refused. Bodies are JSON; every error is
// {"code","message"} with code bad_request (400), unauthorized (401),
// not_found (404), checksum_mismatch (422), start_failed or internal
// (500). Member names match ^[a-z0-9][a-z0-9._-]{0,62}$ (400
// otherwise), so they are safe as file names.
//
//	GET  /v1/health               {"ok":true}, no token needed
//	GET  /v1/members              [Status...], sorted by name
//	GET  /v1/members/{name}       Status; 404 if the agent never knew it
//	PUT  /v1/members/{name}       MemberSpec -> Status
//	POST /v1/members/{name}/stop  StopRequest (optional) -> Status
//
// PUT makes the member run exactly the given artifact, and is
// idempotent. If the member already runs the same version and sha256
// it is a no-op (even if args, env or stop_timeout_ms differ). Otherwise the artifact (an absolute path on the
// agent's host) is hashed while it is copied to
// DIR/artifacts/<sha256>/<basename> (mode 0755; an existing copy with
// the right hash is reused); a wrong hash is 422 and changes nothing,
// the old process keeps running. Then the old process, if any, is
// stopped gracefully, and the copy is executed directly (no shell)
// with the given args, the agent's environment plus the given env, in
// DIR/members/<name>/, stdout and stderr appended to
// DIR/logs/<name>.log, in a new session. PUT answers once the process
// has started; it does not wait for readiness (health checks are the
// engine's). A process that cannot be started at all (exec failed) is
// 500 start_failed.
//
// A graceful stop sends SIGTERM to the member's process group, waits
// up to the stop timeout (the request's timeout_ms, else the member's
// stop_timeout_ms, else 10s), then sends SIGKILL to the group. Stopping
// a stopped, or never started, member is 200.
//
// Operations on one member are serialized; operations on different
// members run concurrently.
//
// Status.pid is the process while the member runs and 0 when it does
// not; exit_code is set only after a normal exit of a child of this
// agent. detail reads like "exited with status 1", "killed by
// SIGKILL", "stopped (SIGTERM): exited with status 0", "stopped
// (SIGKILL after 10s): killed by SIGKILL", "exited (status unknown:
// ...)", "start of version 2.0.0 failed: ...".
//
// # State
//
// After every change the agent writes DIR/state/<name>.json atomically
// (mode 0600): version, sha256, artifact, args, env, pid, the process
// start time (field 22 of /proc/<pid>/stat) and how it last exited.
// New reads these files and re-adopts each process that still runs; a
// pid counts as the same process only if its start time matches, so a
// reused pid is never adopted or signalled. Children of this agent are
// reaped and their exit status recorded; re-adopted processes are not
// its children, so they are polled (every 200ms) and recorded as
// exited, status unknown, when they vanish. A zombie counts as gone.
// A start is recorded (as "starting") before the fork, so that if the
// agent dies before it records the pid, the next agent looks for a
// session leader running that artifact in the member's directory and
// adopts it instead of starting a second process. A member's version is the
// version of the artifact the agent last started, kept after it exits.
//
// Server.Close and the end of Serve stop the agent, never the members.
// Re-adoption needs /proc (Linux).
package agent
