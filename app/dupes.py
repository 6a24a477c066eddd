"""`rearrange dupes`: find templated near-duplicate pages on a site (seed 000).

Pages come from a JSON-lines file of {url, text} or a folder of saved HTML pages (main text
extracted with trafilatura, without menus and footers). Every pair of pages gets the
seed's three numbers: Jaccard, `in` (share of the first page inside the second) and `out`
(share of the second inside the first). Up to --exact-max pages every pair is compared
exactly; above that, MinHash LSH proposes candidate pairs and each candidate is then
scored exactly on its shingle sets, so reported numbers are never estimates.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson

from app import minhash, shingles
from app.errors import RearrangeError

EXACT_MAX = 2000  # all-pairs up to this: 2M pairs, ~20 s on one core (bench/dupes_audit.py)
HTML_SUFFIXES = (".html", ".htm")


class AuditInputError(RearrangeError):
    """Unreadable input: names the file and line."""


@dataclass(slots=True)
class Page:
    """One page: where it came from and the shingle hashes of its main text."""

    url: str
    shingles: np.ndarray  # sorted unique uint64


@dataclass(frozen=True, slots=True)
class Pair:
    """Two pages (a before b in the input) and the seed's three numbers."""

    a: int
    b: int
    jaccard: float
    inside: float  # share of a's shingles in b (the seed's `in`)
    outside: float  # share of b's shingles in a (the seed's `out`)

    def value(self, measure: str) -> float:
        """The number the threshold applies to: Jaccard, or the larger containment."""
        return self.jaccard if measure == "jaccard" else max(self.inside, self.outside)


@dataclass(slots=True)
class Audit:
    """Everything the report needs."""

    pages: list[Page]
    skipped: list[str]  # URLs without any words of main text
    pairs: list[Pair]
    method: str
    measure: str
    threshold: float
    lsh: tuple[int, int] | None = None  # (bands, rows) when MinHash LSH proposed the pairs
    candidates: int = 0
    clusters: list[list[int]] = field(default_factory=list)


Progress = Callable[[str, int, int], None]  # (stage, done, total)


def _no_progress(stage: str, done: int, total: int) -> None:
    return None


# --- reading pages --------------------------------------------------------------------


def read_pages(path: Path, canonical_urls: bool = False) -> Iterator[tuple[str, str]]:
    """(url, main text) from a JSON-lines file or a folder of saved HTML pages.

    A saved page is named by its path inside the folder, or with canonical_urls by the
    URL it declares (`<link rel=canonical>`, `og:url`) when it declares one.
    """
    if path.is_dir():
        yield from _read_html_folder(path, canonical_urls)
    elif path.is_file():
        yield from _read_jsonl(path)
    else:
        raise AuditInputError(f"{path}: no such file or folder")


def _read_jsonl(path: Path) -> Iterator[tuple[str, str]]:
    with path.open("rb") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise AuditInputError(f"{path}:{n}: not valid JSON: {exc}") from None
            if not isinstance(row, dict):
                raise AuditInputError(f"{path}:{n}: expected an object {{url, text}}")
            url, text = row.get("url"), row.get("text")
            if not isinstance(url, str) or not url:
                raise AuditInputError(f"{path}:{n}: `url` must be a non-empty string")
            if text is not None and not isinstance(text, str):
                raise AuditInputError(f"{path}:{n}: `text` must be a string")
            yield url, text or ""


def _read_html_folder(path: Path, canonical_urls: bool) -> Iterator[tuple[str, str]]:
    try:
        import trafilatura
    except ImportError:
        raise AuditInputError(
            "reading saved HTML needs trafilatura, which is not installed: "
            "pip install 'rearrange[audit]' (or give a JSON-lines file of {url, text})"
        ) from None
    files = sorted(p for p in path.rglob("*") if p.suffix.lower() in HTML_SUFFIXES)
    if not files:
        raise AuditInputError(f"{path}: no .html or .htm files in this folder")
    for file in files:
        html = file.read_bytes().decode("utf-8", errors="replace")
        doc = trafilatura.bare_extraction(html, with_metadata=canonical_urls,
                                          include_comments=False, include_tables=True,
                                          favor_precision=True)
        url = file.relative_to(path).as_posix()
        if canonical_urls and doc is not None and doc.url:
            url = doc.url
        yield url, (doc.text or "") if doc is not None else ""


# --- the audit ------------------------------------------------------------------------


def count_pages(path: Path) -> int:
    """How many pages read_pages will yield at most (for progress), cheaply."""
    if path.is_dir():
        return sum(1 for p in path.rglob("*") if p.suffix.lower() in HTML_SUFFIXES)
    with path.open("rb") as fh:
        return sum(1 for line in fh if line.strip())


