"""Per-rule position moves and top-10 churn, in rerank (sorted) and elsewhere (walked)."""
from __future__ import annotations

from app.effects import effect
from tests.helpers import doc


def test_effect_counts_churn_into_the_top_10():
    before = [doc(f"d{i}", 100.0 - i) for i in range(12)]
    after = [before[11].replace(score=200.0), *before[:11]]
    moves, churn = effect(before, after, resort=True)
    assert churn == 1 and moves[0] == -11 and len(moves) == 10  # d11 in, all others down 1
    removed = before[1:]
    moves, churn = effect(before, removed, resort=False)
    assert churn == 1 and moves == (-1,) * 10  # d10 enters at 10th place


def test_effect_outside_rerank_walks_forward_and_survives_a_reorder():
    before = [doc(f"d{i}", 1.0) for i in range(15)]
    assert effect(before, list(before), resort=False) == ((), 0)  # labels: nothing moved
    collapsed = before[:2] + before[4:]  # two folded away: the rest move up two
    moves, churn = effect(before, collapsed, resort=False)
    assert moves == (-2,) * 8 and churn == 2
    reordered = list(reversed(before[:-1]))  # not order-preserving: the full index is used
    moves, churn = effect(before, reordered, resort=False)
    assert churn == 4 and moves[0] == 0 - 13


def test_effect_of_a_trim_or_a_removal_below_the_top_is_nothing():
    before = [doc(f"d{i}", 1.0) for i in range(15)]
    assert effect(before, before[:10], resort=False) == ((), 0)
    assert effect(before, before[:12] + before[13:], resort=False) == ((), 0)
    # a collapse rebuilds its leader: matched by id, it did not move; the rest moved up one
    folded = [before[0].replace(collapsed=({"id": "d1", "url": "u", "rule": "r"},)),
              *before[2:]]
    moves, churn = effect(before, folded, resort=False)
    assert moves == (-1,) * 9 and churn == 1


def test_a_rescore_that_leaves_the_sorted_top_as_it_was_moved_nothing():
    before = [doc(f"d{i}", 100.0 - i) for i in range(12)]
    demoted = [*before[:11], before[11].replace(score=0.5)]  # already last: stays last
    assert effect(before, demoted, resort=True) == ((), 0)
    lifted = [*before[:10], before[10].replace(score=95.5), before[11]]
    moves, churn = effect(before, lifted, resort=True)
    assert churn == 1 and moves == (-5, 1, 1, 1, 1)  # d10 to 6th, d5..d8 down one, d9 out
