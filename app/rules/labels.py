"""Annotate rules: labels that never change the order."""
from __future__ import annotations

from pydantic import Field

from app.phases import Phase
from app.rules.base import BuiltinRule, Params

ANNOTATE = frozenset({Phase.ANNOTATE})


class AdLabel(BuiltinRule[Params]):
    """Annotates `ad` on documents the ranker marked `is_ad`."""

    name = "ad_label"
    phases = ANNOTATE


class AgeLabelParams(Params):
    threshold: float = Field(0.5, ge=0.0, le=1.0)


class AgeLabel(BuiltinRule[AgeLabelParams]):
    """Annotates `adult` on documents with adult_score ≥ threshold."""

    name = "age_label"
    phases = ANNOTATE
    Params = AgeLabelParams
