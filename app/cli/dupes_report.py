"""The report `rearrange dupes` prints: what was compared, the seed's pair table, the
histogram of best containment, the clusters with their template text and the pages holding
several templates, as the CLI's tables (app/cli/tables.py). The numbers are the audit's
(app/neardup); the files it writes are app/neardup/report.py's."""
from __future__ import annotations

from typing import IO

import numpy as np
from rich.bar import Bar
from rich.table import Table
from rich.text import Text

from app.cli.tables import add_row, new_table, show
from app.neardup.compare import summary
from app.neardup.dupes import Audit, bin_labels, histogram
from app.neardup.report import block_text, template_text
from app.neardup.site import Pairs
from app.neardup.verdict import RECOMMENDATIONS, verdicts

BAR_WIDTH = 40  # characters of the histogram's longest bar
MEMBERS_SHOWN = 5  # pages of a cluster named in its row
PARTS_SHOWN = 4  # templates a multi-template page is named as holding parts of
TEMPLATE_WORDS = 24  # of a cluster's template text


def render(audit: Audit, top: int, sample: Pairs, bins: int, out: IO[str]) -> None:
    """Write the report to `out`: `top` pairs, clusters and multi-template pages at most,
    `bins` histogram bins, and the `sample` pairs near the threshold."""
    n = len(audit.urls)
    without = "distinctive words" if audit.reworded else "any words"
    out.write(f"pages: {n} with text, {len(audit.skipped)} without {without} (left out)"
              + (f", {len(audit.excluded)} excluded" if audit.excluded else "") + "\n")
    if audit.lsh is not None:
        bands, rows = audit.lsh
        out.write(f"method: MinHash LSH ({bands} bands x {rows} rows) proposed "
                  f"{audit.candidates} candidate pairs; each scored exactly\n")
    else:
        out.write(f"method: exact, all {n * (n - 1) // 2} pairs\n")
    what = "jaccard" if audit.measure == "jaccard" else "max(in, out)"
    out.write(f"threshold: {what} >= {audit.threshold:g}\n")
    if audit.reworded:
        out.write("compared by distinctive words (--reworded): the words two or more pages "
                  "use, less the most common; shares are of those words\n")
    ranked = audit.ranked()
    shown = ranked.take(slice(0, top))
    over = int((audit.values() >= audit.threshold).sum())
    sharing = int((ranked.both > 0).sum())
    if audit.lsh is not None:  # only the candidates were scored: others may share text too
        heading = (f"candidate pairs (LSH): {audit.candidates}; verified pairs sharing text: "
                   f"{sharing}; at or over the threshold: {over}")
    else:
        heading = (f"pairs sharing text: {sharing} of {n * (n - 1) // 2} (all compared "
                   f"exactly); at or over the threshold: {over}")
    _section(out, _pairs(audit, shown, heading + (f"; top {len(shown)}:" if len(shown) else "")),
             bool(len(shown)))
    _section(out, _histogram(audit, bins), True)
    _section(out, _clusters(audit, top), bool(audit.clusters))
    if audit.multi:
        _section(out, _multi(audit, top), True)
    if audit.blocks:
        _section(out, _blocks(audit, top), True)
    _section(out, _recommendations(audit), bool(audit.urls))
    if audit.compared is not None:
        _section(out, _compared(audit, top), True)
    if len(sample):
        _section(out, _pairs(audit, sample, f"{len(sample)} pairs near the threshold to open "
                             "and judge by eye:"), True)


def _section(out: IO[str], table: Table, rows: bool) -> None:
    """A blank line, then the table (only its title when it has no rows)."""
    out.write("\n")
    if rows:
        show(table, out)
    else:
        out.write(f"{table.title}\n")


def _pairs(audit: Audit, p: Pairs, title: str) -> Table:
    """The seed's table: both pages, their Jaccard, the share of each inside the other. A
    page's name is never cut (it is what one opens); nor is a template (TEMPLATE_WORDS)."""
    table = new_table(("URL A", "URL B", ("JACCARD", "right"), ("IN", "right"),
                       ("OUT", "right")), title)
    for a, b, jac, ins, out in zip(p.a.tolist(), p.b.tolist(), audit.jaccard(p).tolist(),
                                   audit.inside(p).tolist(), audit.outside(p).tolist(),
                                   strict=True):
        add_row(table, Text(audit.urls[a]), Text(audit.urls[b]), f"{jac:.2f}", f"{ins:.2f}",
                f"{out:.2f}")
    return table


