// The T&S page: look up a URL or host (what matches and why, its history), add, extend and
// remove bans, remove many after a dry run, and the review queue of high-impact bans.
// Plain DOM code over the banlist API, no build step and nothing fetched but this origin.
// Every refusal is shown where it happened, with the service's `field` and `problem`.
"use strict";

const TOKEN = "rearrange-token";  // the inspector's key too: one sign-in a tab
const BULK = ["actor", "reason_contains", "scope", "value_suffix", "created_after",
              "created_before", "expires_before"];
let busy = 0;
let looked = null;  // the last lookup: {url, region, host, changes, more}
let dry = null;  // the last dry run of a bulk removal: {filter, reason, matched}

// --- DOM -------------------------------------------------------------------------------

function say(id, text, outcome) {
  const node = $(id);
  node.textContent = text;
  node.className = `msg ${outcome}`;
  node.dataset.outcome = outcome;
}

// --- words -----------------------------------------------------------------------------

const ban = (e) => `${e.scope} ${e.value}`;
const regions = (e) => (e.regions && e.regions.length ? e.regions.join(", ") : "everywhere");
const expires = (e) => e.expires_at ?? "never";

function pct(share) {
  if (typeof share !== "number") return "?";
  const p = share * 100;
  return `${p === 0 || p >= 0.01 ? p.toFixed(2) : p.toPrecision(2)}%`;
}

function impact(i) {
  return i ? `${pct(i.share)} (${i.served} of ${i.requests} requests)` : "?";
}

// --- the API ---------------------------------------------------------------------------

/** A refusal: the service's (its HTTP status, `field` and `problem`) or the page's own. */
class Problem extends Error {
  constructor(message, status = 0) {
    super(message);
    this.status = status;
  }
}

function refusal(method, path, status, data) {
  const list = Array.isArray(data.errors) && data.errors.length ? data.errors : [data];
  const said = list.map((e) => (e.field ? `${e.field}: ` : "") + (e.problem ?? "no reason given"));
  return new Problem(`${method} ${path.split("?")[0]}: HTTP ${status}: ${said.join("; ")}`,
                     status);
}

function token() { return sessionStorage.getItem(TOKEN) || ""; }

