// Package health makes the calls of a cluster description — HTTP
// requests, TCP dials, commands — and keeps the consecutive-result
// thresholds that turn single probes into a verdict. The same call
// executor serves member checks, cluster gates and hooks.
//
// # Calls
//
// Do (or Prober.Do) renders every templated string of a config.Call
// over the member's config.TemplateData, makes the call within its
// timeout (5s when none is set) and returns a Result: OK, a Detail
// that says what was seen or what was wrong, and how long it took.
// Do never panics and returns no error: a template that does not
// render, a refused connection, a timeout and a wrong answer are all
// OK=false with the reason in Detail. Detail is never empty.
//
//   - HTTP: the method (GET, or POST when there is a body; "POST http://…"
//     in the URL field is understood as well), body and headers. OK when
//     the status is ExpectStatus (any 2xx when 0) and, if JSON is set, the
//     value at the dotted path (a.b, items.0.name) of the decoded response
//     equals JSON.Equals; numbers compare by value, so 3 (YAML) equals 3.0
//     (JSON). At most 1 MiB of the response is read. Redirects are not
//     followed and no proxy is used: a probe checks the address it names.
//   - TCP: OK when the address accepts a connection.
//   - Exec: the argv, run without a shell, OK on exit status 0. Detail has
//     the exit status and the last 200 bytes of combined output. On a
//     timeout the process (and, on Unix, its process group) is killed.
//
// A Prober holds the HTTP client. Its transport keeps no idle
// connections: a member that was just restarted is probed on a new
// connection, never on one its previous process left behind.
//
// # Thresholds
//
// A Tracker turns results into a state per key (a member name, or
// "cluster:<component>"): a key starts unhealthy, becomes healthy after
// success consecutive passes and unhealthy again after failure
// consecutive failures. The time is passed in, never read, so that
// tests and the engine decide what "now" is. A Tracker is safe for
// concurrent use.
package health
