"""Hard removals: banlist, regional removals, topics, safe-search, spam ban; the fallback."""
from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from app.banlist import canon
from app.pipeline import AGE_MODES, BaseRule, Context, Doc, Phase, RuleResult, emptied
from app.rules.base import Params

PRE = frozenset({Phase.PRE_FILTER})


class Banlist(BaseRule):
    """Removes a document whose URL matches an active banlist entry for the request's region."""

    name = "banlist"
    phases = PRE
    Params = Params

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        index = ctx.banlist
        if index is None or not len(index):
            return self.removing(docs, _unopenable(docs))
        region, now = ctx.region, ctx.now
        # Once per host of the page: its host/domain/org entry, and whether any url or
        # prefix entry lies under it. Only documents on such hosts are looked at again.
        verdicts: dict[str, tuple[Any, bool]] = {}
        for host in {doc.host for doc in docs}:
            if not host:
                verdicts[host] = None, False  # no browser could open it: see _unopenable
                continue
            entry, by_url = index.host_verdict(host, region, now)
            if entry is not None or by_url:
                verdicts[host] = entry, by_url
        if not verdicts:
            return docs, []

        def banned(doc: Doc) -> str | None:
            if not doc.host:
                return _why_unopenable(doc)
            entry, by_url = verdicts[doc.host]
            if by_url:  # a url or prefix entry is more specific than the host's own
                specific = index.match_url(doc.canonical, doc.host, region, now)
                entry = specific if specific is not None else entry
            return None if entry is None else entry.describe()

        return self.removing(docs, [(i, why) for i, d in enumerate(docs)
                                    if d.host in verdicts and (why := banned(d)) is not None])


def _unopenable(docs: list[Doc]) -> list[tuple[int, str]]:
    """Documents whose URL no browser could open (contract.to_docs left them no host).

    The banlist cannot vouch for a URL it cannot resolve, so the rule removes it whatever
    the banlist holds, its record naming the problem.
    """
    return [(i, _why_unopenable(d)) for i, d in enumerate(docs) if not d.host]


def _why_unopenable(doc: Doc) -> str:
    try:
        canon.canonicalize(doc.url)
    except canon.InvalidURL as exc:
        return f"URL cannot be opened: {exc}"
    return "URL cannot be opened"  # a Doc built by hand without its host


class RegionalRemovals(BaseRule):
    """Removes a document whose `blocked_regions` holds the query's region."""

    name = "regional_removals"
    phases = PRE
    Params = Params

    def applies(self, ctx: Context) -> bool:
        return ctx.region is not None

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        region = ctx.region
        reason = f"blocked in region {region}"
        return self.removing(docs, [(i, reason) for i, d in enumerate(docs)
                                    if d.blocked_regions and region in d.blocked_regions])


class TopicParams(Params):
    blocked_topics: frozenset[str] = frozenset()

    @field_validator("blocked_topics", mode="before")
    @classmethod
    def _from_list(cls, value: object) -> object:
        return frozenset(value) if isinstance(value, list) else value


class TopicFilter(BaseRule):
    """Removes a document with a blocked topic."""

    name = "topic_filter"
    phases = PRE
    Params = TopicParams

    def applies(self, ctx: Context) -> bool:
        return bool(self.params.blocked_topics)

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        blocked = self.params.blocked_topics

        def topic(doc: Doc) -> str:
            hit = next(t for t in doc.topics if t in blocked)
            return f"topic {hit} is blocked"

        return self.removing(docs, [(i, topic(d)) for i, d in enumerate(docs)
                                    if not blocked.isdisjoint(d.topics)])


class SafeSearchThresholds(Params):
    strict: float = Field(0.5, ge=0.0, le=1.0)
    moderate: float = Field(0.8, ge=0.0, le=1.0)


class SafeSearchParams(Params):
    thresholds: SafeSearchThresholds = SafeSearchThresholds()


class SafeSearch(BaseRule):
    """Removes a document with adult_score ≥ the threshold of the age mode; `off` keeps all."""

    name = "safe_search"
    phases = frozenset({Phase.PRE_FILTER, Phase.POST_FILTER})
    Params = SafeSearchParams

    def applies(self, ctx: Context) -> bool:
        return ctx.age_mode != "off"

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        threshold, mode = getattr(self.params.thresholds, ctx.age_mode), ctx.age_mode
        return self.removing(docs, [
            (i, f"adult_score {d.adult_score:g} >= {threshold:g} (age_mode {mode})")
            for i, d in enumerate(docs) if d.adult_score >= threshold])


class SpamBanParams(Params):
    threshold: float = Field(0.95, ge=0.0, le=1.0)


class SpamBan(BaseRule):
    """Removes a document with spam_score above the threshold (the switch, not the rheostat)."""

    name = "spam_ban"
    phases = PRE
    Params = SpamBanParams

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        threshold = self.params.threshold
        return self.removing(docs, [(i, f"spam_score {d.spam_score:g} > {threshold:g}")
                                    for i, d in enumerate(docs) if d.spam_score > threshold])


class FallbackParams(Params):
    strategy: str = Field("relax", pattern="^(relax|message)$")
    min_age_mode: str = Field("moderate", pattern="^(strict|moderate|off)$")


class EmptyResultFallback(BaseRule):
    """If filters emptied a non-empty page: relax the age mode once, or say nothing safe was found.

    `relax` steps one age mode milder (strict → moderate → off) but never past
    `min_age_mode` (default `moderate`: a fallback never shows unfiltered adult content).
    The runner reruns the pipeline on the original documents when a record carries relax_to.
    """

    name = "empty_result_fallback"
    phases = frozenset({Phase.POST_FILTER})
    Params = FallbackParams

    def applies(self, ctx: Context) -> bool:
        return ctx.input_count > 0

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        if docs:
            return docs, []
        removed = f"{emptied(ctx.input_count)} under age_mode {ctx.age_mode}"
        milder = self._milder(ctx.age_mode)
        if self.params.strategy == "relax" and milder is not None and ctx.relaxed_from is None:
            rec = self.record(None, "fallback", f"{removed}; reran with age_mode {milder}")
            rec.relax_to = milder
            return docs, [rec]
        return docs, [self.record(None, "fallback", f"{removed}; nothing safe was found")]

    def _milder(self, mode: str) -> str | None:
        at, floor = AGE_MODES.index(mode), AGE_MODES.index(self.params.min_age_mode)
        return AGE_MODES[at + 1] if at < floor else None
