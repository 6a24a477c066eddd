"""Diversify rules: host crowding and near-duplicate collapsing (seed 000)."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any

from pydantic import Field, field_validator

from app import minhash, neardup, shingles
from app.domains import registrable_domain
from app.pipeline import APPLIED, AuditRecord, BaseRule, Context, Doc, Phase, Pipeline, RuleResult
from app.rules.base import Params
from app.sigcache import ShingleSetCache, SignatureCache

DIVERSIFY = frozenset({Phase.DIVERSIFY})
_NO_SHINGLES: frozenset[int] = frozenset()


def collapse(docs: list[Doc], folded: dict[int, int],
             records: list[AuditRecord], rule: str) -> list[Doc]:
    """Fold docs[i] under docs[leader] for each i → leader; folded docs keep their own folds."""
    if not folded:
        return docs
    extra: dict[int, list[dict[str, str]]] = {}
    for i, leader in folded.items():
        doc = docs[i]
        under = extra.get(leader)
        if under is None:
            under = extra[leader] = []
        under.append({"id": doc.id, "url": doc.url, "rule": rule})
        if doc.collapsed:
            under.extend(doc.collapsed)
    out = docs.copy()
    for leader, under in extra.items():
        doc = docs[leader]
        out[leader] = doc.replace(collapsed=doc.collapsed + tuple(under))
    for i in sorted(folded, reverse=True):
        del out[i]
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
        what, limit = self.params.key, self.params.max_per_host
        keys = ([registrable_domain(d.host) for d in docs] if what == "domain"
                else [d.host for d in docs])
        if len(keys) - len(set(keys)) < limit:
            return docs, []  # a key over the limit repeats at least `limit` times
        first: dict[str, int] = {}
        seen: dict[str, int] = {}
        reasons: dict[str, str] = {}  # one per crowded key: every fold under it says the same
        folded: dict[int, int] = {}
        records = []
        name, phase = self.name, self.phase
        for i, key in enumerate(keys):
            n = seen[key] = seen.get(key, 0) + 1
            if n == 1:
                first[key] = i
            elif n > limit:
                leader = folded[i] = first[key]
                reason = reasons.get(key)
                if reason is None:
                    reason = reasons[key] = (f"{what} {key} already has {limit} result(s) "
                                             f"above; collapsed under {docs[leader].id}")
                records.append(AuditRecord(name, phase, docs[i].id, "collapse", reason, None,
                                           APPLIED))
        return collapse(docs, folded, records, self.name), records


class NearDuplicatesParams(Params):
    shingle_words: int = Field(10, ge=1, le=100)
    measure: str = Field("containment", pattern="^(containment|jaccard)$")
    threshold: float = Field(0.5, gt=0.0, le=1.0)
    # auto: exact shingle sets up to exact_max_docs documents with text, MinHash above that
    # or as soon as one document brings a precomputed signature (README: "The switch").
    method: str = Field("auto", pattern="^(auto|exact|minhash)$")
    exact_max_docs: int = Field(neardup.EXACT_MAX_DOCS, ge=0, le=100_000)
    num_perm: int = Field(minhash.DEFAULT_K, ge=16, le=1024)
    seed: int = Field(minhash.DEFAULT_SEED, ge=0, le=2**64 - 1)
    cache_mb: int = Field(64, ge=0, le=65_536)  # 0 turns the signature cache off
    exact_cache_mb: int = Field(32, ge=0, le=65_536)  # the exact method's shingle sets; 0: off

    @field_validator("measure")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in shingles.MEASURES:
            raise ValueError(f"measure must be one of {shingles.MEASURES}")
        return value


class NearDuplicates(BaseRule):
    """A document whose text is a near-duplicate of a higher one folds under it (seed 000).

    Small pages compare exact shingle sets; larger ones, or pages whose documents bring
    precomputed MinHash signatures, compare signatures (app/neardup.py). Both methods
    remember what they computed from a text (the signature cache, the exact method's
    shingle-set cache) as long as this rule object lives, i.e. until the config is reloaded.
    """

    name = "near_duplicates"
    optional = True  # a page with near-duplicates beats a late page: skipped past the deadline
    phases = DIVERSIFY
    Params = NearDuplicatesParams

    def __init__(self, params: NearDuplicatesParams, phase: Phase) -> None:
        super().__init__(params, phase)
        self.matcher = neardup.Matcher(
            width=params.shingle_words, measure=params.measure, threshold=params.threshold,
            k=params.num_perm, seed=params.seed,
            cache=SignatureCache(params.cache_mb << 20, params.num_perm) if params.cache_mb
            else None)
        self.exact_cache = (ShingleSetCache(params.exact_cache_mb << 20, params.shingle_words)
                            if params.exact_cache_mb else None)
        self._shingle = (self.exact_cache.shingles if self.exact_cache is not None
                         else partial(shingles.shingles, width=params.shingle_words))

    @property
    def cache(self) -> SignatureCache | None:
        """The signature cache (None when cache_mb is 0), for metrics."""
        return self.matcher.cache

    def method_for(self, docs: list[Doc]) -> str:
        """exact or minhash, from the documents alone (never from the cache's state)."""
        p = self.params
        if p.method != "auto":
            return p.method
        if any(doc.signature is not None for doc in docs):
            return "minhash"
        with_text = sum(1 for doc in docs if doc.text)
        return "exact" if with_text <= p.exact_max_docs else "minhash"

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        """Fold near-duplicates; DeadlineExceeded if the request's deadline passes meanwhile.

        The deadline is checked per text shingled or signed and per block of comparisons,
        and nothing is folded until all of them are done, so a rule cut short changes
        nothing; what it computed by then stays in its caches for the next page.
        """
        p = self.params
        if sum(1 for d in docs if d.text or d.signature is not None) < 2:
            return docs, []
        check = ctx.check_deadline
        method = self.method_for(docs)
        if method == "exact":
            shingle = self._shingle
            sets: list[frozenset[int]] = []
            for doc in docs:
                if doc.text:
                    check()
                    sets.append(shingle(doc.text))
                else:
                    sets.append(_NO_SHINGLES)
            pairs = shingles.fold(sets, p.measure, p.threshold, check)
            how = ""
        else:
            pairs = self.matcher.minhash_pairs(docs, check)
            how = f" (MinHash estimate, k={p.num_perm})"
        folded, records = {}, []
        for i, j, value in pairs:
            folded[i] = j
            records.append(self.record(
                docs[i].id, "collapse",
                f"{p.measure} {value:.2f} >= {p.threshold:g} with {docs[j].id}{how}; "
                f"collapsed under it"))
        return collapse(docs, folded, records, self.name), records


def signature_caches(profiles: Mapping[str, Pipeline]) -> Iterator[tuple[str, SignatureCache]]:
    """(profile, cache) of every near_duplicates rule with a cache (per-variant ones too)."""
    return _caches(profiles, "cache")


def shingle_caches(profiles: Mapping[str, Pipeline]) -> Iterator[tuple[str, ShingleSetCache]]:
    """(profile, cache) of every near_duplicates rule's exact shingle-set cache."""
    return _caches(profiles, "exact_cache")


def _caches(profiles: Mapping[str, Pipeline], attribute: str) -> Iterator[tuple[str, Any]]:
    for profile, pipeline in profiles.items():
        for _, step in pipeline.rules():
            for rule in (step.rule, *step.variants.values()):
                cache = getattr(rule, attribute) if isinstance(rule, NearDuplicates) else None
                if cache is not None:
                    yield profile, cache
