// The Rearrange inspector: one request explained (X-Rearrange-Explain), its removals with
// the banlist's "why", and the diff against a candidate config (POST /v1/admin/config/try).
// Plain DOM code, no build step and nothing fetched but this service's own API.
"use strict";

const PHASES = ["pre-filter", "rerank", "diversify", "trim", "annotate", "post-filter"];
function headers(json) {
  const h = {};
  const token = $("token").value.trim();
  if (token) h["Authorization"] = "Bearer " + token;
  if (json) h["Content-Type"] = "application/json";
  return h;
}

async function call(method, path, body, extra = {}) {
  const r = await fetch(path, {method, headers: {...headers(body !== undefined), ...extra},
                               body: body === undefined ? undefined : JSON.stringify(body)});
  const text = await r.text();
  let data;
  try { data = JSON.parse(text); } catch { data = {problem: text}; }
  if (!r.ok) {
    const where = data.field ? `${data.field}: ` : "";
    throw new Error(`${method} ${path}: HTTP ${r.status}: ${where}${data.problem || text}`);
  }
  return data;
}

function say(text, error = false) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

function ids(docs) { return docs.map((d) => d.id); }

function pageChips(page, before) {
  const was = new Map((before || []).map((id, i) => [id, i]));
  return el("div", {class: "page"}, ...page.map((id, i) => {
    const cls = before === undefined ? "" : !was.has(id) ? "new" : was.get(id) !== i ? "moved" : "";
    return el("span", {class: cls, "data-id": id, title: `position ${i + 1}`}, `${i + 1}. ${id}`);
  }));
}

function records(audit, step, mode) {
  return audit.filter((r) => r.rule === step.rule && r.phase === step.phase && r.mode === mode)
    .map((r) => [r.doc_id ?? "(page)", r.action, r.reason, r.delta ?? ""]);
}

function renderSummary(out) {
  const exps = out.experiments.map((e) => `${e.experiment}=${e.variant}`).join(", ") || "none";
  const fb = out.fallback ? `${out.fallback.action} by ${out.fallback.rule}: ${out.fallback.reason}` : "none";
  $("summary").replaceChildren(table(
    ["request_id", "profile", "config_version", "banlist_version", "experiments", "fallback", "documents"],
    [[out.request_id, out.profile, out.config_version, out.banlist_version, exps, fb,
      out.documents.length]]));
}

function renderSteps(out) {
  const box = $("steps");
  box.replaceChildren();
  const steps = out.explain.steps;
  const attempts = [...new Set(steps.map((s) => s.attempt))];
  let before = out.explain.input;
  for (const attempt of attempts) {
    if (attempts.length > 1) {
      box.append(el("h3", {}, attempt === 1
        ? "Attempt 1 (relaxed: nobody is shown this page)" : `Attempt ${attempt} (relaxed rerun)`));
      before = out.explain.input;
    }
    for (const phase of PHASES) {
      const here = steps.filter((s) => s.phase === phase && s.attempt === attempt);
      if (!here.length) continue;
      box.append(el("h3", {}, phase));
      for (const step of here) {
        const applied = records(out.audit, step, "applied");
        const shadow = records(out.audit, step, "shadow");
        const card = el("div", {class: "step", "data-rule": step.rule, "data-status": step.status},
          el("header", {},
            el("span", {class: "rule"}, step.rule),
            el("span", {class: `badge ${step.status}`}, step.status),
            el("span", {class: "why"}, step.why ?? ""),
            el("span", {class: "why"}, `${step.records} record(s)`)));
        if (step.records) {
          card.append(el("div", {class: "sides"},
            el("div", {class: "col-applied"}, el("h4", {}, "Applied"),
               table(["doc", "action", "reason", "delta"], applied)),
            el("div", {class: "col-shadow"}, el("h4", {}, "Shadow"),
               table(["doc", "action", "reason", "delta"], shadow))));
        }
        if (step.page) {
          card.append(pageChips(step.page, before));
          before = step.page;
        }
        box.append(card);
      }
    }
  }
}

async function renderRemoved(out, request) {
  const urls = new Map(request.documents.map((d) => [d.id, d.url]));
  const rows = [];
  for (const r of out.removed) {
    let why = "";
    if (r.rule === "banlist" && urls.has(r.id)) {
      try {
        const found = await call("GET", "/v1/banlist/lookup?url=" + encodeURIComponent(urls.get(r.id)));
        why = found.matches.filter((m) => m.applies).map((m) =>
          `${m.scope} ${m.value}: ${m.reason} (entry ${m.id}, by ${m.actor}, ${m.created_at})`).join("; ");
      } catch (e) {
        why = e.message;
      }
    }
    rows.push([r.id, urls.get(r.id) ?? "", r.rule, r.phase, r.action, r.reason, why]);
  }
  $("removed").replaceChildren(table(
    ["doc", "url", "rule", "phase", "action", "reason", "banlist: why"], rows));
}

