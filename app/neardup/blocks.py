"""Shared blocks: text that several pages quote word for word (a notice, a disclaimer, an
included file) as a small part of most of them. Such pages are not made from one template
and are never clustered for it (app/neardup/cluster.py links pages only by their own
shares); the block is reported instead, with the pages that carry it and each one's share.

Every shingle of the site is listed with the pages that hold it (the engine's
`NearDupSets.postings`, one sort of (shingle, page) pairs); shingles held by the very same
BLOCK_PAGES or more pages form one group. A group is a block when its pages are not all in
one cluster (there it is the cluster's template: most of its pages are that cluster's
members, and none is another's) and it is less than the threshold's share
of the page carrying it at the median; groups whose pages nearly coincide (a notice that one
page quotes with a word changed) are merged into one block.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from app.neardup.cluster import MIN_PART, Cluster, Progress, numbered
from app.neardup.site import Site

BLOCK_PAGES = 3  # a block is text at least this many pages hold
MERGE = 0.8  # groups whose pages overlap by this share of the larger are one block


@dataclass(frozen=True, slots=True)
class Block:
    """Text that `pages` all quote: its shingles and each page's share of its own text."""

    pages: np.ndarray  # int64, ascending
    shares: np.ndarray  # per page: the share of its shingles that are the block's
    shingles: np.ndarray  # uint64, the block's

    @property
    def source(self) -> int:
        """The page whose text shows the block best: the one it is the largest share of."""
        return int(self.pages[int(np.argmax(self.shares))])


def postings(site: Site) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """(per page: shingles no other page holds, [(pages, shingles) of each group])."""
    unique, page_ends, held, shingle_ends, hashes = site.sets.postings(
        site.ids.astype("<u4").tobytes(), BLOCK_PAGES, MIN_PART)
    pages = np.frombuffer(held, dtype=np.uint32).astype(np.int64)
    shingles = np.frombuffer(hashes, dtype=np.uint64)
    p_ends = np.frombuffer(page_ends, dtype=np.uint64).astype(np.int64)
    s_ends = np.frombuffer(shingle_ends, dtype=np.uint64).astype(np.int64)
    p_starts = np.concatenate([[0], p_ends]).astype(np.int64)[:-1]
    s_starts = np.concatenate([[0], s_ends]).astype(np.int64)[:-1]
    groups = [(pages[a:b], shingles[c:d]) for a, b, c, d
              in zip(p_starts, p_ends, s_starts, s_ends, strict=True)]
    return np.frombuffer(unique, dtype=np.uint32).astype(np.int64), groups


def shared_blocks(site: Site, clusters: list[Cluster], threshold: float,
                  progress: Progress) -> tuple[list[Block], np.ndarray]:
    """The site's shared blocks, those quoted by the most pages first, and each page's
    count of shingles no other page holds."""
    progress("blocks", 0, 1)
    unique, groups = postings(site)
    cluster_of = numbered(site.sizes.size, clusters) - 1  # -1: in none
    sizes = site.sizes
    groups.sort(key=lambda g: (-g[0].size, -g[1].size, int(g[0][0])))
    merged: list[tuple[set[int], list[np.ndarray], dict[int, int]]] = []
    by_page: dict[int, list[int]] = defaultdict(list)
    for pages, shingles in groups:
        mine = set(pages.tolist())
        into = None
        for b in sorted({b for p in pages[:3].tolist() for b in by_page[p]}):
            theirs = merged[b][0]
            if len(mine & theirs) >= MERGE * max(len(mine), len(theirs)):
                into = b
                break
        if into is None:
            merged.append((mine, [shingles], dict.fromkeys(mine, shingles.size)))
            for p in mine:
                by_page[p].append(len(merged) - 1)
            continue
        holders, parts, held = merged[into]
        parts.append(shingles)
        for p in mine:
            held[p] = held.get(p, 0) + shingles.size
            if p not in holders:
                holders.add(p)
                by_page[p].append(into)
    blocks = []
    for holders, parts, held in merged:
        pages = np.array(sorted(holders), dtype=np.int64)
        owners = cluster_of[pages]
        clustered = owners[owners >= 0]
        if clustered.size * 2 >= pages.size and (clustered == clustered[0]).all():
            continue  # a cluster's template text (and a page or two holding part of it)
        shares = np.minimum(np.array([held[p] for p in pages.tolist()]) / sizes[pages], 1.0)
        if pages.size < BLOCK_PAGES or np.median(shares) >= threshold:
            continue  # most of its pages' text: a template, not a quoted block
        blocks.append(Block(pages, shares, np.sort(np.concatenate(parts))))
    blocks.sort(key=lambda b: (-b.pages.size, -b.shingles.size, int(b.pages[0])))
    progress("blocks", 1, 1)
    return blocks, unique


def block_share(pages: int, blocks: list[Block]) -> np.ndarray:
    """Per page: the share of its shingles that are in a shared block."""
    held = np.zeros(pages)
    for block in blocks:
        held[block.pages] += block.shares
    return np.minimum(held, 1.0)
