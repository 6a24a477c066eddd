"""Diversify rules: host crowding and near-duplicate collapsing (seed 000)."""
from __future__ import annotations

from pydantic import Field, field_validator

from app.neardup import minhash, shingles
from app.phases import Phase
from app.rules.base import BuiltinRule, Params

DIVERSIFY = frozenset({Phase.DIVERSIFY})
# Measured by bench/near_duplicates.py (docs/near-duplicates.md#the-switch): with 300-word
# texts and a cold cache, MinHash overtakes exact pairs at about this many documents with text.
EXACT_MAX_DOCS = 30


class HostCrowdingParams(Params):
    max_per_host: int = Field(2, ge=1)
    key: str = Field("host", pattern="^(host|domain)$")


class HostCrowding(BuiltinRule[HostCrowdingParams]):
    """Documents past `max_per_host` per host (or registrable domain) fold under the first."""

    name = "host_crowding"
    phases = DIVERSIFY
    Params = HostCrowdingParams


class NearDuplicatesParams(Params):
    shingle_words: int = Field(10, ge=1, le=100)
    measure: str = Field("containment", pattern="^(containment|jaccard)$")
    threshold: float = Field(0.5, gt=0.0, le=1.0)
    # auto: exact shingle sets up to exact_max_docs documents with text, MinHash above that
    # or as soon as one document brings a precomputed signature
    # (docs/near-duplicates.md#the-switch).
    method: str = Field("auto", pattern="^(auto|exact|minhash)$")
    exact_max_docs: int = Field(EXACT_MAX_DOCS, ge=0, le=100_000)
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


class NearDuplicates(BuiltinRule[NearDuplicatesParams]):
    """A document whose text is a near-duplicate of a higher one folds under it (seed 000).

    Small pages compare exact shingle sets; larger ones, or pages whose documents bring
    precomputed MinHash signatures, compare signatures. Both methods remember what they
    computed from a text (a signature cache, a shingle-set cache) until the config is
    reloaded. Optional: skipped, or stopped midway, once the request's deadline passes.
    """

    name = "near_duplicates"
    phases = DIVERSIFY
    Params = NearDuplicatesParams