async function call(method, path, body, bearer = token()) {
  const headers = {};
  if (bearer) headers["Authorization"] = `Bearer ${bearer}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let r;
  try {
    r = await fetch(path, {method, headers,
                           body: body === undefined ? undefined : JSON.stringify(body)});
  } catch (e) {
    throw new Problem(`${method} ${path.split("?")[0]}: the service did not answer (${e.message})`);
  }
  const text = await r.text();
  let data;
  try { data = text ? JSON.parse(text) : {}; } catch { data = {problem: text.slice(0, 300)}; }
  if (!r.ok) throw refusal(method, path, r.status, data);
  return {status: r.status, data};
}

/** The handler of an event: `work` run with the button pressed disabled, its progress and
 *  any refusal said in the message `msgId` (nothing fails silently). */
function guard(msgId, work) {
  return async (event) => {
    if (event) event.preventDefault();
    const button = event ? event.submitter || event.currentTarget : null;
    const pressed = button instanceof HTMLButtonElement ? button : null;
    if (pressed) pressed.disabled = true;
    document.body.dataset.busy = String(++busy);
    say(msgId, "working…", "busy");
    try {
      await work();
      if ($(msgId).dataset.outcome === "busy") say(msgId, "", "idle");
    } catch (e) {
      say(msgId, e.message, "error");
      if (!(e instanceof Problem)) console.error(e);  // a fault of the page itself
    } finally {
      if (pressed) pressed.disabled = false;
      document.body.dataset.busy = String(--busy);
    }
  };
}

/** What a write changed, shown again; a refusal here is said in `msgId` after what is there
 *  (the write's own answer stays: it did happen). */
async function refreshed(msgId, work) {
  try {
    await work();
  } catch (e) {
    const before = $(msgId).dataset.outcome === "idle" ? "" : $(msgId).textContent;
    say(msgId, before ? `${before}; but then ${e.message}` : e.message, "error");
    if (!(e instanceof Problem)) console.error(e);
  }
}

/** Seconds of a TTL as typed: 3600, 90m, 12h, 30d, 2w. */
function seconds(text, field) {
  const m = /^(\d+)\s*([smhdw]?)$/i.exec(text.trim());
  if (!m) {
    throw new Problem(`${field}: "${text}" is no duration: 3600 (seconds), 90m, 12h, 30d or 2w`);
  }
  return Number(m[1]) * {"": 1, s: 1, m: 60, h: 3600, d: 86400, w: 604800}[m[2].toLowerCase()];
}

// --- signing in ------------------------------------------------------------------------

/** Who a token says it is: a JWT's `sub` and rearrange scopes (read, not verified: the
 *  service verifies it on every call); a static token says nothing of its holder. */
function who(bearer) {
  const parts = bearer.split(".");
  if (parts.length !== 3) return "with a static token";
  let claims;
  try {
    claims = JSON.parse(atob(parts[1].replace(/-/g, "+").replace(/_/g, "/")));
  } catch {
    return "with a token (a JWT whose claims this page cannot read)";
  }
  const scopes = [...String(claims.scope || "").split(" "), ...[].concat(claims.scp || [])]
    .filter((s) => s.startsWith("rearrange:"));
  const until = claims.exp ? `, until ${new Date(claims.exp * 1000).toISOString()}` : "";
  return `as ${claims.sub} (JWT: ${scopes.join(" ") || "no rearrange scope"}${until})`;
}

function showSignedIn() {
  const bearer = token();
  $("token-field").hidden = $("sign-in").hidden = Boolean(bearer);
  $("sign-out").hidden = !bearer;
  say("who", bearer ? `signed in ${who(bearer)}` : "not signed in: every change needs a token",
      bearer ? "signed-in" : "signed-out");
}

async function signIn() {
  const bearer = $("token").value.trim();
  if (!bearer) throw new Problem("token: paste a bearer token first");
  await call("GET", "/v1/banlist/pending", undefined, bearer);  // one not taken: a 401
  sessionStorage.setItem(TOKEN, bearer);
  $("token").value = "";
  showSignedIn();
  await loadQueue();
}

function signOut() {
  sessionStorage.removeItem(TOKEN);
  looked = null;
  resetDry();
  $("lookup-result").hidden = true;
  for (const id of ["queue", "bulk-sample"]) $(id).replaceChildren();
  for (const id of ["lookup-msg", "add-msg", "queue-msg", "bulk-msg"]) say(id, "", "idle");
  showSignedIn();
}

// --- lookup and history ----------------------------------------------------------------

async function lookup() {
  const url = $("lookup-url").value.trim();
  const region = $("lookup-region").value.trim();
  looked = {url, region};
  await refreshLookup();
}

async function refreshLookup() {
  if (!looked) return;
  const q = new URLSearchParams({url: looked.url});
  if (looked.region) q.set("region", looked.region);
  const {data} = await call("GET", `/v1/banlist/lookup?${q}`);
  looked.host = data.host;
  renderLookup(data);
  $("lookup-result").hidden = false;
  await loadHistory(false);
}

function renderLookup(data) {
  const said = [data.banned ? `BANNED: ${data.canonical}` : `not banned: ${data.canonical}`];
  if (!data.banned && data.matches.length) said.push("entries match but none applies here");
  if (data.quarantined) said.push("QUARANTINED (demoted)");
  const waiting = data.pending.length;
  if (waiting) said.push(`${waiting} ban(s) waiting for review would match`);
  $("verdict").textContent = said.join(" · ");
  $("verdict").dataset.verdict = data.banned ? "banned" : "clean";
  $("matches").replaceChildren(table(
    ["entry", "ban", "matched by", "applies", "reason", "by", "created", "expires", "regions", ""],
    data.matches.map((m) => [m.id, ban(m), m.matched_by, m.applies ? "yes" : `no: ${m.why_not}`,
                             m.reason, m.actor, m.created_at, expires(m), regions(m),
                             m.why_not === "expired" ? m.was ?? "" : entryActions(m)]),
    (i) => ({"data-entry": data.matches[i].id})));
  $("lookup-pending").replaceChildren(pendingTable(data.pending, false));
  $("quarantine").replaceChildren(table(
    ["entry", "quarantine", "matched by", "applies", "reason", "by", "expires"],
    data.quarantine.map((m) => [m.id, ban(m), m.matched_by,
                                m.applies ? "yes" : `no: ${m.why_not}`, m.reason, m.actor,
                                expires(m)])));
  $("former").replaceChildren(data.former === null
    ? el("p", {class: "msg error"}, `the history is out of reach: ${data.former_problem}`)
    : table(["entry", "ban", "matched by", "what became of it"],
            data.former.map((f) => [f.id, ban(f), f.matched_by, f.was])));
}

function entryActions(entry) {
  const reason = el("input", {class: "reason", placeholder: "why (required)", size: "14"});
  const ttl = el("input", {class: "ttl", placeholder: "30d or 2026-03-01T00:00:00Z", size: "12"});
  const button = (cls, label, work) => {
    const b = el("button", {type: "button", class: cls}, label);
    b.addEventListener("click", guard("lookup-msg", () => work(entry, reason.value, ttl.value)));
    return b;
  };
  return el("span", {class: "actions"}, reason, ttl, button("extend", "Extend", extend),
            button("permanent", "Permanent", permanent), button("remove", "Remove", remove));
}

async function extend(entry, reason, ttl) {
  const text = ttl.trim();
  if (!text) throw new Problem("ttl: give the new expiry (30d, or a time) or press Permanent");
  const body = {reason};
  if (/^\d{4}-\d{2}-\d{2}/.test(text)) body.expires_at = text;
  else body.ttl_seconds = seconds(text, "ttl");
  await edit(entry, body);
}

async function permanent(entry, reason) {
  await edit(entry, {reason, expires_at: null});
}

async function edit(entry, body) {
  const path = `/v1/banlist/entries/${encodeURIComponent(entry.id)}`;
  const {data} = await call("PATCH", path, body);
  say("lookup-msg", data.changed
    ? `entry ${entry.id} (${ban(entry)}) now expires: ${expires(data.entry)}`
    : `entry ${entry.id}: that is its expiry already, nothing changed`, "edited");
  await refreshed("lookup-msg", refreshLookup);
}

async function remove(entry, reason) {
  const path = `/v1/banlist/entries/${encodeURIComponent(entry.id)}`;
  const {data} = await call("DELETE", path, {reason});
  const still = data.still_banned_by.map((e) => e.id);
  say("lookup-msg", `removed entry ${entry.id} (${ban(entry)})` + (still.length
    ? `; STILL BANNED by entries ${still.join(", ")}` : ""), "removed");
  await refreshed("lookup-msg", refreshLookup);
}

async function loadHistory(older) {
  const q = new URLSearchParams({host: looked.host, order: "desc", limit: "20"});
  const known = older ? looked.changes : [];
  if (older && known.length) q.set("before", String(known[known.length - 1].seq));
  const {data} = await call("GET", `/v1/banlist/changes?${q}`);
  looked.changes = [...known, ...data.changes];
  $("history").replaceChildren(table(["seq", "at", "change", "of", "by", "why", "what changed"],
    looked.changes.map((c) => [c.seq, c.at, c.op, changed(c), c.actor ?? "", c.reason ?? "",
                               edited(c)])));
  $("history-older").hidden = !data.more;
}

/** An edit's fields, before → after: "expires_at: 2026-03-01T12:00:00.000Z → never". */
function edited(c) {
  if (!c.before || !c.after) return "";
  const said = (k, v) => (v === null ? (k === "expires_at" ? "never" : "none")
    : Array.isArray(v) ? v.join(", ") || "everywhere" : String(v));
  return Object.keys(c.after).map((k) => `${k}: ${said(k, c.before[k])} → ${said(k, c.after[k])}`)
    .join("; ");
}

function changed(c) {
  if (c.entry) {
    const own = c.entry.actor;
    const theirs = own && own !== c.actor ? ` (its actor ${own})` : "";
    return `entry ${c.entry.id}: ${ban(c.entry)}${theirs}`;
  }
  if (c.name) return `org group ${c.name}: ${(c.domains || []).join(", ")}`;
  return c.id ? `entry ${c.id}` : "";
}

// --- adding a ban ----------------------------------------------------------------------

async function add() {
  const body = {scope: $("add-scope").value, value: $("add-value").value.trim(),
                reason: $("add-reason").value.trim()};
  const where = $("add-regions").value.split(/[\s,;]+/).filter(Boolean);
  if (where.length) body.regions = where;
  const ttl = $("add-ttl").value.trim();
  if (ttl) body.ttl_seconds = seconds(ttl, "ttl");
  if ($("add-urgent").checked) body.urgent = true;
  const {status, data} = await call("POST", "/v1/banlist/entries", body);
  if (status === 202) {
    const p = data.pending;
    say("add-msg", `PENDING REVIEW: ${ban(p)} would have removed results from ` +
        `${pct(data.share)} of the last hour's requests (over ${pct(data.review_share)}). ` +
        `Nothing is banned yet: a second person who may approve must approve pending ban ` +
        `${p.id} in the review queue` + (data.existing ? " (it was proposed already)" : "") +
        ".", "pending");
  } else if (status === 200) {
    const e = data.entry;
    say("add-msg", `already banned: entry ${e.id} (${ban(e)}, by ${e.actor}, expires ` +
        `${expires(e)}, ${regions(e)}); nothing created. Impact: ${impact(data.impact)}.`,
        "existing");
  } else {
    const e = data.entry;
    let text = `banned: entry ${e.id} (${ban(e)}, expires ${expires(e)}, ${regions(e)}). ` +
      `Impact: ${impact(data.impact)} of the last hour.`;
    if (data.review) text += ` Urgent: in effect now, and pending ban ` +
      `${data.review.pending.id} is queued for review after the fact.`;
    say("add-msg", text, "banned");
  }
  await Promise.all([refreshed("queue-msg", loadQueue), refreshed("lookup-msg", refreshLookup)]);
}

