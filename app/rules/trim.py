"""Trim rules: depth (top k) and a quota per host."""
from __future__ import annotations

from pydantic import Field

from app.pipeline import AuditRecord, BaseRule, Context, Doc, Phase, RuleResult
from app.rules.base import Params

TRIM = frozenset({Phase.TRIM})


def trimmed(rule: BaseRule, docs: list[Doc], reason: str) -> list[AuditRecord]:
    """Trim records for the documents and for each one collapsed under them, which go with
    them (`BaseRule.dropped`)."""
    records: list[AuditRecord] = []
    for doc in docs:
        rule.dropped(records, doc, "trim", reason)
    return records


class DepthParams(Params):
    k: int = Field(10, ge=1)


class Depth(BaseRule):
    """Keeps the top k; the request's `depth` overrides k."""

    name = "depth"
    phases = TRIM
    Params = DepthParams

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        k = ctx.depth if ctx.depth is not None else self.params.k
        if len(docs) <= k:
            return docs, []
        return docs[:k], trimmed(self, docs[k:], f"below depth {k}")


class HostQuotaParams(Params):
    max_per_host: int = Field(1, ge=1)


class HostQuota(BaseRule):
    """Drops documents past the quota per host."""

    name = "host_quota"
    phases = TRIM
    Params = HostQuotaParams

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        limit = self.params.max_per_host
        seen: dict[str, int] = {}
        kept, records = [], []
        for doc in docs:
            n = seen.get(doc.host, 0) + 1
            seen[doc.host] = n
            if n > limit:
                self.dropped(records, doc, "trim", f"host {doc.host} is past its quota of {limit}")
            else:
                kept.append(doc)
        return kept, records
