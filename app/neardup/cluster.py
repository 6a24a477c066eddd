"""Clusters that mean "pages made from one template", and pages that hold several templates.

A page joins a cluster when a large share of *its own* text is the cluster's template. Two
pages are linked only when each holds at least the threshold's share of its own shingles
in the other (`links`): a four-line notice quoted by forty long pages is all of the
notice's page but 1 % of each long page, so it links none of them (it is a shared block,
app/neardup/blocks.py). A cluster is a representative page and the linked pages whose own
text is mostly the template: the representative's shingles that at least TEMPLATE_SHARE
of the members hold. Representatives are taken in order of how many pages they link, and a
cluster is a star around its representative, so no chain of overlaps joins two unrelated
templates through a third page.

Before a page becomes a representative its shared parts are checked against every page it
links, largest part first, with no sample: if two of them share disjoint parts of it (each
at least MIN_PART shingles, overlapping by at most DISJOINT of the smaller), the page holds
several templates (a page made of two others, or an index such as `print.html` that holds
them all). Such a page is reported as multi-template and neither leads nor joins a cluster,
nor counts as a part of another page: pages are checked largest first, so an index holding
every page is found before the pages it would otherwise stand for.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

MIN_PART = 10  # shingles: a shared part of fewer (under ~20 words) is too short to count
DISJOINT = 0.2  # two shared parts overlapping by at most this share of the smaller are disjoint
TEMPLATE_SHARE = 0.5  # a representative's shingle is template text if this share of members hold it
CHUNK = 256  # pages whose shared parts with one page are held at once

Shared = Callable[[int, np.ndarray], np.ndarray]  # (page, others) -> bool (len(others), |page|)
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class Cluster:
    """A representative page and the pages made from its template (rep first)."""

    members: list[int]
    template: np.ndarray  # bool per shingle of the representative: held by most members
    shares: np.ndarray  # per member: the share of its own shingles that are template text

    @property
    def rep(self) -> int:
        return self.members[0]


@dataclass(frozen=True, slots=True)
class MultiTemplate:
    """A page holding several templates: pages that share disjoint parts of it."""

    page: int
    parts: list[int]
    covered: float  # the share of the page's shingles that some page it links holds


@dataclass(frozen=True, slots=True)
class Links:
    """Pages linked both ways at the threshold, as adjacency: page i's linked pages are
    `pages[start[i]:start[i + 1]]`, sharing `both[...]` shingles with it."""

    start: np.ndarray
    pages: np.ndarray
    both: np.ndarray

    def of(self, page: int) -> tuple[np.ndarray, np.ndarray]:
        at = slice(self.start[page], self.start[page + 1])
        return self.pages[at], self.both[at]

    def degree(self) -> np.ndarray:
        return np.diff(self.start)


def _no_progress(stage: str, done: int, total: int) -> None:
    return None


def numbered(n: int, found: list[Cluster]) -> np.ndarray:
    """Each of n pages' cluster number (1 = the first of `found`), 0 for none."""
    of = np.zeros(n, dtype=np.int64)
    for c, cluster in enumerate(found, 1):
        of[cluster.members] = c
    return of


def _may_be_disjoint(part: np.ndarray | int, taken: int, size: int) -> np.ndarray | bool:
    """Whether a part of `part` shingles can be disjoint from one of `taken` in a page of
    `size`: two parts overlap by at least their sizes less the page's."""
    return part + taken - size <= DISJOINT * np.minimum(part, taken)


def links(n: int, a: np.ndarray, b: np.ndarray, both: np.ndarray) -> Links:
    """Adjacency of the pairs (a, b) sharing `both` shingles (the pairs already cut to the
    ones each of whose pages holds the threshold's share of itself in the other)."""
    src = np.concatenate([a, b]).astype(np.int64)
    dst = np.concatenate([b, a]).astype(np.int64)
    shared = np.concatenate([both, both]).astype(np.int64)
    order = np.argsort(src, kind="stable")
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=start[1:])
    return Links(start, dst[order], shared[order])


def _chunks(page: int, others: np.ndarray, shared: Shared) -> Iterator[tuple[int, np.ndarray]]:
    """(first, masks) of `others` CHUNK at a time: which of page's shingles each holds."""
    for first in range(0, others.size, CHUNK):
        yield first, shared(page, others[first:first + CHUNK])


