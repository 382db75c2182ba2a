// ferry's dashboard: plain JavaScript over the REST API (/v1). The
// token is kept in sessionStorage (this tab only); a #token=... fragment
// bootstraps it, since a fragment never leaves the browser, and is
// removed from the address at once. Every value from the API is put
// in the page as text, never as HTML.
"use strict";

const KEY = "ferry-token";
const $ = (id) => document.getElementById(id);
let token = "";
let current = null; // the current upgrade record
let lastSeq = 0;
let stream = null; // AbortController of the event stream
const MAX_EVENTS = 300;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function bootstrapToken() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(KEY, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  token = sessionStorage.getItem(KEY) || "";
}

class APIError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(method, path, body) {
  const opts = { method, headers: { Authorization: "Bearer " + token }, cache: "no-store" };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  let data = null;
  const ct = resp.headers.get("Content-Type") || "";
  if (ct.startsWith("application/json")) data = await resp.json();
  if (resp.status === 401) { logout("the token was refused: " + (data ? data.message : "")); throw new APIError(401, "unauthorized", "unauthorized"); }
  if (!resp.ok) throw new APIError(resp.status, data ? data.code : "http_" + resp.status, data ? data.message : resp.statusText);
  return data;
}

function logout(why) {
  sessionStorage.removeItem(KEY);
  token = "";
  if (stream) { stream.abort(); stream = null; }
  $("app").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = why || "";
}

function say(msg, isError) {
  const m = $("message");
  m.textContent = msg;
  m.className = isError ? "error" : "muted";
}

// ---- the upgrade ----

function activePlan(u) { return u.rollback || u.plan; }

function renderUpgrade(st) {
  current = st ? st.upgrade : null;
  const u = current;
  const state = $("state");
  state.textContent = u ? u.state : "no upgrade";
  state.className = "state " + (u ? u.state : "");
  $("release").textContent = u ? `${u.id}: ${u.from} → ${u.to}` + (u.final ? ` (towards ${u.final})` : "") : "";
  $("driven").textContent = st ? drivenText(st) : "";
  $("waiting").textContent = u && u.waiting ? "waiting: " + u.waiting : "";
  $("reason").textContent = u && u.reason ? "reason: " + u.reason : "";
  renderTrouble(u);
  const ended = !u || ["completed", "failed", "rolled-back"].includes(u.state);
  // Pause applies to an upgrade that goes on, resume to one paused or
  // pausing: never both at once.
  const held = !ended && (u.state === "paused" || !!u.pausing);
  $("btn-pause").disabled = ended || held;
  $("btn-resume").disabled = !held;
  $("btn-abort").disabled = ended || !!u.rollback || !!u.finalized;
  $("btn-finalize").hidden = !u || u.state !== "awaiting-finalize";
  $("btn-clear").hidden = !u || !ended;
  if (ended) $("btn-abort-confirm").hidden = true;
  renderStart();
  renderPlan(u);
}

// drivenText says who drives the upgrade, or, once it ended, who drove
// it (as the server saw it).
function drivenText(st) {
  const u = st.upgrade;
  const ended = ["completed", "failed", "rolled-back"].includes(u.state);
  if (!ended) return `driven by: ${st.driven_by}`;
  if (st.driven_by === "none") return "driven by: not known (it ended before this server started)";
  return `driven by: ${st.driven_by}`;
}

let releasesLoaded = false;

// renderStart enables Start only when it can start something, and says
// why not otherwise.
function renderStart() {
  const ended = !current || ["completed", "failed", "rolled-back"].includes(current.state);
  let why = "";
  if (!ended) why = "an upgrade is in progress";
  else if (!releasesLoaded) why = "reading the catalog…";
  else if ($("start-to").options.length === 0) why = "no release to upgrade to: none in the catalog is reachable from what runs";
  $("btn-start").disabled = why !== "";
  $("btn-start").title = why;
  $("start-to").disabled = $("start-to").options.length === 0;
  $("start-why").textContent = ended ? why : "";
}