// --- the review queue ------------------------------------------------------------------

async function loadQueue() {
  const {data} = await call("GET", "/v1/banlist/pending");
  $("queue").replaceChildren(data.pending.length ? pendingTable(data.pending, true)
    : el("p", {class: "empty"}, "no ban waits for review"));
  $("queue").dataset.count = String(data.pending.length);
}

function pendingTable(pending, actions) {
  const headers = ["pending", "ban", "proposed by", "reason", "impact now", "in effect",
                   "proposed", "expires"];
  return table(actions ? [...headers, ""] : headers, pending.map((p) => {
    const row = [p.id, ban(p), p.actor, p.reason, impact(p.impact),
                 p.in_effect ? "yes (urgent: banned already)" : "no", p.created_at, expires(p)];
    return actions ? [...row, decision(p)] : row;
  }), (i) => ({"data-pending": pending[i].id}));
}

function decision(p) {
  const reason = el("input", {class: "reason", placeholder: "why (required)", size: "16"});
  const button = (verdict, label) => {
    const b = el("button", {type: "button", class: verdict}, label);
    b.addEventListener("click", guard("queue-msg", () => decide(p, verdict, reason.value)));
    return b;
  };
  return el("span", {class: "actions"}, reason, button("approve", "Approve"),
            button("reject", "Reject"));
}