function renderElsewhere(out) {
  $("elsewhere").replaceChildren(table(["rule", "phase", "profiles"],
    out.explain.not_in_profile.map((e) => [e.rule, e.phase, e.profiles.join(", ")])));
}

function renderDiff(served, cand) {
  const a = ids(served.documents), b = ids(cand.documents);
  const rows = [], classes = [];
  for (const [i, id] of a.entries()) {
    const j = b.indexOf(id);
    const change = j < 0 ? "removed" : j === i ? "" : `moved ${i + 1} → ${j + 1}`;
    rows.push([id, i + 1, j < 0 ? "—" : j + 1, change]);
    classes.push(j < 0 ? "removed" : j === i ? "" : "moved");
  }
  for (const [j, id] of b.entries()) {
    if (!a.includes(id)) { rows.push([id, "—", j + 1, "added"]); classes.push("added"); }
  }
  const key = (s) => `${s.attempt} ${s.phase} ${s.rule}`;
  const theirs = new Map(cand.explain.steps.map((s) => [key(s), s]));
  const ours = new Map(served.explain.steps.map((s) => [key(s), s]));
  const steps = [];
  for (const k of new Set([...ours.keys(), ...theirs.keys()])) {
    const x = ours.get(k), y = theirs.get(k);
    const said = (s) => s ? `${s.status} (${s.records})` : "not configured";
    if (!x || !y || x.status !== y.status || x.records !== y.records) {
      const s = x || y;
      steps.push([s.rule, s.phase, said(x), said(y)]);
    }
  }
  $("diff").replaceChildren(
    el("p", {}, `served ${served.config_version} vs candidate ${cand.config_version}`),
    table(["doc", "served", "candidate", "change"], rows, (i) => ({class: classes[i]})),
    el("h3", {}, "Steps that differ"),
    table(["rule", "phase", "served", "candidate"], steps));
  $("diff-section").hidden = false;
}

async function inspect(event) {
  event.preventDefault();
  document.body.removeAttribute("data-ready");
  let request;
  try {
    request = JSON.parse($("request").value);
  } catch (e) {
    say(`request: not JSON: ${e.message}`, true);
    return;
  }
  say("running…");
  try {
    const served = await call("POST", "/v1/rerank", request, {"X-Rearrange-Explain": "true"});
    served.explain.input = ids(request.documents || []);
    renderSummary(served);
    renderSteps(served);
    renderElsewhere(served);
    $("result").hidden = false;
    $("diff-section").hidden = true;
    const candidate = $("candidate").value.trim();
    if (candidate) {
      const cand = await call("POST", "/v1/admin/config/try", {config: candidate, request});
      renderDiff(served, cand);
    }
    await renderRemoved(served, request);
    say(`done: ${served.explain.steps.length} steps`);
  } catch (e) {
    say(e.message, true);
  } finally {
    document.body.setAttribute("data-ready", "1");
  }
}

async function loadCaptured() {
  const picker = $("captured");
  picker.replaceChildren(el("option", {value: ""}, "(none)"));
  if (!$("token").value.trim()) return;
  let found;
  try {
    found = await call("GET", "/v1/admin/captures?limit=50");
  } catch (e) {
    picker.title = e.message;
    return;
  }
  picker.title = found.enabled ? `${found.captures.length} captured` : "capture is off (REARRANGE_CAPTURE_PATH)";
  for (const [i, c] of found.captures.entries()) {
    const q = (c.request.query && c.request.query.text) || "(no query)";
    const at = new Date(c.ts * 1000).toISOString().replace(".000", "");
    picker.append(el("option", {value: String(i)}, `${at} ${q} (${(c.request.documents || []).length} docs)`));
  }
  picker.onchange = () => {
    const c = found.captures[Number(picker.value)];
    if (c) $("request").value = JSON.stringify(c.request, null, 2);
  };
}

window.addEventListener("DOMContentLoaded", () => {
  $("token").value = sessionStorage.getItem("rearrange-token") || "";
  $("token").addEventListener("change", () => {
    sessionStorage.setItem("rearrange-token", $("token").value.trim());
    loadCaptured();
  });
  loadCaptured();
  $("example").onclick = async () => {
    const r = await fetch("/inspector/example.json");
    $("request").value = await r.text();
  };
  $("served-config").onclick = async () => {
    try { $("candidate").value = (await call("GET", "/v1/admin/config")).source; }
    catch (e) { say(e.message, true); }
  };
  $("form").addEventListener("submit", inspect);
  document.body.setAttribute("data-ready", "1");
});
