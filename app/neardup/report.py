"""`rearrange dupes` files and the data the report shows: clusters' template text, the
CSV, the JSON document and the signatures (the report on stdout is app/cli/dupes_report.py,
the progress bar app/cli/progress.py)."""
from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import mmh3
import numpy as np
import orjson

from app.neardup import minhash
from app.neardup.blocks import Block
from app.neardup.cluster import Cluster, numbered
from app.neardup.compare import summary
from app.neardup.dupes import Audit, histogram
from app.neardup.site import Pairs
from app.neardup.verdict import Verdicts, verdicts

Progress = Callable[[str, int, int], None]  # (stage, done, total)
T = TypeVar("T")
_WORD = re.compile(r"\w+")  # app/neardup/shingles.py's words, with where each one is


def template_runs(audit: Audit, cluster: Cluster) -> list[str]:
    """The representative's text where its shingles are the cluster's template, as runs of
    consecutive words (with their punctuation, when lowercasing kept the text's length)."""
    if cluster.rep not in audit.templates:
        audit.templates[cluster.rep] = _template_runs(audit, cluster)
    return audit.templates[cluster.rep]


def _template_runs(audit: Audit, cluster: Cluster) -> list[str]:
    template = audit.site.shingles(cluster.rep)[cluster.template]
    return runs_of(audit, cluster.rep, template)


def runs_of(audit: Audit, page: int, held: np.ndarray) -> list[str]:
    """The page's text where its shingles are among `held`, as runs of consecutive words
    (with their punctuation, when lowercasing kept the text's length)."""
    text = audit.site.text(page)
    lower = text.lower()
    spans = [m.span() for m in _WORD.finditer(lower)]
    words = [lower[a:b].encode() for a, b in spans]
    width = min(audit.width, len(words))
    windows = len(words) - width + 1
    hashes = np.fromiter((mmh3.hash64(b" ".join(words[i:i + width]), seed=0, signed=False)[0]
                          for i in range(windows)), dtype=np.uint64, count=windows)
    # a word is held text when a held shingle (a window of `width` words) covers it
    starts = np.isin(hashes, held).astype(np.int32)
    covered = np.convolve(starts, np.ones(width, dtype=np.int32))[:len(words)] > 0
    source = text if len(lower) == len(text) else lower
    edges = np.flatnonzero(np.diff(np.concatenate([[False], covered, [False]]).astype(int)))
    return [source[spans[first][0]:spans[last - 1][1]] for first, last in edges.reshape(-1, 2)]


def block_text(audit: Audit, block: Block, words: int = 0) -> str:
    """A shared block's text, from the page it is the largest share of; cut after `words`."""
    return _cut(runs_of(audit, block.source, block.shingles), words)


def template_text(audit: Audit, cluster: Cluster, words: int = 0) -> str:
    """The template's runs joined by " … ", cut after `words` words when given."""
    return _cut(template_runs(audit, cluster), words)


def _cut(runs: list[str], words: int) -> str:
    if not words:
        return " … ".join(runs)
    out, left = [], words
    for run in runs:
        pieces = run.split()
        out.append(" ".join(pieces[:left]))
        left -= len(pieces)
        if left <= 0:
            break
    cut = left < 0 or len(out) < len(runs)
    return " … ".join(out) + (" …" if cut else "")


def cluster_of(audit: Audit) -> np.ndarray:
    """Each page's cluster number (1 = the largest), 0 for none."""
    return numbered(len(audit.urls), audit.clusters)


def written_pairs(audit: Audit, everything: bool) -> Pairs:
    """The pairs the files hold: at or over the threshold, or every verified candidate."""
    return audit.ranked(audit.pairs if everything else audit.over())


def no_progress(stage: str, done: int, total: int) -> None:
    return None


def write_csv(path: Path, audit: Audit, everything: bool = False,
              progress: Progress = no_progress) -> None:
    """url_a, url_b, jaccard, in, out, over_threshold, cluster (when both are in one)."""
    p = written_pairs(audit, everything)
    of = cluster_of(audit)
    same = np.where(of[p.a] == of[p.b], of[p.a], 0)
    over = audit.values(p) >= audit.threshold
    urls = audit.urls
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["url_a", "url_b", "jaccard", "in", "out", "over_threshold", "cluster"])
        for n, (a, b, jac, ins, out, o, c) in enumerate(zip(
                p.a.tolist(), p.b.tolist(), audit.jaccard(p).tolist(), audit.inside(p).tolist(),
                audit.outside(p).tolist(), over.tolist(), same.tolist(), strict=True)):
            writer.writerow([urls[a], urls[b], f"{jac:.4f}", f"{ins:.4f}", f"{out:.4f}",
                             int(o), c or ""])
            if n % 50_000 == 0:
                progress("writing csv", n, len(p))
        progress("writing csv", len(p), len(p))


VERDICT_COLUMNS = ("url", "recommendation", "target", "cluster", "template_share",
                   "block_share", "unique_share", "nearest", "nearest_share", "multi_template")


