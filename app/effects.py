"""What a rule did to the top of the page: position moves and top-10 churn, per rule call.

The runner calls these for every rule call that produced records, applied or shadow, so
the metrics can say what each rule did (or would have done) to what users see first.
"""
from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.pipeline import Doc

TOP = 10  # the window of the per-rule position and churn figures: what a user sees first

_score = attrgetter("score")  # a C getter: sorting 100 docs calls it 100 times


def by_score(docs: list[Doc]) -> list[Doc]:
    """Stably sorted by score, best first (reverse=True keeps ties in their order)."""
    return sorted(docs, key=_score, reverse=True)


def effect(before: list[Doc], after: list[Doc], resort: bool) -> tuple[tuple[int, ...], int]:
    """What a rule did (or would have done) to the top of the page: (moves, churn).

    In `rerank` both sides are stably sorted first, so a rescore is judged by the order it
    would produce; shadow runs are judged the same way on their discarded output. Other
    phases keep the order of what they keep, so there the old positions are found by one
    forward walk that stops at the 10th kept document.
    """
    if resort:
        return compare_ranked(by_score(before), by_score(after))
    if len(after) == len(before):
        return (), 0  # order kept and nobody left: labels, or collapses of nothing
    top = after[:TOP]
    if top == before[:len(top)]:
        # The top is untouched (a trim, or removals below it): compared by identity first,
        # a kept document costs no __eq__; a rebuilt one equal in every field moved nowhere.
        return (), 0
    moves: list[int] = []
    churn, j, n = 0, 0, len(before)
    for i, d in enumerate(top):
        while j < n and before[j] is not d and before[j].id != d.id:
            j += 1
        if j == n:  # not order-preserving after all: fall back to a full index
            index = {b.id: k for k, b in enumerate(before)}
            return _tally(top, {t.id: index.get(t.id, TOP) for t in top})
        if j >= TOP:
            churn += 1
        if j != i:
            moves.append(i - j)
        j += 1
    return tuple(moves), churn


def compare_ranked(before: list[Doc], after: list[Doc]) -> tuple[tuple[int, ...], int]:
    """(moves, churn) of the top 10 between two pages already sorted by score."""
    top = after[:TOP]
    if top == before[:len(top)]:  # as in effect: rescores below the top moved nothing in it
        return (), 0
    wanted = {d.id for d in top}
    old: dict[str, int] = {}
    for j, d in enumerate(before):
        if d.id in wanted:
            old[d.id] = j
            if len(old) == len(wanted):
                break
    return _tally(top, old)


def _tally(top: list[Doc], old: Mapping[str, int]) -> tuple[tuple[int, ...], int]:
    moves, churn = [], 0
    for i, d in enumerate(top):
        j = old.get(d.id, TOP)
        if j >= TOP:
            churn += 1
        if j != i:
            moves.append(i - j)
    return tuple(moves), churn