function renderPlan(u) {
  const box = $("plan");
  box.replaceChildren();
  if (!u) { box.append(el("p", "muted", "no upgrade")); $("plan-title").textContent = ""; return; }
  const p = activePlan(u);
  $("plan-title").textContent = (u.rollback ? "rollback" : "upgrade") + ` to ${p.to}` + (p.path && p.path.length > 1 ? ` (path ${p.path.join(" → ")})` : "");
  const ended = ["completed", "failed", "rolled-back"].includes(u.state);
  (p.phases || []).forEach((ph, i) => {
    const phase = el("div", "phase");
    const cur = !ended && i === u.phase;
    if (cur) phase.classList.add("current");
    phase.dataset.phase = String(i);
    phase.append(el("h3", "", `${i + 1}. ${ph.component} — ${ph.strategy}, max unavailable ${ph.max_unavailable}` + (ph.quorum ? `, quorum ${ph.quorum}` : "")));
    const batches = el("div", "batches");
    const chip = (name) => {
      const m = u.members[name];
      const step = m ? m.step : "";
      const c = el("span", "chip " + step, name);
      c.title = step + (m && m.detail ? ": " + m.detail : "");
      return c;
    };
    // The batches formed so far (their sizes adapt as the upgrade
    // goes), then the members still to come.
    const formed = (u.batches || []).filter((b) => b.phase === i && !!b.rollback === !!u.rollback);
    const placed = new Set();
    formed.forEach((b, j) => {
      const batch = el("div", "batch");
      if (cur && !b.ended) batch.classList.add("current");
      batch.dataset.batch = `${i}.${j}`;
      const n = el("div", "n", `batch ${b.number}`);
      n.title = `size ${b.size}` + (b.why ? `: ${b.why}` : "");
      batch.append(n);
      b.members.forEach((name) => { placed.add(name); batch.append(chip(name)); });
      batches.append(batch);
    });
    const rest = (ph.batches || []).flatMap((b) => b.members).filter((n) => !placed.has(n));
    if (rest.length) {
      const batch = el("div", "batch pending");
      batch.append(el("div", "n", "to come"));
      rest.forEach((name) => batch.append(chip(name)));
      batches.append(batch);
    }
    (ph.skipped || []).forEach((s) => {
      const chip = el("span", "chip", s.member + " (skipped)");
      chip.title = s.reason;
      batches.append(chip);
    });
    phase.append(batches);
    if (ph.note) phase.append(el("div", "muted", ph.note));
    box.append(phase);
  });
}

// renderTrouble shows, loudly, what an operator must see: the changes
// made outside the members not undone yet, the predicates refusing the
// next members, an outage of the substrate, the overrides in force,
// and, once completed, the pace against the lower bound.
function renderTrouble(u) {
  const box = $("trouble");
  box.replaceChildren();
  if (!u) return;
  if (u.outage) box.append(el("p", "error", `OUTAGE: the substrate does not answer since ${new Date(u.outage.since).toLocaleTimeString()}: ${u.outage.detail}`));
  (u.refusals || []).forEach((r) => box.append(el("p", "refusal", `refused: ${r.summary}`)));
  const effects = u.effects || [];
  if (effects.length) {
    const bad = effects.filter((e) => e.state !== "open").length;
    box.append(el("p", bad ? "error" : "effects", `${effects.length} change(s) outside the members not undone yet` + (bad ? `, ${bad} FAILED or ABANDONED` : "")));
    const ul = el("ul", "effects");
    effects.forEach((e) => {
      const li = el("li", "effect " + e.state, `${e.id} [${e.scope.kind}${e.scope.name ? " " + e.scope.name : ""}] ${e.state.toUpperCase()}: ${e.what}` + (e.undo_what ? `; undo: ${e.undo_what}` : "") + (e.error ? ` (${e.error})` : ""));
      ul.append(li);
    });
    box.append(ul);
  }
  // Each entry as the record says it (a revoke is an entry of its own),
  // with who the server authenticated.
  (u.overrides || []).forEach((o) => box.append(el("p", "muted", `override: ${o.summary}, by ${o.by}`)));
  // Only a completed upgrade ran the plan the bound is of; a rollback's
  // wall time against the few batches it ran says nothing.
  const p = u.pace;
  if (p && u.state === "completed") {
    box.append(el("p", "muted", `pace: ${p.wall_s.toFixed(1)}s against a lower bound of ${p.lower_bound_s.toFixed(1)}s (×${p.bound_ratio.toFixed(2)})`));
  }
}

