"""`rearrange dupes` output: the seed's pair table, the histogram, clusters, CSV/JSON, progress."""
from __future__ import annotations

import csv
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import orjson

from app.dupes import Audit, Pair, best_containment, histogram

BAR_WIDTH = 30


class ProgressBar:
    """A one-line progress bar on stderr, redrawn at most 10 times a second."""

    def __init__(self, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self._stage = ""
        self._started = self._drawn = 0.0

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if stage != self._stage:
            if self._stage:
                self.stream.write("\n")
            self._stage, self._started, self._drawn = stage, now, 0.0
        if done < total and now - self._drawn < 0.1:
            return
        self._drawn = now
        share = done / total if total else 1.0
        filled = int(share * BAR_WIDTH)
        elapsed = now - self._started
        eta = f" eta {elapsed / share - elapsed:5.0f}s" if 0 < share < 1 else ""
        self.stream.write(f"\r{stage:<11} {share:4.0%} |{'#' * filled}{'.' * (BAR_WIDTH - filled)}"
                          f"| {done}/{total} {elapsed:.1f}s{eta}")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.enabled and self._stage:
            self.stream.write("\n")
            self.stream.flush()


def pair_line(audit: Audit, p: Pair) -> str:
    """One row of the seed's table."""
    a, b = audit.pages[p.a].url, audit.pages[p.b].url
    return f"{a:18} {b:18} jaccard={p.jaccard:.2f} in={p.inside:.2f} out={p.outside:.2f}"


def ranked(audit: Audit) -> list[Pair]:
    """Pairs by the chosen measure, highest first (input order among ties)."""
    return sorted(audit.pairs, key=lambda p: -p.value(audit.measure))


def render(audit: Audit, top: int, sample: Sequence[Pair], bins: int = 10) -> str:
    """The report printed on stdout."""
    n = len(audit.pages)
    out = [f"pages: {n} with text, {len(audit.skipped)} without any words (left out)"]
    if audit.lsh is not None:
        bands, rows = audit.lsh
        out.append(f"method: MinHash LSH ({bands} bands x {rows} rows) proposed "
                   f"{audit.candidates} candidate pairs; each scored exactly")
    else:
        out.append(f"method: exact, all {n * (n - 1) // 2} pairs")
    what = "jaccard" if audit.measure == "jaccard" else "max(in, out)"
    out.append(f"threshold: {what} >= {audit.threshold:g}")
    pairs = ranked(audit)
    shown = pairs[:top]
    out.append(f"\npairs sharing text: {sum(1 for p in pairs if p.jaccard > 0)}; "
               f"at or over the threshold: "
               f"{sum(1 for p in pairs if p.value(audit.measure) >= audit.threshold)}"
               + (f"; top {len(shown)}:" if shown else ""))
    out.extend(pair_line(audit, p) for p in shown)
    out.append("\nbest containment per page (share of the page found inside one other page):")
    counts = histogram(best_containment(n, audit.pairs), bins)
    peak = max((c for _, _, c in counts), default=0) or 1
    for low, high, count in counts:
        bar = "#" * round(40 * count / peak)
        out.append(f"  {low:.1f}-{high:.1f} {count:>8} {bar}".rstrip())
    out.append(f"\nclusters at the threshold: {len(audit.clusters)}")
    for c, members in enumerate(audit.clusters[:top], 1):
        urls = [audit.pages[i].url for i in members]
        more = f" … and {len(urls) - 5} more" if len(urls) > 5 else ""
        out.append(f"  #{c} ({len(urls)} pages): {', '.join(urls[:5])}{more}")
    if sample:
        out.append(f"\n{len(sample)} pairs near the threshold to open and judge by eye:")
        out.extend(pair_line(audit, p) for p in sample)
    return "\n".join(out) + "\n"


def write_csv(path: Path, audit: Audit) -> None:
    """All recorded pairs, highest first: url_a, url_b, jaccard, in, out, cluster."""
    cluster_of = {i: c for c, members in enumerate(audit.clusters, 1) for i in members}
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["url_a", "url_b", "jaccard", "in", "out", "over_threshold", "cluster"])
        for p in ranked(audit):
            over = p.value(audit.measure) >= audit.threshold
            writer.writerow([audit.pages[p.a].url, audit.pages[p.b].url, f"{p.jaccard:.4f}",
                             f"{p.inside:.4f}", f"{p.outside:.4f}", int(over),
                             cluster_of.get(p.a, "") if over else ""])


def as_json(audit: Audit, sample: Sequence[Pair], params: dict[str, Any],
            bins: int = 10) -> dict[str, Any]:
    """The whole audit as one JSON document."""
    urls = [p.url for p in audit.pages]

    def pair(p: Pair) -> dict[str, Any]:
        return {"url_a": urls[p.a], "url_b": urls[p.b], "jaccard": round(p.jaccard, 4),
                "in": round(p.inside, 4), "out": round(p.outside, 4)}

    return {
        "params": params,
        "method": audit.method,
        "lsh": {"bands": audit.lsh[0], "rows": audit.lsh[1], "candidates": audit.candidates}
        if audit.lsh else None,
        "pages": len(urls),
        "without_text": audit.skipped,
        "pairs": [pair(p) for p in ranked(audit)],
        "histogram": [{"low": lo, "high": hi, "pages": c}
                      for lo, hi, c in histogram(best_containment(len(urls), audit.pairs), bins)],
        "clusters": [[urls[i] for i in members] for members in audit.clusters],
        "sample": [pair(p) for p in sample],
    }


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write the JSON report (UTF-8, indented)."""
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