async function decide(p, verdict, reason) {
  const path = `/v1/banlist/pending/${encodeURIComponent(p.id)}/${verdict}`;
  const {data} = await call("POST", path, {reason});
  if (verdict === "approve") {
    say("queue-msg", `approved: entry ${data.entry.id} bans ${ban(data.entry)} (proposed by ` +
        `${data.entry.actor}, approved by ${data.by})`, "approved");
  } else {
    const lifted = data.lifted.map((e) => e.id);
    say("queue-msg", `rejected pending ban ${p.id} (${ban(data.rejected)})` +
        (lifted.length ? `; lifted entries ${lifted.join(", ")}` : ""), "rejected");
  }
  await Promise.all([refreshed("queue-msg", loadQueue), refreshed("lookup-msg", refreshLookup)]);
}

// --- bulk removal ----------------------------------------------------------------------

function bulkFilter() {
  const filter = {};
  for (const k of BULK) {
    const v = $(`bulk-${k}`).value.trim();
    if (v) filter[k] = v;
  }
  return filter;
}

function resetDry() {
  dry = null;
  $("bulk-confirm").hidden = true;
}

function staleDry() {
  if (!dry) return;
  resetDry();
  $("bulk-sample").replaceChildren();
  say("bulk-msg", "the filter or reason changed: count again before removing", "stale");
}

