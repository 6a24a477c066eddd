"""Annotate rules: labels that never change the order."""
from __future__ import annotations

from pydantic import Field

from app.pipeline import BaseRule, Context, Doc, Phase, RuleResult
from app.rules.base import Params

ANNOTATE = frozenset({Phase.ANNOTATE})


def label(rule: BaseRule, docs: list[Doc], tag: str, hit, reason: str) -> RuleResult:
    """Add `tag` to every doc for which hit(doc) holds; idempotent (never adds it twice)."""
    out, records = [], []
    for doc in docs:
        if hit(doc) and tag not in doc.annotations:
            out.append(doc.replace(annotations=doc.annotations + (tag,)))
            records.append(rule.record(doc.id, "annotate", reason))
        else:
            out.append(doc)
    return out, records


class AdLabel(BaseRule):
    """Annotates `ad` on documents the ranker marked `is_ad`."""

    name = "ad_label"
    phases = ANNOTATE
    Params = Params

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        return label(self, docs, "ad", lambda d: d.is_ad, "is_ad")


class AgeLabelParams(Params):
    threshold: float = Field(0.5, ge=0.0, le=1.0)


class AgeLabel(BaseRule):
    """Annotates `adult` on documents with adult_score ≥ threshold."""

    name = "age_label"
    phases = ANNOTATE
    Params = AgeLabelParams

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        t = self.params.threshold
        return label(self, docs, "adult", lambda d: d.adult_score >= t,
                     f"adult_score >= {t:g}")
