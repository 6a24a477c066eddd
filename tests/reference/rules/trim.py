"""Trim rules: depth (top k) and a quota per host."""
from __future__ import annotations

from app.rules import trim as declared
from tests.reference.pipeline import AuditRecord, Behaviour, Context, Doc, RuleResult


class Depth(declared.Depth, Behaviour):
    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        k = ctx.depth if ctx.depth is not None else self.params.k
        records: list[AuditRecord] = []
        for doc in docs[k:]:
            self.dropped(records, doc, "trim", f"below depth {k}")
        return docs[:k], records


class HostQuota(declared.HostQuota, Behaviour):
    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        limit = self.params.max_per_host
        seen: dict[str, int] = {}
        kept: list[Doc] = []
        records: list[AuditRecord] = []
        for doc in docs:
            seen[doc.host] = seen.get(doc.host, 0) + 1
            if seen[doc.host] > limit:
                self.dropped(records, doc, "trim", f"host {doc.host} is past its quota of {limit}")
            else:
                kept.append(doc)
        return kept, records
