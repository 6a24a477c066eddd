"""Clusters that mean "pages made from one template", and pages that hold several templates.

A cluster is a representative page and the pages that match *it* at the threshold, so no
chain of overlaps joins two unrelated templates through a third page. Representatives are
taken in order of how many pages they match. Before a page becomes one, its shared parts
are checked: if two of the pages it matches share disjoint parts of it (each at least
MIN_PART shingles, overlapping by at most DISJOINT of the smaller), the page holds several
templates (a page made of two others, or an index such as `print.html` that holds them
all). Such a page is reported as multi-template and neither leads nor joins a cluster; a
member that matches the representatives of other clusters by disjoint parts is taken out
the same way.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

MIN_PART = 10  # shingles: a shared part of fewer (under ~20 words) is too short to count
DISJOINT = 0.2  # two shared parts overlapping by at most this share of the smaller are disjoint
SAMPLE = 64  # pages a page's shared parts are checked against, at most
TEMPLATE_SHARE = 0.5  # a representative's shingle is template text if this share of members hold it

Shared = Callable[[int, np.ndarray], np.ndarray]  # (page, others) -> bool (len(others), |page|)
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class Cluster:
    """A representative page and the pages that match it at the threshold (rep first)."""

    members: list[int]
    template: np.ndarray  # bool per shingle of the representative: held by most members

    @property
    def rep(self) -> int:
        return self.members[0]


@dataclass(frozen=True, slots=True)
class MultiTemplate:
    """A page holding several templates: pages that share disjoint parts of it."""

    page: int
    parts: list[int]


def _no_progress(stage: str, done: int, total: int) -> None:
    return None


def adjacency(n: int, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, neighbours): page i's neighbours are neighbours[start[i]:start[i + 1]]."""
    src = np.concatenate([a, b]).astype(np.int64)
    dst = np.concatenate([b, a]).astype(np.int64)
    order = np.argsort(src, kind="stable")
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=start[1:])
    return start, dst[order]


def _sample(others: np.ndarray, page: int) -> np.ndarray:
    if others.size <= SAMPLE:
        return others
    rng = np.random.default_rng(page)
    return np.sort(rng.choice(others, SAMPLE, replace=False))


def disjoint_parts(page: int, others: np.ndarray, shared: Shared) -> list[int]:
    """Pages among `others` sharing mutually disjoint parts of `page` (two or more), or []."""
    if others.size < 2:
        return []
    others = _sample(others, page)
    masks = shared(page, others)
    sizes = masks.sum(axis=1)
    keep = sizes >= MIN_PART
    if keep.sum() < 2:
        return []
    masks, others, sizes = masks[keep], others[keep], sizes[keep]
    f = masks.astype(np.float32)
    overlap = f @ f.T
    disjoint = overlap <= DISJOINT * np.minimum.outer(sizes, sizes)
    if not disjoint.any():
        return []
    parts: list[int] = []  # greedily, largest part first, each disjoint from those taken
    for n in np.argsort(-sizes, kind="stable"):
        if all(disjoint[n, m] for m in parts):
            parts.append(int(n))
    return [int(others[n]) for n in parts] if len(parts) >= 2 else []


def template_mask(rep: int, members: list[int], shared: Shared) -> np.ndarray:
    """The representative's shingles that at least TEMPLATE_SHARE of the members hold."""
    others = _sample(np.asarray(members[1:], dtype=np.int64), rep)
    mask: np.ndarray = shared(rep, others).mean(axis=0) >= TEMPLATE_SHARE
    return mask


def clusters(n: int, a: np.ndarray, b: np.ndarray, shared: Shared,
             progress: Progress = _no_progress) -> tuple[list[Cluster], list[MultiTemplate]]:
    """Clusters of the pairs (a, b) at the threshold, largest first, and the pages found to
    hold several templates."""
    start, nbrs = adjacency(n, a, b)
    degree = np.diff(start)
    order = np.argsort(-degree, kind="stable")
    order = order[degree[order] > 0]
    progress("clustering", 0, order.size)
    cluster_of = np.full(n, -1, dtype=np.int64)
    is_multi = np.zeros(n, dtype=bool)
    multi: dict[int, list[int]] = {}
    groups: list[list[int]] = []
    for done, page in enumerate(order.tolist(), 1):
        if done % 500 == 0:
            progress("clustering", done, order.size)
        if cluster_of[page] >= 0:
            continue
        near = nbrs[start[page]:start[page + 1]]
        near = near[~is_multi[near]]
        parts = disjoint_parts(page, near, shared)
        if parts:
            multi[page], is_multi[page] = parts, True
            continue
        free = near[cluster_of[near] < 0]
        if free.size == 0:
            continue
        cluster_of[page] = cluster_of[free] = len(groups)
        groups.append([page, *sorted(free.tolist())])
    _take_out_members(groups, cluster_of, start, nbrs, shared, multi)
    found = [Cluster(g, template_mask(g[0], g, shared)) for g in groups if len(g) > 1]
    found.sort(key=lambda c: (-len(c.members), c.rep))
    progress("clustering", order.size, order.size)
    return found, [MultiTemplate(p, parts) for p, parts in sorted(multi.items())]


def _take_out_members(groups: list[list[int]], cluster_of: np.ndarray, start: np.ndarray,
                      nbrs: np.ndarray, shared: Shared, multi: dict[int, list[int]]) -> None:
    """Members matching other clusters' representatives by disjoint parts leave their own."""
    reps = np.full(cluster_of.size, False)
    reps[[g[0] for g in groups]] = True
    for c, group in enumerate(groups):
        for page in group[1:]:
            near = nbrs[start[page]:start[page + 1]]
            near = near[reps[near]]
            if near.size < 2:
                continue
            parts = disjoint_parts(page, near, shared)
            if parts:
                multi[page] = parts
                cluster_of[page] = -1
        groups[c] = [p for p in group if cluster_of[p] == c]
