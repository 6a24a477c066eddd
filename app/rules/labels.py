"""Annotate rules: labels that never change the order."""
from __future__ import annotations

from pydantic import Field

from app.pipeline import BaseRule, Context, Doc, Phase, RuleResult
from app.rules.base import Params

ANNOTATE = frozenset({Phase.ANNOTATE})


def label(rule: BaseRule, docs: list[Doc], tag: str, hits: list[int], reason: str) -> RuleResult:
    """Add `tag` to docs[i] for each i in `hits`, ascending (the caller leaves out docs that
    already carry it, so a label is never added twice)."""
    if not hits:
        return docs, []
    out = docs.copy()
    for i in hits:
        doc = docs[i]
        out[i] = doc.replace(annotations=doc.annotations + (tag,))
    return out, [rule.record(docs[i].id, "annotate", reason) for i in hits]


class AdLabel(BaseRule):
    """Annotates `ad` on documents the ranker marked `is_ad`."""

    name = "ad_label"
    phases = ANNOTATE
    Params = Params

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        return label(self, docs, "ad", [i for i, d in enumerate(docs)
                                         if d.is_ad and "ad" not in d.annotations], "is_ad")


class AgeLabelParams(Params):
    threshold: float = Field(0.5, ge=0.0, le=1.0)


class AgeLabel(BaseRule):
    """Annotates `adult` on documents with adult_score ≥ threshold."""

    name = "age_label"
    phases = ANNOTATE
    Params = AgeLabelParams

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        t = self.params.threshold
        return label(self, docs, "adult", [
            i for i, d in enumerate(docs) if d.adult_score >= t and "adult" not in d.annotations],
            f"adult_score >= {t:g}")