async function refreshUpgrade() {
  try {
    renderUpgrade(await api("GET", "/v1/upgrade"));
  } catch (e) {
    if (e.code === "no_upgrade") renderUpgrade(null);
    else if (e.status !== 401) say("upgrade: " + e.message, true);
  }
}

// ---- members, versions, releases ----

async function refreshMembers() {
  try {
    const data = await api("GET", "/v1/members");
    const body = $("members").tBodies[0];
    const rows = data.members.map((m) => {
      const tr = el("tr");
      tr.dataset.member = m.name;
      if (m.step && !["pending", "done", "failed"].includes(m.step)) tr.classList.add("moving");
      const cells = [m.name, m.component, m.host, m.target_version || "–", m.running_version || "–", m.status, m.step || "–", m.detail || ""];
      const cls = ["name", "component", "host", "target", "running", "status status-" + m.status, "step", "detail"];
      cells.forEach((c, i) => tr.append(el("td", cls[i], c)));
      return tr;
    });
    body.replaceChildren(...rows);
  } catch (e) {
    if (e.status !== 401) say("members: " + e.message, true);
  }
}

const COLORS = ["#2563eb", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be123c"];

async function refreshVersions() {
  try {
    const data = await api("GET", "/v1/versions");
    const box = $("versions");
    box.replaceChildren();
    const all = [...new Set(data.components.flatMap((c) => Object.keys(c.versions)))].sort();
    data.components.forEach((c) => {
      const total = Object.values(c.versions).reduce((a, b) => a + b, 0);
      box.append(el("div", "", c.component + ": " + Object.keys(c.versions).sort().map((v) => `${v} ×${c.versions[v]}`).join(", ")));
      const bar = el("div", "vbar");
      bar.dataset.component = c.component;
      Object.keys(c.versions).sort().forEach((v) => {
        const s = el("span", "", v);
        s.style.width = (100 * c.versions[v] / total) + "%";
        s.style.background = v === "down" ? "#b91c1c" : COLORS[all.indexOf(v) % COLORS.length];
        bar.append(s);
      });
      box.append(bar);
    });
  } catch (e) {
    if (e.status !== 401) say("versions: " + e.message, true);
  }
}

async function refreshReleases() {
  try {
    const data = await api("GET", "/v1/releases");
    const body = $("releases").tBodies[0];
    body.replaceChildren(...data.releases.map((r) => {
      const tr = el("tr");
      [r.version, r.state + (r.path && r.path.length > 1 ? ` (via ${r.path.join(" → ")})` : ""), r.members].forEach((c) => tr.append(el("td", "", c)));
      return tr;
    }));
    const sel = $("start-to");
    const keep = sel.value;
    sel.replaceChildren(...data.releases.filter((r) => r.state === "available").map((r) => el("option", "", r.version)));
    if ([...sel.options].some((o) => o.value === keep)) sel.value = keep;
    releasesLoaded = true;
    renderStart();
  } catch (e) {
    if (e.status !== 401) say("releases: " + e.message, true);
  }
}

// ---- events: server-sent events read with fetch, so that the token
// goes in a header and never in an address ----

function addEvent(ev) {
  const list = $("events");
  const li = el("li");
  li.dataset.seq = String(ev.seq);
  li.append(el("span", "t", new Date(ev.time).toLocaleTimeString()));
  li.append(el("span", "k k-" + ev.kind, ev.kind));
  li.append(document.createTextNode(" " + ev.message));
  list.prepend(li);
  while (list.children.length > MAX_EVENTS) list.lastChild.remove();
  if (ev.kind === "state" || ev.kind === "step" || ev.kind === "intent" || ev.kind === "wait") scheduleRefresh();
}

let refreshTimer = null;
function scheduleRefresh() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => { refreshTimer = null; refreshUpgrade(); refreshMembers(); }, 150);
}