def disjoint_parts(page: int, size: int, others: np.ndarray, both: np.ndarray,
                   shared: Shared) -> tuple[list[int], float]:
    """Pages among `others` (sharing `both` shingles with `page`, of `size`) that share
    mutually disjoint parts of it, largest first, and the share of the page those parts
    cover together. Every page is looked at: none is missed by sampling."""
    keep = both >= MIN_PART
    others, both = others[keep], both[keep]
    order = np.lexsort((others, -both))
    others, both = others[order], both[order]
    # Each shingle of the page is marked with the first part taken that holds it, so a
    # page's overlap with every part taken is one count over its own shared shingles
    # (parts may overlap by DISJOINT: a shingle in two is counted for the first only).
    owner = np.full(size, -1, dtype=np.int64)
    part_sizes: list[int] = []
    taken: list[int] = []
    first = 0
    while first < others.size:
        # The first page alone, then CHUNK at a time: after a template's first page is
        # taken as a part, the rest of it is passed over below without a mask.
        rows = np.arange(first, min(first + (CHUNK if part_sizes else 1), others.size))
        first = rows[-1] + 1
        # A page that cannot be disjoint from a part taken is passed over without its mask.
        for taken_part in part_sizes:
            rows = rows[_may_be_disjoint(both[rows], taken_part, size)]
        if rows.size == 0:
            continue
        for row, mask in zip(rows.tolist(), shared(page, others[rows]), strict=True):
            part = int(both[row])
            if not all(_may_be_disjoint(part, p, size) for p in part_sizes):
                continue  # a part taken in this chunk already rules it out
            owners = owner[mask]
            overlap = np.bincount(owners[owners >= 0], minlength=len(part_sizes))
            if all(overlap[p] <= DISJOINT * min(part, part_sizes[p])
                   for p in np.flatnonzero(overlap)):
                owner[mask & (owner < 0)] = len(part_sizes)
                part_sizes.append(part)
                taken.append(int(others[row]))
    return taken, float(np.count_nonzero(owner >= 0) / max(size, 1))


def multi_templates(n: int, contained: Links, sizes: np.ndarray, threshold: float,
                    shared: Shared, progress: Progress = _no_progress) -> list[MultiTemplate]:
    """Pages that hold several templates: two or more pages hold disjoint parts of them that
    together are the threshold's share of the page, and not exactly one of those parts is
    that share alone (that page's template is the page's own; `contained` links the pages
    where one holds the threshold's share of the other). Two parts each the threshold's
    share make a page multi-template: it would link two templates' pages."""
    found = []
    degree = contained.degree()
    check = np.flatnonzero(degree >= 2)
    check = check[np.argsort(-sizes[check], kind="stable")]  # an index before its pages
    is_multi = np.zeros(n, dtype=bool)
    progress("multi-template", 0, check.size)
    for done, page in enumerate(check.tolist(), 1):
        near, both = contained.of(page)
        near, both = near[~is_multi[near]], both[~is_multi[near]]
        size = int(sizes[page])
        parts, covered = disjoint_parts(page, size, near, both, shared)
        big = sum(1 for p in parts if both[near == p][0] >= threshold * size)
        if len(parts) >= 2 and covered >= threshold and big != 1:
            found.append(MultiTemplate(page, parts, covered))
            is_multi[page] = True
        if done % 500 == 0:
            progress("multi-template", done, check.size)
    progress("multi-template", check.size, check.size)
    found.sort(key=lambda m: m.page)
    return found


def template_of(rep: int, members: np.ndarray, shared: Shared) -> tuple[np.ndarray, np.ndarray]:
    """The representative's shingles that at least TEMPLATE_SHARE of `members` hold, and
    how many of them each member holds (every member counted, a chunk at a time)."""
    held: np.ndarray | None = None
    for _, masks in _chunks(rep, members, shared):
        counts = masks.sum(axis=0, dtype=np.int64)
        held = counts if held is None else held + counts
    if held is None:
        return np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64)
    template: np.ndarray = held >= TEMPLATE_SHARE * members.size
    each = np.concatenate([(masks & template).sum(axis=1) for _, masks
                           in _chunks(rep, members, shared)])
    return template, each


def clusters(n: int, linked: tuple[np.ndarray, np.ndarray, np.ndarray],
             contained: tuple[np.ndarray, np.ndarray, np.ndarray], sizes: np.ndarray,
             threshold: float, shared: Shared, progress: Progress = _no_progress,
             ) -> tuple[list[Cluster], list[MultiTemplate]]:
    """Clusters of the `linked` pairs (a, b, shared shingles), largest first, and the pages
    found to hold several templates among the `contained` pairs. `sizes` are the pages'
    shingle counts."""
    multi = multi_templates(n, links(n, *contained), sizes, threshold, shared, progress)
    is_multi = np.zeros(n, dtype=bool)
    is_multi[[m.page for m in multi]] = True
    graph = links(n, *linked)
    degree = graph.degree()
    order = np.argsort(-degree, kind="stable")
    order = order[(degree[order] > 0) & ~is_multi[order]]
    progress("clustering", 0, order.size)
    cluster_of = np.full(n, -1, dtype=np.int64)
    found: list[Cluster] = []
    for done, page in enumerate(order.tolist(), 1):
        if done % 500 == 0:
            progress("clustering", done, order.size)
        if cluster_of[page] >= 0:
            continue
        near, _ = graph.of(page)
        candidates = near[(cluster_of[near] < 0) & ~is_multi[near]]
        if candidates.size == 0:
            continue
        template, held = template_of(page, candidates, shared)
        own = held / sizes[candidates]
        rep_share = float(template.mean()) if template.size else 0.0
        joined = own >= threshold
        if rep_share < threshold or not joined.any():
            continue
        by_page = np.argsort(candidates[joined])
        members = candidates[joined][by_page]
        shares = np.concatenate([[rep_share], own[joined][by_page]])
        cluster_of[page] = cluster_of[members] = len(found)
        found.append(Cluster([page, *members.tolist()], template, shares))
    found.sort(key=lambda c: (-len(c.members), c.rep))
    progress("clustering", order.size, order.size)
    return found, multi
