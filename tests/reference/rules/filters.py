"""Hard removals: banlist, regional removals, topics, safe-search, spam ban; the fallback."""
from __future__ import annotations

from typing import Any

from app.banlist import canon
from app.phases import AGE_MODES
from app.rules import filters as declared
from tests.reference.pipeline import Behaviour, Context, Doc, RuleResult, emptied


class Banlist(declared.Banlist, Behaviour):
    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        index = ctx.banlist
        if index is None or not len(index):
            return self.removing(docs, [(i, _why_unopenable(d)) for i, d in enumerate(docs)
                                        if not d.host])
        region, now = ctx.region, ctx.now
        # Once per host of the page: its host/domain/org entry, and whether any url or
        # prefix entry lies under it. Only documents on such hosts are looked at again.
        verdicts: dict[str, tuple[Any, bool]] = {}
        for host in {doc.host for doc in docs}:
            if not host:
                verdicts[host] = None, False  # no browser could open it: _why_unopenable
                continue
            entry, by_url = index.host_verdict(host, region, now)
            if entry is not None or by_url:
                verdicts[host] = entry, by_url

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


def _why_unopenable(doc: Doc) -> str:
    """Why a URL no browser could open (contract.to_docs left it no host) is removed: the
    banlist cannot vouch for a URL it cannot resolve."""
    try:
        canon.canonicalize(doc.url)
    except canon.InvalidURL as exc:
        return f"URL cannot be opened: {exc}"
    return "URL cannot be opened"  # a Doc built by hand without its host


class RegionalRemovals(declared.RegionalRemovals, Behaviour):
    def applies(self, ctx: Context) -> bool:
        return ctx.region is not None

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        reason = f"blocked in region {ctx.region}"
        return self.removing(docs, [(i, reason) for i, d in enumerate(docs)
                                    if ctx.region in d.blocked_regions])


class TopicFilter(declared.TopicFilter, Behaviour):
    def applies(self, ctx: Context) -> bool:
        return bool(self.params.blocked_topics)

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        blocked = self.params.blocked_topics
        return self.removing(docs, [
            (i, f"topic {next(t for t in d.topics if t in blocked)} is blocked")
            for i, d in enumerate(docs) if not blocked.isdisjoint(d.topics)])


class SafeSearch(declared.SafeSearch, Behaviour):
    def applies(self, ctx: Context) -> bool:
        return ctx.age_mode != "off"

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        threshold, mode = getattr(self.params.thresholds, ctx.age_mode), ctx.age_mode
        return self.removing(docs, [
            (i, f"adult_score {d.adult_score:g} >= {threshold:g} (age_mode {mode})")
            for i, d in enumerate(docs) if d.adult_score >= threshold])


class SpamBan(declared.SpamBan, Behaviour):
    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        threshold = self.params.threshold
        return self.removing(docs, [(i, f"spam_score {d.spam_score:g} > {threshold:g}")
                                    for i, d in enumerate(docs) if d.spam_score > threshold])


class EmptyResultFallback(declared.EmptyResultFallback, Behaviour):
    """The runner reruns the pipeline on the original documents when a record carries
    `relax_to`."""

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