def _histogram(audit: Audit, bins: int) -> Table:
    """Pages by best containment, each bin with its count and a bar (the fullest is
    BAR_WIDTH long)."""
    counts = histogram(audit.best_containment(), bins)
    peak = max((c for _, _, c in counts), default=0) or 1
    table = new_table(("CONTAINMENT", ("PAGES", "right"), ""),
                      "best containment per page (share of the page found inside one other "
                      "page):")
    for label, (_, _, count) in zip(bin_labels(counts), counts, strict=True):
        add_row(table, label, count, Bar(peak, 0, count, width=BAR_WIDTH))
    return table


def _clusters(audit: Audit, top: int) -> Table:
    """The first `top` clusters: their size, first pages and template text."""
    table = new_table((("#", "right"), ("PAGES", "right"), "MEMBERS", "TEMPLATE"),
                      f"clusters at the threshold (each page matches the first): "
                      f"{len(audit.clusters)}")
    for c, cluster in enumerate(audit.clusters[:top], 1):
        urls = [audit.urls[i] for i in cluster.members]
        more = (f" … and {len(urls) - MEMBERS_SHOWN} more"
                if len(urls) > MEMBERS_SHOWN else "")
        add_row(table, c, len(urls), Text(", ".join(urls[:MEMBERS_SHOWN]) + more),
                Text(template_text(audit, cluster, TEMPLATE_WORDS)))
    return table


def _multi(audit: Audit, top: int) -> Table:
    """The first `top` pages holding parts of several clusters' templates."""
    table = new_table(("PAGE", "PARTS OF"),
                      f"pages holding several templates (not clustered): {len(audit.multi)}")
    for m in audit.multi[:top]:
        parts = ", ".join(audit.urls[p] for p in m.parts[:PARTS_SHOWN])
        more = f" and {len(m.parts) - PARTS_SHOWN} more" if len(m.parts) > PARTS_SHOWN else ""
        add_row(table, Text(audit.urls[m.page]), Text(parts + more))
    return table


def _blocks(audit: Audit, top: int) -> Table:
    """The first `top` shared blocks: how many pages quote them, their median share, text."""
    table = new_table((("PAGES", "right"), ("SHARE", "right"), "TEXT"),
                      f"shared blocks (text several pages quote, a small part of most; "
                      f"not clusters): {len(audit.blocks)}")
    for block in audit.blocks[:top]:
        add_row(table, block.pages.size, f"{float(np.median(block.shares)):.2f}",
                Text(block_text(audit, block, TEMPLATE_WORDS)))
    return table


def _recommendations(audit: Audit) -> Table:
    """How many pages get each recommendation (docs/near-duplicates.md: A verdict per page)."""
    v = verdicts(audit)
    table = new_table((("PAGES", "right"), "RECOMMENDATION"),
                      "recommendations (per page: --verdicts FILE):")
    for name in RECOMMENDATIONS:
        count = v.recommendation.count(name)
        if count:
            add_row(table, count, name)
    return table


def _compared(audit: Audit, top: int) -> Table:
    """--compare: the summary, then the first `top` clusters that changed."""
    assert audit.compared is not None
    path, changes = audit.compared
    counts = summary(changes)
    table = new_table(("CHANGE", ("BEFORE", "right"), ("AFTER", "right"), "REPRESENTATIVE"),
                      f"clusters against {path}: {counts['appeared']} appeared, "
                      f"{counts['went away']} went away, {counts['grew']} grew, "
                      f"{counts['shrank']} shrank, {counts['changed']} changed pages, "
                      f"{counts['same']} the same; pages in "
                      f"clusters {counts['pages_before']} -> {counts['pages_after']}")
    for change in [c for c in changes if c.kind != "same"][:top]:
        add_row(table, change.kind, len(change.before), len(change.after),
                Text(change.representative))
    return table
