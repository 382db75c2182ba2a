package bundle

// readme is the bundle's README.md: what each file is, and what was
// redacted and how, so that whoever receives it knows what it can and
// cannot tell them.
const readme = `# ferry troubleshooting bundle

Written by ` + "`ferry bundle`" + ` (or ` + "`GET /v1/upgrades/{id}/bundle`" + ` of a ferry
server) for one upgrade, to understand it without access to the
cluster. Start with **summary.txt**.

| file | what |
|---|---|
| summary.txt | state, reason, the failed members with their last output lines, undos still owed, refusals and overrides, what could not be collected, the last events |
| manifest.json | every file with its size and SHA-256, when the bundle was written, by whom, by which ferry build, and each part that could not be collected with the reason |
| description/cluster.yaml | the cluster description as it is now, secrets redacted (below), comments dropped |
| description/digest.json | the description's SHA-256 now and as the upgrade recorded it when it began (same: whether this is the description the upgrade ran with), and the path of every value redacted |
| description/releases.json | the releases imported through a server's API (DATA-DIR/releases.json), part of the catalog; absent when there are none |
| upgrade/record.json | the upgrade's record as stored: states, batches, each member's step, the journal of effects (undos owed), refusals, overrides, pace |
| upgrade/plan.json | the plan, and the rollback's plan once one began |
| upgrade/events.jsonl | every event of the upgrade, one JSON object a line, in order: actions with what their calls (hooks) answered, steps, health changes, a crash loop's output |
| members/NAME/current.log | the member's output of its current instance, or of its last one if it is down, from the driver (the ferry agent keeps it; on Kubernetes, its pod's container's logs) |
| members/NAME/previous.log | of the instance before it (absent when there is none): after a rollback, the instance that failed; after an upgrade, the one that was stopped; on Kubernetes, the container's run before its last, once the kubelet restarted it (kubectl logs --previous) |
| members/NAME/replaced-N.log | on Kubernetes, the last output of the member's N-th pod the upgrade replaced (deleted, or let its controller replace), kept in the events before it went, which no kubectl logs can read any more; replaced-N.previous.log, that pod's container's run before its last, when the kubelet had restarted it; manifest.json says which pod (uid, version, node) and why |
| cluster/members.json, cluster/versions.json | each member and the versions running when the bundle was written ('ferry members', 'ferry versions'); error says what did not answer |
| cluster/health.json | the preflight's checks when the bundle was written ('ferry health') |
| reports/UPGRADE-ID.* | the impact report, if the upgrade ran with traffic (DATA-DIR/reports) |
| versions.json | ferry's build (module version, VCS revision) and each host's agent's |

Each instance's output is bounded: its last lines (1000 by default,
'ferry bundle --log-lines') and at most 1 MiB. The ferry agent keeps
two instances per member: the current one and the one before it; an
instance before those is gone. On Kubernetes the kubelet keeps a pod's
output while the pod lives (and its container's run before the last
once it restarted), so the driver reads a pod's last 100 lines (at most
16 KiB) before it replaces it: the replaced-N.log files. A pod whose
output could not be read then (the read is bounded to 5 s, and the pod
is replaced all the same) is named under not_collected with what the
read said. A driver that keeps no output is named under not_collected.
Whatever could not be collected (an agent
that does not answer, a description that no longer loads, the bundle's
time limit) is listed in manifest.json and summary.txt with the reason;
the rest is there.

## What was redacted, and how

Secrets are replaced by [REDACTED]; their values are in no file of the
bundle, not even as a hash.

- **The description**: every header value (headers: keys are kept),
  every body (of a call, a hook, a check, a traffic request), every
  file's content (run.files), every value whose key names a secret
  (a var, an env entry or any key whose name contains token, passw,
  pwd, secret, key, auth, credential, cookie, session, signature,
  private, bearer or salt: all of its value), and the argument after a
  flag that names one (--token X). In any other value, what has a
  credential's form: the word after Bearer, a URL's password
  (scheme://user:[REDACTED]@host), the value of name=value or
  name: value when the name says secret. A key ending in file
  (token_file) keeps its path: the file is never read. Comments are
  dropped (they may say anything), so the file is the description
  re-written, not byte for byte: its SHA-256 in digest.json is the
  original's. description/digest.json lists the path of every value
  redacted (never the value).
- **Everything else collected** (the record, the events, the members'
  output, the reports, the views): every known secret is replaced
  wherever it appears, and so is whatever has a credential's form
  (Bearer X, a URL's password, token=, password=, secret=, api_key=,
  private_key=, credential=). The known secrets are the tokens the
  ferry process that wrote the bundle presents to its agents, the
  server's API token, and each value redacted from the description of
  at least 8 characters (a shorter one, like "1", would blank out every
  log). manifest.json counts the texts where something was replaced.

ferry's own record holds no secret by design (an undo is rendered from
the description when it runs). What a member writes to its output is
its own: a secret it prints that ferry does not know and that has no
credential's form would stay; read the logs before sending them on.
`