def audit(texts: Iterable[tuple[str, str]], width: int = shingles.DEFAULT_WIDTH,
          measure: str = "containment", threshold: float = shingles.DEFAULT_THRESHOLD,
          method: str = "auto", exact_max: int = EXACT_MAX, k: int = minhash.DEFAULT_K,
          max_size_ratio: float = 2.0, progress: Progress = _no_progress,
          total: int = 0) -> Audit:
    """Shingle every page, find the pairs that share text, cluster at the threshold."""
    if measure not in shingles.MEASURES:
        raise ValueError(f"measure must be one of {shingles.MEASURES}")
    pages: list[Page] = []
    skipped: list[str] = []
    for n, (url, text) in enumerate(texts):
        hashes = np.fromiter(shingles.shingles(text, width), dtype=np.uint64)
        if hashes.size:
            hashes.sort()
            pages.append(Page(url, hashes))
        else:
            skipped.append(url)
        if n % 200 == 0:
            progress("reading", n, max(total, n))
    progress("reading", len(pages) + len(skipped), len(pages) + len(skipped))
    if method == "auto":
        method = "exact" if len(pages) <= exact_max else "minhash"
    result = Audit(pages, skipped, [], method, measure, threshold)
    if method == "exact":
        result.pairs = _exact_pairs(pages, progress)
    else:
        _lsh_pairs(result, k, max_size_ratio, progress)
    result.clusters = clusters(len(pages), result.pairs, measure, threshold)
    return result


def _overlap(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.intersect1d(a, b, assume_unique=True).size)


def _pair(pages: Sequence[Page], i: int, j: int, inter: int) -> Pair:
    na, nb = pages[i].shingles.size, pages[j].shingles.size
    return Pair(i, j, inter / (na + nb - inter), inter / na, inter / nb)


def _exact_pairs(pages: Sequence[Page], progress: Progress) -> list[Pair]:
    """Every pair that shares a shingle; every pair at all when there are few (as the seed)."""
    n = len(pages)
    sets = [frozenset(p.shingles.tolist()) for p in pages]
    keep_zero = n * (n - 1) // 2 <= 1000
    pairs = []
    for i in range(n):
        a = sets[i]
        for j in range(i + 1, n):
            inter = len(a & sets[j])
            if inter or keep_zero:
                pairs.append(_pair(pages, i, j, inter))
        progress("comparing", i + 1, n)
    return pairs


def lsh_jaccard_floor(measure: str, threshold: float, max_size_ratio: float) -> float:
    """The lowest Jaccard a pair meeting the threshold can have, for LSH to aim at.

    A share t of page A inside page B with |B| <= R |A| means J >= t / (1 + R - t);
    pairs of pages whose sizes differ by more than R can be missed (README).
    """
    if measure == "jaccard":
        return threshold
    return threshold / (1.0 + max_size_ratio - threshold)


def _lsh_pairs(result: Audit, k: int, max_size_ratio: float, progress: Progress) -> None:
    pages = result.pages
    matrix = np.empty((len(pages), k), dtype=np.uint64)
    for i, page in enumerate(pages):
        matrix[i] = minhash.signature(page.shingles, k).values
        if i % 500 == 0:
            progress("signatures", i, len(pages))
    progress("signatures", len(pages), len(pages))
    floor = lsh_jaccard_floor(result.measure, result.threshold, max_size_ratio)
    bands, rows = minhash.bands_for(floor, k)
    candidates = minhash.candidate_pairs(
        matrix, bands, rows, lambda done, total: progress("banding", done, total))
    result.lsh, result.candidates = (bands, rows), len(candidates)
    pairs = []
    for n, (i, j) in enumerate(candidates.tolist()):
        inter = _overlap(pages[i].shingles, pages[j].shingles)
        if inter:
            pairs.append(_pair(pages, i, j, inter))
        if n % 2000 == 0:
            progress("verifying", n, len(candidates))
    progress("verifying", len(candidates), len(candidates))
    result.pairs = pairs


def clusters(n: int, pairs: Sequence[Pair], measure: str, threshold: float) -> list[list[int]]:
    """Groups of pages joined by pairs at or over the threshold (union-find), largest first."""
    parent = list(range(n))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for p in pairs:
        if p.value(measure) >= threshold:
            ra, rb = root(p.a), root(p.b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(root(i), []).append(i)
    found = [g for g in groups.values() if len(g) > 1]
    found.sort(key=lambda g: (-len(g), g[0]))
    return found


def best_containment(n: int, pairs: Sequence[Pair]) -> np.ndarray:
    """For each page, the largest share of it found inside any one other page."""
    best = np.zeros(n)
    for p in pairs:
        best[p.a] = max(best[p.a], p.inside)
        best[p.b] = max(best[p.b], p.outside)
    return best


def histogram(values: np.ndarray, bins: int = 10) -> list[tuple[float, float, int]]:
    """(low, high, count) over [0, 1] in equal bins; 1.0 falls in the last one."""
    counts, edges = np.histogram(np.clip(values, 0.0, 1.0), bins=bins, range=(0.0, 1.0))
    return [(float(edges[i]), float(edges[i + 1]), int(c)) for i, c in enumerate(counts)]


def near_threshold(pairs: Sequence[Pair], measure: str, threshold: float, n: int,
                   margin: float = 0.1, seed: int = 0) -> list[Pair]:
    """Up to n random pairs within ±margin of the threshold, to open and judge by eye."""
    close = [p for p in pairs if abs(p.value(measure) - threshold) <= margin]
    picked = random.Random(seed).sample(close, min(n, len(close)))
    return sorted(picked, key=lambda p: -p.value(measure))