def verdict_rows(audit: Audit, v: Verdicts) -> Iterator[dict[str, Any]]:
    """One dict per page (VERDICT_COLUMNS), in the input's order; shares to 4 places."""
    urls = audit.urls
    for i, url in enumerate(urls):
        yield {"url": url, "recommendation": v.recommendation[i],
               "target": urls[v.target[i]] if v.target[i] >= 0 else None,
               "cluster": int(v.cluster[i]) or None,
               "template_share": round(float(v.template_share[i]), 4),
               "block_share": round(float(v.block_share[i]), 4),
               "unique_share": None if np.isnan(v.unique_share[i])
               else round(float(v.unique_share[i]), 4),
               "nearest": urls[v.nearest[i]] if v.nearest[i] >= 0 else None,
               "nearest_share": round(float(v.nearest_share[i]), 4),
               "multi_template": bool(v.multi[i])}


def write_verdicts(path: Path, audit: Audit, v: Verdicts,
                   progress: Progress = no_progress) -> None:
    """--verdicts FILE: the per-page CSV (VERDICT_COLUMNS; empty for none)."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(VERDICT_COLUMNS)
        for n, row in enumerate(verdict_rows(audit, v)):
            writer.writerow(["" if row[c] is None else int(row[c])
                             if isinstance(row[c], bool) else row[c] for c in VERDICT_COLUMNS])
            if n % 50_000 == 0:
                progress("writing verdicts", n, len(audit.urls))
        progress("writing verdicts", len(audit.urls), len(audit.urls))


def block_dicts(audit: Audit, words: int = 0) -> list[dict[str, Any]]:
    urls = audit.urls
    return [{"text": block_text(audit, b, words), "shingles": int(b.shingles.size),
             "pages": [{"url": urls[p], "share": round(float(s), 4)}
                       for p, s in zip(b.pages.tolist(), b.shares.tolist(), strict=True)]}
            for b in audit.blocks]


def pair_dicts(audit: Audit, p: Pairs) -> list[dict[str, Any]]:
    urls = audit.urls
    return [{"url_a": urls[a], "url_b": urls[b], "jaccard": round(j, 4), "in": round(i, 4),
             "out": round(o, 4)}
            for a, b, j, i, o in zip(p.a.tolist(), p.b.tolist(), audit.jaccard(p).tolist(),
                                     audit.inside(p).tolist(), audit.outside(p).tolist(),
                                     strict=True)]


def as_json(audit: Audit, sample: Pairs, params: dict[str, Any], bins: int = 10,
            everything: bool = False, progress: Progress = no_progress) -> dict[str, Any]:
    """The whole audit as one JSON document."""
    urls = audit.urls
    templates = [template_runs(audit, c) for c in counted(audit.clusters, "writing json",
                                                         progress)]
    return {
        "params": params,
        "method": audit.method,
        "lsh": {"bands": audit.lsh[0], "rows": audit.lsh[1], "candidates": audit.candidates}
        if audit.lsh else None,
        "pages": len(urls),
        "without_text": audit.skipped,
        "excluded": audit.excluded,
        "pairs": pair_dicts(audit, written_pairs(audit, everything)),
        "histogram": [{"low": lo, "high": hi, "pages": c}
                      for lo, hi, c in histogram(audit.best_containment(), bins)],
        "clusters": [{"representative": urls[c.rep], "pages": [urls[i] for i in c.members],
                      "template_shares": [round(x, 4) for x in c.shares.tolist()],
                      "template": t} for c, t in zip(audit.clusters, templates, strict=True)],
        "multi_template": [{"url": urls[m.page], "parts": [urls[p] for p in m.parts],
                            "covered": round(m.covered, 4)} for m in audit.multi],
        "shared_blocks": block_dicts(audit),
        "verdicts": list(verdict_rows(audit, verdicts(audit))),
        "comparison": None if audit.compared is None else {
            "with": audit.compared[0], "summary": summary(audit.compared[1]),
            "clusters": [c.as_json() for c in audit.compared[1]]},
        "sample": pair_dicts(audit, sample),
    }


def counted(items: list[T], stage: str, progress: Progress) -> Iterator[T]:
    """The items, with progress every 200 and at the end."""
    for n, item in enumerate(items):
        if n % 200 == 0:
            progress(stage, n, len(items))
        yield item
    progress(stage, len(items), len(items))


class SignatureWriter:
    """--signatures FILE: one JSON line per page with words, written as signatures stream:
    {"url", "minhash": {"values", "shingles", "width", "seed"}}, the `minhash` object a
    /v1/rerank document may carry (docs/near-duplicates.md, "Exporting signatures")."""

    def __init__(self, path: Path, width: int, seed: int = minhash.DEFAULT_SEED) -> None:
        self._file = path.open("wb")
        self._width, self._seed = width, seed
        self.written = 0

    def __call__(self, audit: Audit, first: int, rows: np.ndarray) -> None:
        for n, row in enumerate(rows, first):
            doc = {"url": audit.urls[n], "minhash": {
                "values": row, "shingles": int(audit.sizes[n]), "width": self._width,
                "seed": self._seed}}
            self._file.write(orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        self.written += len(rows)

    def close(self) -> None:
        self._file.close()


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write the JSON report (UTF-8, indented)."""
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
