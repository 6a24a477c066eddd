"""The near_duplicates rule up to its folds, as app/rules/diversity.py computes them.

`NearDuplicates.__call__` turns its pairs straight into records; the engine's Matcher
returns the pairs themselves, so this is the rule's body up to that point, on the rule's
own caches and matcher (app/shingles.py, app/neardup.py, app/sigcache.py, all unchanged).
"""
from __future__ import annotations

from collections.abc import Callable

from app import shingles
from app.pipeline import Doc
from app.rules.diversity import NearDuplicates


def pairs(rule: NearDuplicates, docs: list[Doc], check: Callable[[], None]
          ) -> tuple[list[tuple[int, int, float]], str]:
    """((i, j, value) of each fold, method) as the rule finds them; `check` as its deadline."""
    p = rule.params
    method = rule.method_for(docs)
    if sum(1 for d in docs if d.text or d.signature is not None) < 2:
        return [], method
    if method == "exact":
        sets: list[frozenset[int]] = []
        for doc in docs:
            if doc.text:
                check()
                sets.append(rule._shingle(doc.text))
            else:
                sets.append(frozenset())
        return shingles.fold(sets, p.measure, p.threshold, check), method
    return rule.matcher.minhash_pairs(docs, check), method
