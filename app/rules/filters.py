"""Hard removals: banlist, regional removals, topics, safe-search, spam ban; the fallback."""
from __future__ import annotations

from pydantic import Field, field_validator

from app.phases import AgeMode, Phase
from app.rules.base import BuiltinRule, Params

PRE = frozenset({Phase.PRE_FILTER})


class Banlist(BuiltinRule[Params]):
    """Removes a document whose URL matches an active banlist entry for the request's region,
    and one whose URL no browser could open (the banlist cannot vouch for it)."""

    name = "banlist"
    phases = PRE


class RegionalRemovals(BuiltinRule[Params]):
    """Removes a document whose `blocked_regions` holds the query's region."""

    name = "regional_removals"
    phases = PRE


class TopicParams(Params):
    blocked_topics: frozenset[str] = frozenset()

    @field_validator("blocked_topics", mode="before")
    @classmethod
    def _from_list(cls, value: object) -> object:
        return frozenset(value) if isinstance(value, list) else value


class TopicFilter(BuiltinRule[TopicParams]):
    """Removes a document with a blocked topic."""

    name = "topic_filter"
    phases = PRE
    Params = TopicParams


class SafeSearchThresholds(Params):
    strict: float = Field(0.5, ge=0.0, le=1.0)
    moderate: float = Field(0.8, ge=0.0, le=1.0)


class SafeSearchParams(Params):
    thresholds: SafeSearchThresholds = SafeSearchThresholds()


class SafeSearch(BuiltinRule[SafeSearchParams]):
    """Removes a document with adult_score ≥ the threshold of the age mode; `off` keeps all."""

    name = "safe_search"
    phases = frozenset({Phase.PRE_FILTER, Phase.POST_FILTER})
    Params = SafeSearchParams


class SpamBanParams(Params):
    threshold: float = Field(0.95, ge=0.0, le=1.0)


class SpamBan(BuiltinRule[SpamBanParams]):
    """Removes a document with spam_score above the threshold (the switch, not the rheostat)."""

    name = "spam_ban"
    phases = PRE
    Params = SpamBanParams


class FallbackParams(Params):
    strategy: str = Field("relax", pattern="^(relax|message)$")
    min_age_mode: AgeMode = "moderate"


class EmptyResultFallback(BuiltinRule[FallbackParams]):
    """If filters emptied a non-empty page: relax the age mode once, or say nothing safe was found.

    `relax` steps one age mode milder (strict → moderate → off) but never past
    `min_age_mode` (default `moderate`: a fallback never shows unfiltered adult content),
    and the runner reruns the pipeline on the original documents.
    """

    name = "empty_result_fallback"
    phases = frozenset({Phase.POST_FILTER})
    Params = FallbackParams
