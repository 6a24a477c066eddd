"""Diversify rules: host crowding and near-duplicate collapsing (seed 000)."""
from __future__ import annotations

from pydantic import Field, field_validator

from app import shingles
from app.domains import registrable_domain
from app.pipeline import AuditRecord, BaseRule, Context, Doc, Phase, RuleResult
from app.rules.base import Params

DIVERSIFY = frozenset({Phase.DIVERSIFY})


def collapse(docs: list[Doc], folded: dict[int, int],
             records: list[AuditRecord], rule: str) -> list[Doc]:
    """Fold docs[i] under docs[leader] for each i → leader; folded docs keep their own folds."""
    if not folded:
        return docs
    extra: dict[int, list[dict[str, str]]] = {}
    for i, leader in folded.items():
        doc = docs[i]
        extra.setdefault(leader, []).append({"id": doc.id, "url": doc.url, "rule": rule})
        extra[leader].extend(doc.collapsed)
    out = []
    for i, doc in enumerate(docs):
        if i in folded:
            continue
        out.append(doc.replace(collapsed=doc.collapsed + tuple(extra[i])) if i in extra else doc)
    return out


class HostCrowdingParams(Params):
    max_per_host: int = Field(2, ge=1)
    key: str = Field("host", pattern="^(host|domain)$")


class HostCrowding(BaseRule):
    """Documents past `max_per_host` per host (or registrable domain) fold under the first."""

    name = "host_crowding"
    phases = DIVERSIFY
    Params = HostCrowdingParams

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        by_domain = self.params.key == "domain"
        limit = self.params.max_per_host
        first: dict[str, int] = {}
        seen: dict[str, int] = {}
        folded: dict[int, int] = {}
        records = []
        for i, doc in enumerate(docs):
            key = registrable_domain(doc.host) if by_domain else doc.host
            n = seen.get(key, 0) + 1
            seen[key] = n
            if n == 1:
                first[key] = i
            elif n > limit:
                leader = docs[first[key]]
                folded[i] = first[key]
                records.append(self.record(
                    doc.id, "collapse",
                    f"{self.params.key} {key} already has {limit} result(s) above; "
                    f"collapsed under {leader.id}"))
        return collapse(docs, folded, records, self.name), records


class NearDuplicatesParams(Params):
    shingle_words: int = Field(10, ge=1, le=100)
    measure: str = Field("containment", pattern="^(containment|jaccard)$")
    threshold: float = Field(0.5, gt=0.0, le=1.0)

    @field_validator("measure")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in shingles.MEASURES:
            raise ValueError(f"measure must be one of {shingles.MEASURES}")
        return value


class NearDuplicates(BaseRule):
    """A document whose text is a near-duplicate of a higher one folds under it (seed 000)."""

    name = "near_duplicates"
    phases = DIVERSIFY
    Params = NearDuplicatesParams

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        p = self.params
        texts = [doc.text for doc in docs]
        if sum(1 for t in texts if t) < 2:
            return docs, []
        pairs = shingles.find_duplicates(texts, p.shingle_words, p.measure, p.threshold)
        folded, records = {}, []
        for i, j, value in pairs:
            folded[i] = j
            records.append(self.record(
                docs[i].id, "collapse",
                f"{p.measure} {value:.2f} >= {p.threshold:g} with {docs[j].id}; "
                f"collapsed under it"))
        return collapse(docs, folded, records, self.name), records
