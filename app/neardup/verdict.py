"""A verdict per page: what a site owner should do with it, and why.

- `canonical`: a cluster member other than the representative with DUPLICATE or more of
  its text inside the representative: point `rel=canonical` to `target`, the
  representative (or remove the page).
- `rewrite`: a cluster member whose own text is mostly the template, or a page holding
  parts of several templates that other pages cover less than DUPLICATE of: write text
  of its own.
- `merge`: in no cluster, but DUPLICATE or more of its text inside one other page (a thin
  page, a fragment of a longer one): merge it into `target`.
- `noindex`: mostly shared blocks (an included notice, a disclaimer's own page), or
  holding parts of several templates that other pages cover (an index such as
  `print.html`): keep it out of the index.
- `ok`: anything else, and the representative of a cluster whose other pages are all
  `canonical` (the page they point to).

A page holding several templates is nobody's nearest page and no page's target: an index
such as `print.html` holds every page, and would otherwise be each one's nearest.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.neardup.blocks import block_share
from app.neardup.cluster import numbered
from app.neardup.dupes import Audit

DUPLICATE = 0.9  # this share of a page inside another makes it a copy of that page

RECOMMENDATIONS = ("canonical", "rewrite", "merge", "noindex", "ok")


@dataclass(frozen=True, slots=True)
class Verdicts:
    """Per page (the audit's order): its cluster number (0 for none), shares of its own
    shingles, nearest page and the recommendation with its target (-1 for none)."""

    cluster: np.ndarray
    template_share: np.ndarray
    block_share: np.ndarray
    unique_share: np.ndarray
    nearest: np.ndarray
    nearest_share: np.ndarray
    multi: np.ndarray  # bool: holds parts of several templates
    recommendation: list[str]
    target: np.ndarray


def verdicts(audit: Audit) -> Verdicts:
    """The audit's verdicts, worked out on the first call."""
    judged = audit.judged
    if not isinstance(judged, Verdicts):
        judged = audit.judged = _verdicts(audit)
    return judged


def _verdicts(audit: Audit) -> Verdicts:
    n = len(audit.urls)
    cluster = numbered(n, audit.clusters)
    template = np.zeros(n)
    rep_of = np.full(n, -1, dtype=np.int64)
    for cl in audit.clusters:
        template[cl.members] = cl.shares
        rep_of[cl.members] = cl.rep
    blocks = block_share(n, audit.blocks)
    # --reworded compares only words two or more pages use: no page has any of its own
    unique = (np.full(n, np.nan) if audit.reworded or not audit.unique.size
              else audit.unique / np.maximum(audit.sizes, 1))
    covered = {m.page: m.covered for m in audit.multi}
    multi = np.zeros(n, dtype=bool)
    multi[list(covered)] = True
    nearest, near = audit.nearest(skip=multi)
    in_rep = _inside_representatives(audit, rep_of)
    advice, target = ["ok"] * n, np.full(n, -1, dtype=np.int64)
    for i in range(n):
        if cluster[i]:
            if rep_of[i] != i and in_rep[i] >= DUPLICATE:
                advice[i], target[i] = "canonical", rep_of[i]
            elif template[i] >= audit.threshold:
                advice[i] = "rewrite"
        elif i in covered:
            advice[i] = "noindex" if covered[i] >= DUPLICATE else "rewrite"
        elif blocks[i] >= audit.threshold:
            advice[i] = "noindex"
        elif near[i] >= DUPLICATE:
            advice[i], target[i] = "merge", nearest[i]
    for cl in audit.clusters:  # the page every other member points to is the one to keep
        if all(advice[m] == "canonical" for m in cl.members[1:]):
            advice[cl.rep] = "ok"
    return Verdicts(cluster, template, blocks, unique, nearest, near, multi, advice, target)


def _inside_representatives(audit: Audit, rep_of: np.ndarray) -> np.ndarray:
    """Per page: the share of it inside its cluster's representative (0 outside one)."""
    share = np.zeros(len(audit.urls))
    members = np.flatnonzero((rep_of >= 0) & (rep_of != np.arange(rep_of.size)))
    if members.size:
        both = audit.site.intersections(members, rep_of[members])
        share[members] = both / np.maximum(audit.sizes[members], 1)
    return share
