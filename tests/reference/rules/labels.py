"""Annotate rules: labels that never change the order."""
from __future__ import annotations

from app.rules import labels as declared
from tests.reference.pipeline import Behaviour, Context, Doc, RuleResult


def label(rule: Behaviour, docs: list[Doc], tag: str, hits: list[int], reason: str
          ) -> RuleResult:
    """Add `tag` to docs[i] for each i in `hits`, ascending (the caller leaves out docs that
    already carry it, so a label is never added twice)."""
    out = docs.copy()
    for i in hits:
        out[i] = docs[i].replace(annotations=docs[i].annotations + (tag,))
    return out, [rule.record(docs[i].id, "annotate", reason) for i in hits]


class AdLabel(declared.AdLabel, Behaviour):
    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        return label(self, docs, "ad", [i for i, d in enumerate(docs)
                                         if d.is_ad and "ad" not in d.annotations], "is_ad")


class AgeLabel(declared.AgeLabel, Behaviour):
    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        t = self.params.threshold
        return label(self, docs, "adult", [
            i for i, d in enumerate(docs) if d.adult_score >= t and "adult" not in d.annotations],
            f"adult_score >= {t:g}")