async function countBulk() {
  resetDry();
  $("bulk-sample").replaceChildren();
  const body = {filter: bulkFilter(), reason: $("bulk-reason").value.trim(), dry_run: true};
  const {data} = await call("POST", "/v1/banlist/remove", body);
  $("bulk-sample").replaceChildren(table(
    ["entry", "ban", "reason", "by", "created", "expires", "regions"],
    data.sample.map((e) => [e.id, ban(e), e.reason, e.actor, e.created_at, expires(e),
                            regions(e)])));
  const shown = data.matched > data.sample.length ? `; the first ${data.sample.length} shown` : "";
  say("bulk-msg", `${data.matched} active entries match (a dry run: nothing removed yet)` +
      shown, "counted");
  if (data.matched) {
    dry = {filter: body.filter, reason: body.reason, matched: data.matched};
    $("bulk-confirm").textContent = `Remove these ${data.matched} entries`;
    $("bulk-confirm").hidden = false;
  }
}

async function confirmBulk() {
  if (!dry) throw new Problem("count the entries first (dry run)");
  const {filter, reason, matched} = dry;
  const {data} = await call("POST", "/v1/banlist/remove", {filter, reason, dry_run: false});
  resetDry();
  say("bulk-msg", `removed ${data.removed} entries (banlist version ${data.banlist_version})` +
      (data.removed !== matched ? `; the dry run counted ${matched}: the list changed since` : ""),
      "removed");
  await refreshed("lookup-msg", refreshLookup);
}

window.addEventListener("DOMContentLoaded", () => {
  $("signin").addEventListener("submit", guard("who", signIn));
  $("sign-out").addEventListener("click", signOut);
  $("lookup").addEventListener("submit", guard("lookup-msg", lookup));
  $("history-older").addEventListener("click", guard("lookup-msg", () => loadHistory(true)));
  $("add").addEventListener("submit", guard("add-msg", add));
  $("queue-refresh").addEventListener("click", guard("queue-msg", loadQueue));
  $("bulk").addEventListener("submit", guard("bulk-msg", countBulk));
  $("bulk").addEventListener("input", staleDry);
  $("bulk-confirm").addEventListener("click", guard("bulk-msg", confirmBulk));
  showSignedIn();
  const first = token() ? guard("queue-msg", loadQueue)() : Promise.resolve();
  first.finally(() => { document.body.dataset.ready = "1"; });
});
