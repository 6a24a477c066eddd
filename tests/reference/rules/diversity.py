"""Diversify rules: host crowding and near-duplicate collapsing."""
from __future__ import annotations

from collections.abc import Callable
from functools import partial

from app.domains import registrable_domain
from app.neardup import shingles
from app.phases import Phase
from app.rules import diversity as declared
from tests.reference.neardup import Matcher
from tests.reference.pipeline import AuditRecord, Behaviour, Context, Doc, RuleResult
from tests.reference.sigcache import ShingleSetCache, SignatureCache


def collapse(docs: list[Doc], folded: dict[int, int], rule: str) -> list[Doc]:
    """Fold docs[i] under docs[leader] for each i → leader; folded docs keep their own folds."""
    under: dict[int, list[dict[str, str]]] = {}
    for i, leader in folded.items():
        doc = docs[i]
        under.setdefault(leader, []).extend(
            [{"id": doc.id, "url": doc.url, "rule": rule}, *doc.collapsed])
    out = [doc.replace(collapsed=doc.collapsed + tuple(under[i])) if i in under else doc
           for i, doc in enumerate(docs)]
    return [doc for i, doc in enumerate(out) if i not in folded]


class HostCrowding(declared.HostCrowding, Behaviour):
    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        what, limit = self.params.key, self.params.max_per_host
        keys = ([registrable_domain(d.host) for d in docs] if what == "domain"
                else [d.host for d in docs])
        first: dict[str, int] = {}
        seen: dict[str, int] = {}
        folded: dict[int, int] = {}
        records: list[AuditRecord] = []
        for i, key in enumerate(keys):
            seen[key] = seen.get(key, 0) + 1
            first.setdefault(key, i)
            if seen[key] > limit:
                leader = folded[i] = first[key]
                records.append(self.record(
                    docs[i].id, "collapse", f"{what} {key} already has {limit} result(s) "
                    f"above; collapsed under {docs[leader].id}"))
        return collapse(docs, folded, self.name), records


class NearDuplicates(declared.NearDuplicates, Behaviour):
    """Its caches (signatures, the exact method's shingle sets) live as long as the rule."""

    optional = True  # a page with near-duplicates beats a late page: skipped past the deadline

    def __init__(self, params: declared.NearDuplicatesParams, phase: Phase) -> None:
        super().__init__(params, phase)
        self.matcher = Matcher(
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
        """The signature cache (None when cache_mb is 0)."""
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

    def pairs(self, docs: list[Doc], check: Callable[[], None]
              ) -> tuple[list[tuple[int, int, float]], str]:
        """((i, j, value) of each doc folded under j, the method); `check` is called per
        text shingled or signed and per block of comparisons, and may raise to stop."""
        p = self.params
        method = self.method_for(docs)
        if sum(1 for d in docs if d.text or d.signature is not None) < 2:
            return [], method
        if method == "minhash":
            return self.matcher.minhash_pairs(docs, check), method
        sets: list[frozenset[int]] = []
        for doc in docs:
            if doc.text:
                check()
                sets.append(self._shingle(doc.text))
            else:
                sets.append(frozenset())
        return shingles.fold(sets, p.measure, p.threshold, check), method

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        """Fold near-duplicates; DeadlineExceeded if the request's deadline passes meanwhile,
        before anything is folded (what was computed by then stays in the caches)."""
        p = self.params
        pairs, method = self.pairs(docs, ctx.check_deadline)
        how = f" (MinHash estimate, k={p.num_perm})" if method == "minhash" else ""
        records = [self.record(docs[i].id, "collapse",
                               f"{p.measure} {value:.2f} >= {p.threshold:g} with {docs[j].id}"
                               f"{how}; collapsed under it")
                   for i, j, value in pairs]
        return collapse(docs, {i: j for i, j, _ in pairs}, self.name), records
