"""`rearrange dupes --html report.html`: one self-contained page to look at (no network:
inline CSS, SVG and script, and a Content-Security-Policy that forbids anything else)."""
from __future__ import annotations

import difflib
from html import escape
from pathlib import Path

import numpy as np

from app.neardup.blocks import Block
from app.neardup.dupes import Audit, bin_labels, bin_of, histogram
from app.neardup.report import (
    VERDICT_COLUMNS,
    Progress,
    block_text,
    counted,
    no_progress,
    template_runs,
    verdict_rows,
)
from app.neardup.site import Pairs
from app.neardup.verdict import RECOMMENDATIONS, verdicts

SHOWN_WORDS = 2000  # a page's text is cut after this many words in the side-by-side view
MEMBERS_SHOWN = 200  # urls listed per cluster
CLUSTERS_SHOWN = 500  # the largest clusters, and as many multi-template pages (all: --json)
PAGES_SHOWN = 5000  # rows of the page table, those with something to do first

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{margin-top:2em;border-bottom:1px solid #ddd}
.summary td{padding:2px 12px 2px 0}.num{font-variant-numeric:tabular-nums;text-align:right}
.cluster,.pair,.multi,.block{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;margin:.8em 0}
.template{background:#f6f8fa;padding:.5em;white-space:pre-wrap;max-height:14em;overflow:auto}
.runs span+span:before{content:" … ";color:#999}
.side{display:grid;grid-template-columns:1fr 1fr;gap:1em}
.side div{background:#fafafa;padding:.5em;white-space:pre-wrap;overflow-wrap:anywhere}
mark.a{background:#ffd6d6}mark.b{background:#d6f5d6}
svg text{font:11px system-ui,sans-serif}.bar{fill:#4a7bd0}.line{stroke:#d04a4a}
.hidden{display:none}
#pages th{cursor:pointer;text-align:left;border-bottom:1px solid #ccc;padding:2px 8px 2px 0}
#pages td{padding:1px 8px 1px 0;overflow-wrap:anywhere}#pages th.sorted:after{content:" ▾"}
.bar{cursor:pointer}.bar.picked{fill:#d08a4a}
"""

SCRIPT = """
const box = document.getElementById("filter");
box.addEventListener("input", () => {
  const q = box.value.toLowerCase();
  for (const c of document.querySelectorAll(".cluster")) {
    c.classList.toggle("hidden", q !== "" && !c.dataset.urls.includes(q));
  }
});
// The page table: sorted by a column (#sort=NAME), cut to a histogram bin (#bin=N: the
// pages whose nearest share falls in it) or to urls holding a text; a bar's click and a
// header's click set the address's hash, so a view can be linked to.
const table = document.getElementById("pages");
const body = table.tBodies[0];
const pageBox = document.getElementById("page-filter");
function view() {
  const hash = new URLSearchParams(location.hash.slice(1));
  const bin = hash.get("bin"), sort = hash.get("sort"), q = pageBox.value.toLowerCase();
  const bars = document.querySelectorAll("rect.bar");
  bars.forEach((b, i) => b.classList.toggle("picked", String(i) === bin));
  let shown = 0;
  for (const row of body.rows) {
    const hide = (bin !== null && row.dataset.bin !== bin)
      || (q !== "" && !row.dataset.url.includes(q));
    row.classList.toggle("hidden", hide);
    if (!hide) shown++;
  }
  if (sort) {
    const rows = Array.from(body.rows);
    const numeric = rows.every(r => r.dataset[sort] === "" || !isNaN(+r.dataset[sort]));
    rows.sort((a, b) => numeric ? (+b.dataset[sort] || 0) - (+a.dataset[sort] || 0)
                                : a.dataset[sort].localeCompare(b.dataset[sort]));
    rows.forEach(r => body.appendChild(r));
  }
  for (const th of table.tHead.rows[0].cells) {
    th.classList.toggle("sorted", th.dataset.key === sort);
  }
  const picked = bin !== null && bars[+bin];
  const inBin = picked ? " of the " + bars[+bin].dataset.count + " in the bin" : "";
  document.getElementById("pages-shown").textContent = shown + inBin;
}
function setHash(key, value) {
  const hash = new URLSearchParams(location.hash.slice(1));
  if (value === null || hash.get(key) === value) hash.delete(key); else hash.set(key, value);
  location.hash = hash.toString();
}
document.querySelectorAll("rect.bar").forEach((b, i) =>
  b.addEventListener("click", () => setHash("bin", String(i))));
for (const th of table.tHead.rows[0].cells) {
  th.addEventListener("click", () => setHash("sort", th.dataset.key));
}
pageBox.addEventListener("input", view);
window.addEventListener("hashchange", view);
view();
document.body.dataset.ready = "1";
"""


def svg_histogram(counts: list[tuple[float, float, int]], threshold: float) -> str:
    """Bars of pages per bin of best containment, the threshold as a red line."""
    width, height, left, bottom = 640, 220, 40, 30
    plot_w, plot_h = width - left - 10, height - bottom - 20
    peak = max((c for _, _, c in counts), default=0) or 1
    bar_w = plot_w / max(len(counts), 1)
    out = [f'<svg id="histogram" xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" role="img" aria-label="best containment per page">']
    for n, (label, (_, _, count)) in enumerate(zip(bin_labels(counts), counts, strict=True)):
        h = plot_h * count / peak
        x, y = left + n * bar_w, 20 + plot_h - h
        out.append(f'<rect class="bar" x="{x + 1:.1f}" y="{y:.1f}" width="{bar_w - 2:.1f}" '
                   f'height="{h:.1f}" data-count="{count}">'
                   f'<title>{label}: {count} pages</title></rect>')
        out.append(f'<text x="{x + bar_w / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" '
                   f'class="count">{count}</text>')
    for n in range(11):
        x = left + plot_w * n / 10
        out.append(f'<text x="{x:.1f}" y="{height - 12}" text-anchor="middle">{n / 10:.1f}</text>')
    x = left + plot_w * threshold
    out.append(f'<line class="line" x1="{x:.1f}" x2="{x:.1f}" y1="12" y2="{20 + plot_h}" '
               f'stroke-dasharray="4 3"><title>threshold {threshold:g}</title></line>')
    out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{20 + plot_h}" y2="{20 + plot_h}" '
               'stroke="#888"/></svg>')
    return "".join(out)


def marked(words: list[str], same: list[bool], cls: str) -> str:
    """The words, those not shared with the other page in <mark class=cls>."""
    out = []
    for word, kept in zip(words, same, strict=True):
        out.append(escape(word) if kept else f'<mark class="{cls}">{escape(word)}</mark>')
    return " ".join(out)


def side_by_side(a: str, b: str) -> str:
    """Two texts in two columns, the words that differ highlighted (a word-level diff)."""
    wa, wb = a.split()[:SHOWN_WORDS], b.split()[:SHOWN_WORDS]
    sa, sb = [False] * len(wa), [False] * len(wb)
    matcher = difflib.SequenceMatcher(None, [w.lower() for w in wa], [w.lower() for w in wb],
                                      autojunk=False)
    for block in matcher.get_matching_blocks():
        sa[block.a:block.a + block.size] = [True] * block.size
        sb[block.b:block.b + block.size] = [True] * block.size
    return (f'<div class="side"><div>{marked(wa, sa, "a")}</div>'
            f'<div>{marked(wb, sb, "b")}</div></div>')


def _pair_html(audit: Audit, p: Pairs, n: int) -> str:
    a, b = int(p.a[n]), int(p.b[n])
    jac, ins, out = (float(x[n]) for x in (audit.jaccard(p), audit.inside(p), audit.outside(p)))
    return (f'<section class="pair"><p><b>{escape(audit.urls[a])}</b> · '
            f'<b>{escape(audit.urls[b])}</b>: jaccard={jac:.2f} in={ins:.2f} out={out:.2f}</p>'
            + side_by_side(audit.site.text(a), audit.site.text(b)) + "</section>")


def _cluster_html(audit: Audit, c: int, members: list[int], runs: list[str]) -> str:
    urls = [audit.urls[i] for i in members]
    listed = "".join(f"<li>{escape(u)}</li>" for u in urls[:MEMBERS_SHOWN])
    more = f"<li>… and {len(urls) - MEMBERS_SHOWN} more</li>" if len(urls) > MEMBERS_SHOWN else ""
    template = "".join(f"<span>{escape(r)}</span>" for r in runs)
    return (f'<section class="cluster" data-urls="{escape(" ".join(urls).lower())}">'
            f"<p><b>#{c}</b> {len(urls)} pages, representative <b>{escape(urls[0])}</b></p>"
            f'<div class="template runs">{template}</div>'
            f"<details><summary>pages</summary><ul>{listed}{more}</ul></details></section>")


def _block_html(audit: Audit, block: Block) -> str:
    urls = [audit.urls[p] for p in block.pages.tolist()]
    listed = "".join(f"<li>{escape(u)}: {s:.0%} of its text</li>"
                     for u, s in zip(urls[:MEMBERS_SHOWN], block.shares.tolist(), strict=False))
    more = f"<li>… and {len(urls) - MEMBERS_SHOWN} more</li>" if len(urls) > MEMBERS_SHOWN else ""
    return (f'<section class="block"><p>quoted by <b>{len(urls)}</b> pages, '
            f"{float(np.median(block.shares)):.0%} of the median page</p>"
            f'<div class="template">{escape(block_text(audit, block))}</div>'
            f"<details><summary>pages</summary><ul>{listed}{more}</ul></details></section>")


def _verdict_table(audit: Audit, bins: int) -> tuple[str, int]:
    """The page table (the PAGES_SHOWN pages with something to do first) and its size; each
    row knows its histogram bin."""
    rows = list(verdict_rows(audit, verdicts(audit)))
    for row, b in zip(rows, bin_of(audit.best_containment(), bins).tolist(), strict=True):
        row["bin"] = b
    urgency = {name: n for n, name in enumerate(RECOMMENDATIONS)}
    rows.sort(key=lambda r: urgency[r["recommendation"]])
    head = "".join(f'<th data-key="{c}">{c.replace("_", " ")}</th>' for c in VERDICT_COLUMNS)
    body = []
    for row in rows[:PAGES_SHOWN]:
        data = " ".join(f'data-{c}="{escape(_data(row[c], c == "url"))}"'
                        for c in (*VERDICT_COLUMNS, "bin"))
        cells = "".join(f'<td{" class=num" if isinstance(row[c], float) else ""}>'
                        f"{escape(_cell(row[c]))}</td>" for c in VERDICT_COLUMNS)
        body.append(f"<tr {data}>{cells}</tr>")
    return (f'<table id="pages"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>'), len(rows)


def _data(value: object, lower: bool) -> str:
    """A row's value as its data attribute: the shares in full, urls lowercased."""
    if isinstance(value, float):
        return repr(value)
    return _cell(value).lower() if lower else _cell(value)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def render_html(audit: Audit, sample: Pairs, bins: int = 10,
                progress: Progress = no_progress) -> str:
    """The report as one HTML document."""
    n, over = len(audit.urls), int((audit.values() >= audit.threshold).sum())
    what = "jaccard" if audit.measure == "jaccard" else "max(in, out)"
    method = (f"MinHash LSH, {audit.lsh[0]} bands × {audit.lsh[1]} rows, "
              f"{audit.candidates} candidates scored exactly" if audit.lsh else
              f"exact, all {n * (n - 1) // 2} pairs")
    without = "without distinctive words" if audit.reworded else "without any words"
    rows = [("pages with text", "pages", n), (without, "skipped", len(audit.skipped)),
            ("excluded", "excluded", len(audit.excluded)), ("pairs at or over the threshold",
                                                            "pairs", over),
            ("clusters", "clusters", len(audit.clusters)),
            ("pages holding several templates", "multi", len(audit.multi)),
            ("shared blocks", "blocks", len(audit.blocks))]
    counts = verdicts(audit).recommendation
    rows += [(f"pages to {name}" if name != "ok" else "pages with nothing to do", name,
              counts.count(name)) for name in RECOMMENDATIONS]
    summary = "".join(f'<tr><td>{label}</td><td class="num" id="count-{key}">{value}</td></tr>'
                      for label, key, value in rows)
    shown = audit.clusters[:CLUSTERS_SHOWN]
    clusters = "".join(_cluster_html(audit, c, cl.members, template_runs(audit, cl))
                       for c, cl in enumerate(counted(shown, "writing html", progress), 1))
    clusters += _more(len(audit.clusters) - len(shown), "clusters")
    multi = "".join(
        f'<section class="multi"><b>{escape(audit.urls[m.page])}</b> holds parts of '
        + ", ".join(escape(audit.urls[p]) for p in m.parts) + "</section>"
        for m in audit.multi[:CLUSTERS_SHOWN])
    multi += _more(len(audit.multi) - CLUSTERS_SHOWN, "pages holding several templates")
    blocks = "".join(_block_html(audit, b) for b in audit.blocks[:CLUSTERS_SHOWN])
    blocks += _more(len(audit.blocks) - CLUSTERS_SHOWN, "shared blocks")
    table, listed = _verdict_table(audit, bins)
    cut = (f" The {PAGES_SHOWN} pages with the most to do are listed; --verdicts FILE has "
           f"all {listed}." if listed > PAGES_SHOWN else "")
    pairs = "".join(_pair_html(audit, sample, i) for i in range(len(sample)))
    csp = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
           "img-src data:")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<title>Near-duplicate audit</title><style>{CSS}</style></head>
<body>
<h1>Near-duplicate audit</h1>
<p>{escape(method)}; threshold: {what} ≥ {audit.threshold:g}, shingles of {audit.width} words.</p>
<table class="summary">{summary}</table>
<h2>Best containment per page</h2>
<p>For each page, the largest share of it found inside one other page.</p>
{svg_histogram(histogram(audit.best_containment(), bins), audit.threshold)}
<h2>Clusters</h2>
<p>Each page of a cluster matches its representative; the shaded text is the template,
the representative's text that at least half of the pages share.</p>
<p><input id="filter" placeholder="filter clusters by url" size="40"></p>
{clusters or "<p>none</p>"}
<h2>Pages holding several templates</h2>
{multi or "<p>none</p>"}
<h2>Shared blocks</h2>
<p>Text several pages quote word for word, a small part of most of them (a notice, a
disclaimer, an included file): not a template, and not a reason to cluster them.</p>
{blocks or "<p>none</p>"}
<h2>Pages</h2>
<p>A verdict per page (docs/near-duplicates.md explains each recommendation). Click a
column to sort by it, a bar of the histogram to list the pages in its bin.{cut}</p>
<p><input id="page-filter" placeholder="filter pages by url" size="40">
<span id="pages-shown"></span> shown</p>
{table}
<h2>Pairs near the threshold</h2>
<p>Open them and judge by eye; words not shared by the other page are marked.</p>
{pairs or "<p>none</p>"}
<script>{SCRIPT}</script>
</body></html>
"""


def _more(hidden: int, what: str) -> str:
    return f'<p class="more">… and {hidden} more {what} (all in --json)</p>' if hidden > 0 else ""


def write_html(path: Path, audit: Audit, sample: Pairs, bins: int = 10,
               progress: Progress = no_progress) -> None:
    """Write the report (UTF-8)."""
    path.write_text(render_html(audit, sample, bins, progress), encoding="utf-8")
