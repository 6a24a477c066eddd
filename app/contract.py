"""The API's request bodies: /v1/rerank's as msgspec Structs, the admin ones as pydantic.

The Structs are the request's OpenAPI schema (`request_schema`). The engine decodes and
checks /v1/rerank bodies itself (crates/engine/src/contract.rs), with the bounds and the
error messages msgspec gives for these types; the reference model decodes with them
(tests/reference/contract.py), and tests/test_contract_engine.py holds the two together.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct, field

from app.banlist.base import MAX_REASON, MAX_TTL_SECONDS, MAX_VALUE, expiry

Probability = Annotated[float, Meta(ge=0.0, le=1.0, description="a probability in [0, 1]")]
Region = Annotated[str, Meta(min_length=1, max_length=16)]
# Scores are bounded so no sum of rule deltas can overflow to infinity in the response.
Score = Annotated[float, Meta(ge=-1e15, le=1e15, description="finite, |x| <= 1e15")]


class Query(Struct, forbid_unknown_fields=True):
    """The query's context: classes from the intent classifier, region, age mode."""

    text: Annotated[str, Meta(max_length=4096)] = ""
    classes: list[Annotated[str, Meta(max_length=64)]] = []
    region: Region | None = None
    age_mode: Literal["strict", "moderate", "off"] = "moderate"


UInt64 = Annotated[int, Meta(ge=0)]  # msgspec refuses ints past 2**64 - 1 itself


class MinHash(Struct, forbid_unknown_fields=True):
    """A precomputed MinHash signature of the document's text (README: near-duplicates).

    An addition to the contract: upstream may send this instead of (or with) `text`, so long
    texts need not travel with every query. `values` are the k unsigned 64-bit minima of the
    published hash family; `shingles` is the size of the shingle set (for containment).
    """

    values: Annotated[list[UInt64], Meta(min_length=1, max_length=4096)]
    shingles: Annotated[int, Meta(ge=0, le=100_000_000)]
    width: Annotated[int, Meta(ge=1, le=100)]
    seed: UInt64


class Document(Struct, forbid_unknown_fields=True):
    """One result of the ranker's page; only id, url and score are required."""

    id: Annotated[str, Meta(min_length=1, max_length=512)]
    url: Annotated[str, Meta(min_length=1, max_length=8192)]
    score: Score
    factors: dict[str, Score] = {}
    spam_score: Probability = 0.0
    adult_score: Probability = 0.0
    domain_age_days: Annotated[float, Meta(ge=0.0)] | None = None
    is_ad: bool = False
    topics: list[str] = []
    blocked_regions: list[Region] = []
    text: str | None = None
    minhash: MinHash | None = None
    attributes: dict[str, Any] = {}


class RerankRequest(Struct, forbid_unknown_fields=True):
    """POST /v1/rerank body: the page in the ranker's order plus the query's context."""

    documents: list[Document]
    request_id: Annotated[str, Meta(max_length=256)] | None = None
    query: Query = field(default_factory=Query)
    unit: dict[str, str] = {}
    profile: str | None = None
    depth: Annotated[int, Meta(ge=1, le=10_000)] | None = None


def request_schema() -> dict[str, Any]:
    """OpenAPI requestBody for /v1/rerank, from the Structs above."""
    (schema,), components = msgspec.json.schema_components(
        [RerankRequest], ref_template="#/components/schemas/{name}")
    return {"requestBody": {"required": True,
                            "content": {"application/json": {"schema": schema}}},
            "x-components": components}


# --- banlist admin bodies (pydantic: FastAPI validates and documents them; not a hot path) ---

from datetime import datetime  # noqa: E402

from pydantic import AwareDatetime, BaseModel, ConfigDict  # noqa: E402
from pydantic import Field as PField  # noqa: E402


class BanIn(BaseModel):
    """POST /v1/banlist/entries."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    scope: Literal["url", "prefix", "host", "domain", "org"]
    value: str = PField(min_length=1, max_length=MAX_VALUE)
    reason: str = PField(min_length=1, max_length=MAX_REASON)
    regions: list[Annotated[str, PField(min_length=1, max_length=16)]] = []
    ttl_seconds: int | None = PField(default=None, gt=0, le=MAX_TTL_SECONDS)
    expires_at: AwareDatetime | None = None

    def expiry(self, now: float) -> float | None:
        """Epoch seconds of expiry from ttl_seconds or expires_at (not both)."""
        at = self.expires_at.timestamp() if isinstance(self.expires_at, datetime) else None
        return expiry(self.ttl_seconds, at, now)


class UnbanIn(BaseModel):
    """DELETE /v1/banlist/entries/{id}: why the entry is lifted (e.g. an appeal)."""

    model_config = ConfigDict(extra="forbid")

    reason: str = PField(min_length=1, max_length=1000)


class GroupIn(BaseModel):
    """PUT /v1/banlist/groups/{name}: the member domains of an org group, and why."""

    model_config = ConfigDict(extra="forbid")

    domains: list[Annotated[str, PField(min_length=1, max_length=253)]] = PField(
        min_length=1, max_length=10_000)
    reason: str = PField(min_length=1, max_length=1000)


class ReseedIn(BaseModel):
    """POST /v1/admin/banlist/reseed: why, and whether to overwrite another history."""

    model_config = ConfigDict(extra="forbid")

    reason: str = PField(min_length=1, max_length=1000)
    force: bool = False


class TryIn(BaseModel):
    """POST /v1/admin/config/try: a candidate config's YAML and one /v1/rerank body to run
    through it, explained, without serving the candidate."""

    model_config = ConfigDict(extra="forbid")

    config: str = PField(min_length=1, max_length=1_000_000)
    request: dict[str, Any]


class RollbackIn(BaseModel):
    """POST /v1/admin/config/rollback: the earlier config version to serve now."""

    model_config = ConfigDict(extra="forbid")

    version: str = PField(min_length=1, max_length=64)
