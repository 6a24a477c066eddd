"""The API's bodies: /v1/rerank's request, response and errors as msgspec Structs, the admin
request bodies as pydantic.

The Structs are /v1/rerank's OpenAPI schemas (`rerank_schemas`); the response ones are held
to what the engine writes (crates/engine/src/response.rs) by tests/api/test_openapi.py. The
engine decodes and
checks /v1/rerank bodies itself (crates/engine/src/contract.rs), with the bounds and the
error messages msgspec gives for these types; the reference model decodes with them
(tests/reference/contract.py), and tests/engine/test_contract_engine.py holds the two together.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, field

from app.phases import AgeMode, Phase

Probability = Annotated[float, Meta(ge=0.0, le=1.0, description="a probability in [0, 1]")]
Region = Annotated[str, Meta(min_length=1, max_length=16)]
# Scores are bounded so no sum of rule deltas can overflow to infinity in the response.
Score = Annotated[float, Meta(ge=-1e15, le=1e15, description="finite, |x| <= 1e15")]


# CONTRACT.md: `query.region` is an ISO 3166-1 alpha-2 code, in any case; the engine
# refuses any other spelling (` RU`, `RUS`, `ru-RU`, `ＲＵ`) naming it, after the types.
QueryRegion = Annotated[str, Meta(
    min_length=1, max_length=16,
    description="an ISO 3166-1 alpha-2 code, two ASCII letters in any case (`RU`, `ru`); "
                "anything else is a 422 naming `query.region`")]


class Query(Struct, forbid_unknown_fields=True):
    """The query's context: classes from the intent classifier, region, age mode."""

    text: Annotated[str, Meta(max_length=4096)] = ""
    classes: list[Annotated[str, Meta(max_length=64)]] = []
    region: QueryRegion | None = None
    age_mode: AgeMode = "moderate"


UInt64 = Annotated[int, Meta(ge=0)]  # msgspec refuses ints past 2**64 - 1 itself


class MinHash(Struct, forbid_unknown_fields=True):
    """A precomputed MinHash signature of the document's text (docs/near-duplicates.md).

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


Action = Literal["remove", "rescore", "move", "collapse", "trim", "annotate", "fallback"]


class Exposure(Struct):
    """The variant of one experiment this request was assigned (`bucket` null: outside)."""

    experiment: str
    variant: str
    bucket: int | None
    layer: str | None
    salt: str | None
    forced: bool | UnsetType = UNSET  # present (true) only when the QA header forced it


class Collapsed(Struct):
    """A document folded under the one it is listed in."""

    id: str
    url: str
    rule: str


class RankedDocument(Struct):
    """A document of the answered page; positions are 1-based."""

    id: str
    url: str
    position: Annotated[int, Meta(ge=1)]
    original_position: Annotated[int, Meta(ge=1)]
    score: float
    original_score: float
    annotations: list[str]
    collapsed: list[Collapsed]
    attributes: dict[str, Any]


class Removed(Struct):
    """A document an applied rule removed or trimmed."""

    id: str | None
    rule: str
    phase: Phase
    action: Literal["remove", "trim"]
    reason: str


class Fallback(Struct):
    """What the post-filter did when filters emptied the page."""

    rule: str
    action: str
    reason: str


class AuditRecord(Struct):
    """One thing a rule did; `delta`: score change (rescore), position change (move)."""

    rule: str
    phase: Phase
    doc_id: str | None
    action: Action
    reason: str
    delta: float | None
    mode: Literal["applied", "shadow"]
    relax_to: AgeMode | UnsetType = UNSET  # the fallback's milder age mode


class Skip(Struct):
    """A rule that did not run to completion (`deadline`, or `error` under `on_error: open`)."""

    rule: str
    phase: Phase
    reason: str


class ExplainedStep(Struct):
    """One step of the run as explain reports it (docs/explain.md)."""

    rule: str
    phase: Phase
    attempt: Annotated[int, Meta(description="1; 2 for the rerun after a relax")]
    status: Literal["applied", "shadow", "no_match", "disabled", "outside_window",
                    "not_applicable", "skipped"]
    mode: Literal["applied", "shadow"] | None
    why: str | None
    records: int
    page: Annotated[list[str] | None,
                    Meta(description="document ids after the step; null if it did not run")]


class Elsewhere(Struct):
    """A rule other profiles run and this one does not."""

    rule: str
    phase: Phase
    profiles: list[str]


class Explain(Struct):
    """`explain`, with `X-Rearrange-Explain: true`: every step, and the rules of other
    profiles this one lacks."""

    steps: list[ExplainedStep]
    not_in_profile: list[Elsewhere]


class RerankResponse(Struct):
    """POST /v1/rerank 200: the page after every phase, with removals and the audit."""

    request_id: str
    profile: str
    config_version: str
    banlist_version: int
    experiments: list[Exposure]
    documents: list[RankedDocument]
    removed: list[Removed]
    fallback: Fallback | None
    audit: list[AuditRecord]
    skipped: list[Skip] | UnsetType = UNSET  # present only when a rule was skipped
    explain: Explain | UnsetType = UNSET  # present only when asked (X-Rearrange-Explain)


class ErrorBody(Struct):
    """Every refusal of every route: `field` names what was wrong (a JSON path such as
    `documents[3].score`, a query parameter, `body`, `Authorization`), `problem` says why.
    Some routes add fields (`errors`, `refused`, `serving`, `write_id`: docs/api.md)."""

    error: Annotated[str, Meta(description="invalid_request (4xx) or error (5xx); not_durable "
                               "(503) for a write no Redis replica confirmed in time")]
    field: str | None
    problem: str


class RuleFailed(Struct):
    """POST /v1/rerank 503: a rule whose `on_error` is `closed` failed; no page is served."""

    error: Literal["rule_failed"]
    rule: str
    phase: Phase
    problem: str


def rerank_schemas() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(request body schema, 200 schema, components) for /v1/rerank, from the Structs above;
    the components also hold ErrorBody and RuleFailed, which every route's errors use."""
    (request, response, _, _), components = msgspec.json.schema_components(
        [RerankRequest, RerankResponse, ErrorBody, RuleFailed],
        ref_template="#/components/schemas/{name}")
    return request, response, components


# --- admin bodies (pydantic: FastAPI validates and documents them; not a hot path); the
# banlist's own are app/banlist/bodies.py ---

from pydantic import BaseModel, ConfigDict  # noqa: E402
from pydantic import Field as PField  # noqa: E402


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