async function followEvents() {
  while (token) {
    const ctrl = new AbortController();
    stream = ctrl;
    try {
      const resp = await fetch("/v1/events/stream?after=" + lastSeq, {
        headers: { Authorization: "Bearer " + token, Accept: "text/event-stream" }, signal: ctrl.signal, cache: "no-store" });
      if (resp.status === 401) { logout("the token was refused"); return; }
      if (!resp.ok || !resp.body) throw new Error("HTTP " + resp.status);
      $("conn").className = "conn live";
      const reader = resp.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let data = "";
          let kind = "message";
          for (const line of block.split("\n")) {
            if (line.startsWith("data:")) data += line.slice(5).trimStart();
            else if (line.startsWith("event:")) kind = line.slice(6).trim();
          }
          if (!data || kind !== "message") continue;
          const ev = JSON.parse(data);
          if (ev.seq > lastSeq) { lastSeq = ev.seq; addEvent(ev); }
        }
      }
    } catch (e) {
      if (ctrl.signal.aborted) return;
    }
    $("conn").className = "conn down";
    await new Promise((r) => setTimeout(r, 1000));
  }
}

// ---- actions ----

async function act(action) {
  try {
    const r = await api("PATCH", "/v1/upgrade", { action });
    say(`${action} requested (driven by ${r.driven_by}); it takes effect at the next step`);
    refreshUpgrade();
  } catch (e) {
    if (e.status !== 401) say(`${action}: ${e.message} [${e.code}]`, true);
  }
}

async function start(ev) {
  ev.preventDefault();
  const to = $("start-to").value;
  if (!to) { say("no release is available to upgrade to", true); return; }
  say(`preflight and start of the upgrade to ${to}…`);
  try {
    const body = { to };
    if ($("start-traffic").checked) {
      body.traffic = true;
      say(`traffic baseline, then the upgrade to ${to}…`);
    }
    const r = await api("POST", "/v1/upgrade", body);
    say(`upgrade ${r.upgrade.id} started: ${r.upgrade.from} → ${r.upgrade.to}`);
    renderUpgrade(r);
  } catch (e) {
    if (e.status !== 401) say(`start: ${e.message} [${e.code}]`, true);
  }
}

async function clearUpgrade() {
  try {
    await api("DELETE", "/v1/upgrade");
    say("the ended upgrade was cleared (its record and events stay)");
    refreshUpgrade();
  } catch (e) {
    if (e.status !== 401) say(`clear: ${e.message} [${e.code}]`, true);
  }
}

// ---- the traffic chart: p50 and p99 per second, as inline SVG ----

const SVGNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}

