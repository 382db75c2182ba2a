// Package agent is the ferry agent: a small long-running process per
// host (`ferry agent --listen ADDR --dir DIR --token-file F`) that owns
// the member processes of that host and answers for them over HTTP.
// ferry's process driver (internal/substrate/process) is its client.
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
// artifact_unknown (403), not_found (404), upload_abandoned (408),
// too_large (413), checksum_mismatch (422), start_failed or internal
// (500), not_a_ferry (422), cannot_reexec (409). Member names match
// ^[a-z0-9][a-z0-9._-]{0,62}$ (400 otherwise), so they are safe as file
// names.
//
//	GET  /v1/health                 {"ok":true,"tls":bool[,"warning"]}, no token needed (with it: version, release, pid)
//	GET  /v1/artifacts              [Artifact...] of the store, by sha256
//	GET  /v1/artifacts/{sha256}     Artifact (HEAD too); 404 if the store lacks it
//	PUT  /v1/artifacts/{sha256}     ?name=FILE, application/octet-stream -> Artifact (201; 200 if kept already)
//	GET  /v1/members                [Status...], sorted by name
//	GET  /v1/members/{name}         Status; 404 if the agent never knew it
//	PUT  /v1/members/{name}         MemberSpec -> Status
//	POST /v1/members/{name}/stop    StopRequest (optional) -> Status
//	POST /v1/members/{name}/adopt   AdoptRequest -> Status; 404 if nothing is found
//	GET  /v1/members/{name}/logs    ?previous=true|false&lines=N -> text/plain
//	POST /v1/agent/reexec           ReexecRequest -> ReexecAccepted (202); 409 cannot_reexec, 422 not_a_ferry
//
// # Re-exec
//
// POST /v1/agent/reexec {sha256, release} runs the agent on another
// ferry binary (ferry self-upgrade): a file of the store (403 when it
// lacks it), hashed again, that must answer `BIN version -o json` with
// the release asked (422 not_a_ferry otherwise: nothing changes). The
// agent answers 202, stops serving (requests in flight get up to 10s),
// closes, and execs the binary with its own arguments: the pid stays,
// and the members, still its children, run on; the new program re-adopts
// them from their state files and reaps those that exit. Only an agent
// run by Serve can (409 cannot_reexec when its handler is served by
// someone else). GET /v1/health says the agent's release and pid to a
// caller with the token.
//
// # Artifacts
//
// The agent runs only the artifacts of its own store, its catalog:
// DIR/artifacts/<sha256>/<name> (mode 0755), each put there by an
// upload (PUT /v1/artifacts/{sha256}) streamed to a temporary file
// while it is hashed, at most Config.MaxArtifactSize (1 GiB by
// default, 413 beyond) within 10 minutes, and kept only if its sha256
// is the one in the path (422 otherwise, nothing kept). A member's
// spec names its artifact by the sha256 alone; a spec naming one the
// store lacks is 403 artifact_unknown, and a spec with a "path" (a
// file of the agent's host, as agents before this one took) is 400.
// Before every start the store's copy is hashed again: one whose bytes
// changed is removed and refused (403), so that an upload replaces it;
// and every exec, a restart or a re-adoption from a state file too,
// checks that the program is a file of the store filed under its sum.
// ferry's process driver uploads what an agent lacks before its PUT.
//
// # TLS
//
// Serve serves plain HTTP on loopback and TLS beyond it (TLSMode): with
// Config.CertFile and KeyFile, or else with a self-signed ECDSA P-256
// certificate it generates into DIR/tls at the first start that needs
// it (key.pem 0600, cert.pem, and fingerprint: "sha256:" and the hex
// SHA-256 of the certificate's DER) and keeps, so that the fingerprint
// a description pins stays valid; it logs the fingerprint at every
// start. Plain HTTP beyond loopback is refused unless
// Config.InsecureListen, and then logged as a warning at start and
// reported by every GET /v1/health ("tls": false, "warning").
//
// PUT /v1/members/{name} makes the member run exactly the given
// artifact with the given files, and is idempotent. If the member
// already runs the same version and sha256 with the same files (paths,
// modes and contents, compared by a digest) it is a no-op (even if
// args, env or stop_timeout_ms differ; a different restart policy is
// taken without a restart). Otherwise the store's copy of the artifact
// is checked (above): an artifact refused changes nothing, the old
// process keeps running. Then the old process, if any, is
// stopped gracefully, the files are written, and the copy is executed
// directly (no shell) with the given args, the agent's environment
// plus the given env, in DIR/members/<name>/, stdout and stderr to
// the instance's output file (below), in a new session. So the same
// version with changed files is a graceful restart with the new files:
// a change of configuration is a change ferry rolls out. PUT answers
// once the process has started; it does not wait for readiness (health
// checks are the engine's). A process that cannot be started at all
// (exec failed) is 500 start_failed.
//
// # Files
//
// MemberSpec.files is a list of {path, mode, content}: path relative
// to DIR/members/<name>/, clean and without ".." (400 otherwise: an
// absolute path, "../x", "./x", "a//b"); mode in octal, "0640", default
// "0600", neither setuid, setgid, sticky nor world-writable; content at
// most 1 MiB; at most 64 files, no path twice. Each is written
// atomically (a temporary file in its directory, synced, chmod, renamed
// over the old one, the directory synced; missing directories are made
// 0755) through an os.Root on the member's directory, so that a
// symbolic link there cannot lead a write outside. Files a later PUT no
// longer lists are left in place. The state file keeps only their
// digest: contents may be secrets.
//
// # Output
//
// Each process (instance) of a member writes its stdout and stderr to
// DIR/logs/<name>/current.log, opened O_APPEND and handed to it: not a
// pipe through the agent, which would break when the agent dies. The
// agent keeps about 4 MiB per instance: every second it moves the head
// of a current.log grown past 2 MiB into current.old.log (which keeps
// its last 2 MiB) and removes that head from current.log with
// FALLOC_FL_COLLAPSE_RANGE, which the member's appends cannot
// interleave with: nothing is lost. Where the file system cannot
// collapse (tmpfs), it copies the last 2 MiB and truncates (what the
// member writes between the copy and the truncation is lost). When a
// new instance starts, current*.log become previous*.log, dropping the
// instance before. GET .../logs returns the last N lines (default 100,
// 1 to 10000, else 400) of the current (or last, once it exited)
// instance, or with previous=true of the one before it; 404 for an
// unknown member or when there is no previous instance. Each instance's
// output starts with a line of the agent's: "--- ferry agent <time>:
// starting <name> version <v> (sha256 <h>), instance <n>[ (restart
// <k>)]". A member re-adopted from an agent that wrote one file per
// member (DIR/logs/<name>.log) is read from that file.
//
// # Supervision
//
// MemberSpec.restart is "no" (the default) or "on-failure". With
// on-failure, a member whose process exits when nobody asked it to
// stop (any status, 0 too, or a signal, or an adopted process found
// gone) is restarted by the agent from the same artifact copy, args,
// env and files, after a delay that starts at 200ms and doubles up to
// 10s; an instance that ran 10s or more starts the series again. A
// stop, or a PUT, gives up a pending restart. Status.restarts counts
// the agent's restarts since the member was last started by a PUT;
// status.instance counts the member's processes (by PUT or restart);
// status.next_restart says when a pending restart is due. The policy
// and a pending restart are in the state file: a new agent restarts a
// re-adopted member that vanishes, one that died while no agent ran,
// and one whose restart was pending when the agent before died.
//
// A graceful stop sends the member's stop signal (the request's signal,
// else the member's stop_signal, else SIGTERM) to the member's process
// group, waits up to the stop timeout (the request's timeout_ms, else
// the member's stop_timeout_ms, else 10s), then sends SIGKILL to the
// group. Stopping a stopped, or never started, member is 200.
//
// # Adoption
//
// POST .../adopt {pid_file | listen, stop_timeout_ms, stop_signal}
// takes over a member's process that no agent started (systemd, a
// script): found by its pid file (an absolute path to a regular file
// of at most 4 KiB, read within 2s: a FIFO, a device or a directory is
// refused at once, 400, naming it) or by the address
// it listens on (its LISTEN socket in /proc/net/tcp or tcp6, then the
// process holding that socket in /proc/PID/fd; among workers sharing
// it, the one whose parent does not). pid 1, the agent and another
// member's process are refused (400). The member is then running, with
// its pid, adopted: true and no version (the agent did not start it:
// ferry asks the member itself); it is watched by polling, never
// restarted, and signalled alone, not its process group, which is not
// known to be its own. The first PUT stops it gracefully and starts the
// agent's own process: from then on the member is the agent's. A
// member whose process runs already is left as it is (200, its status);
// nothing found is 404 and leaves no member behind. ferry's process
// driver asks only for members its agent does not know.
//
// Operations on one member are serialized; operations on different
// members run concurrently. An adoption looks for its process before it
// takes the member's lock, so that a slow pid file or name lookup holds
// up no other request.
//
// Status.pid is the process while the member runs and 0 when it does
// not (ferry's templates may use it as .PID); exit_code is set only after a normal exit of a child of this
// agent. detail reads like "exited with status 1", "killed by
// SIGKILL", "stopped (SIGTERM): exited with status 0", "stopped
// (SIGKILL after 10s): killed by SIGKILL", "exited (status unknown:
// ...)", "start of version 2.0.0 failed: ...".
//
// # State
//
// After every change the agent writes DIR/state/<name>.json atomically
// (mode 0600): version, sha256, artifact, args, env, the restart policy,
// the files' digest, the restart and instance counts, whether a restart
// is pending, pid, the process start time (field 22 of /proc/<pid>/stat)
// and how it last exited.
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