async function refreshTraffic() {
  let ts;
  try {
    ts = await api("GET", "/v1/traffic");
  } catch (e) {
    if (e.status === 404) $("traffic-panel").hidden = true;
    return;
  }
  $("traffic-panel").hidden = false;
  const pts = ts.points || [];
  const chart = $("traffic-chart");
  chart.replaceChildren();
  const batches = ts.batches || [];
  const W = 960, H = 220, L = 50, B = 22, T = 8;
  const last = Math.max(1, pts.length ? pts[pts.length - 1].second : 1, ...batches.map((b) => Math.ceil(b.to_s)));
  const maxMS = Math.max(1, ...pts.map((p) => p.p99_ms)) * 1.1;
  const x = (sec) => L + (W - L - 8) * (Math.min(sec, last) / last);
  const y = (ms) => T + (H - T - B) * (1 - ms / maxMS);
  const began = Date.parse(ts.began);
  if (ts.started) {
    const base = (Date.parse(ts.started) - began) / 1000;
    chart.append(svg("rect", { class: "base", x: L, y: T, width: Math.max(0, x(base) - L), height: H - T - B }));
  }
  // The batches as bands, the one in progress highlighted.
  batches.forEach((b, i) => {
    const band = svg("rect", { class: "band" + (i % 2 ? " odd" : "") + (b.current ? " cur" : ""),
      x: x(b.from_s), y: T, width: Math.max(1, x(b.to_s) - x(b.from_s)), height: H - T - B });
    band.append(svg("title", {}, b.name + (b.current ? " (in progress)" : "")));
    chart.append(band);
  });
  const cur = batches.find((b) => b.current);
  if (cur) chart.append(svg("text", { class: "grid cur", x: x(cur.from_s) + 3, y: T + 12 }, cur.name));
  chart.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - 8, y2: H - B }));
  chart.append(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (const f of [0, 0.5, 1]) {
    chart.append(svg("text", { class: "grid", x: 4, y: y(maxMS * f) + 4 }, `${(maxMS * f).toFixed(0)} ms`));
  }
  chart.append(svg("text", { class: "grid", x: W - 60, y: H - 6 }, `${last} s`));
  let failed = 0, total = 0;
  for (const p of pts) {
    total += p.requests; failed += p.failed;
    if (p.failed > 0) chart.append(svg("rect", { class: "fail", x: x(p.second) - 2, y: T, width: 4, height: H - T - B }));
  }
  for (const [key, cls] of [["p50_ms", "p50"], ["p99_ms", "p99"]]) {
    const d = pts.filter((p) => p.requests > p.failed).map((p, i) => `${i ? "L" : "M"}${x(p.second).toFixed(1)},${y(p[key]).toFixed(1)}`).join(" ");
    if (d) chart.append(svg("path", { class: cls, d }));
  }
  $("traffic-title").textContent = `${total} requests, ${failed} failed, over ${last} s` + (ts.live ? "" : " (ended)");
}

let timers = [];
async function run() {
  $("login").hidden = true;
  $("app").hidden = false;
  try {
    const h = await (await fetch("/v1/healthz", { cache: "no-store" })).json();
    $("cluster").textContent = h.cluster;
  } catch (e) { /* shown by the stream's state */ }
  await refreshUpgrade();
  if (!token) return;
  refreshMembers(); refreshVersions(); refreshReleases(); refreshTraffic();
  timers.forEach(clearInterval);
  timers = [
    setInterval(refreshTraffic, 1000),
    setInterval(refreshMembers, 1000),
    setInterval(refreshUpgrade, 2000),
    setInterval(refreshVersions, 2000),
    setInterval(refreshReleases, 5000),
  ];
  // The recent history first, then the live stream from there.
  try {
    const page = await api("GET", "/v1/events?upgrade=current&limit=1");
    if (page.events.length) lastSeq = Math.max(0, page.events[0].seq - 1);
  } catch (e) { /* no current upgrade: stream from the start */ }
  followEvents();
}

document.addEventListener("DOMContentLoaded", () => {
  bootstrapToken();
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    token = $("token").value.trim();
    sessionStorage.setItem(KEY, token);
    $("token").value = "";
    run();
  });
  $("btn-pause").addEventListener("click", () => act("pause"));
  $("btn-resume").addEventListener("click", () => act("resume"));
  $("btn-abort").addEventListener("click", () => { $("btn-abort-confirm").hidden = false; });
  $("btn-abort-confirm").addEventListener("click", () => { $("btn-abort-confirm").hidden = true; act("abort"); });
  $("btn-finalize").addEventListener("click", () => act("finalize"));
  $("btn-clear").addEventListener("click", clearUpgrade);
  $("start-form").addEventListener("submit", start);
  if (token) run(); else logout("");
});
