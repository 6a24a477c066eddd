"""The /v1/rerank request as msgspec Structs (decoding, validation and the OpenAPI schema).

All are `gc=False`: decoded from JSON, their fields hold only strings, numbers and fresh
lists and dicts, which cannot refer back to them, so there is no cycle for the collector
to find, and a 100-document page no longer adds 100 tracked objects to every request.

msgspec decodes a 100-document body ~3x faster than pydantic's validate_json and
rejects what JSON does not allow (NaN, Infinity, out-of-range numbers) with the
path of the field; its JSON schema feeds the OpenAPI docs, so there is one
definition of the request, not two that can drift apart.
"""
from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct, field

from app.banlist import canon
from app.banlist.base import MAX_TTL_SECONDS, expiry
from app.errors import FieldError
from app.pipeline import Doc

Probability = Annotated[float, Meta(ge=0.0, le=1.0, description="a probability in [0, 1]")]
Region = Annotated[str, Meta(min_length=1, max_length=16)]
# Scores are bounded so no sum of rule deltas can overflow to infinity in the response.
Score = Annotated[float, Meta(ge=-1e15, le=1e15, description="finite, |x| <= 1e15")]


class Query(Struct, forbid_unknown_fields=True, gc=False):
    """The query's context: classes from the intent classifier, region, age mode."""

    text: Annotated[str, Meta(max_length=4096)] = ""
    classes: list[Annotated[str, Meta(max_length=64)]] = []
    region: Region | None = None
    age_mode: Literal["strict", "moderate", "off"] = "moderate"


_U64_MAX = 2**64 - 1
UInt64 = Annotated[int, Meta(ge=0)]  # msgspec refuses ints past 2**64 - 1 itself


class MinHash(Struct, forbid_unknown_fields=True, gc=False):
    """A precomputed MinHash signature of the document's text (README: near-duplicates).

    An addition to the contract: upstream may send this instead of (or with) `text`, so long
    texts need not travel with every query. `values` are the k unsigned 64-bit minima of the
    published hash family; `shingles` is the size of the shingle set (for containment).
    """

    values: Annotated[list[UInt64], Meta(min_length=1, max_length=4096)]
    shingles: Annotated[int, Meta(ge=0, le=100_000_000)]
    width: Annotated[int, Meta(ge=1, le=100)]
    seed: UInt64


class Document(Struct, forbid_unknown_fields=True, gc=False):
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


class RerankRequest(Struct, forbid_unknown_fields=True, gc=False):
    """POST /v1/rerank body: the page in the ranker's order plus the query's context."""

    documents: list[Document]
    request_id: Annotated[str, Meta(max_length=256)] | None = None
    query: Query = field(default_factory=Query)
    unit: dict[str, str] = {}
    profile: str | None = None
    depth: Annotated[int, Meta(ge=1, le=10_000)] | None = None


_DECODER = msgspec.json.Decoder(RerankRequest)
_AT = re.compile(r"^(?P<problem>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)


def decode(body: bytes) -> RerankRequest:
    """Decode and type-check a body; FieldError names the field (`documents[3].score`)."""
    try:
        return _DECODER.decode(body)
    except msgspec.ValidationError as exc:
        m = _AT.match(str(exc))
        path = (m["path"] or "").lstrip(".") if m else ""
        problem = m["problem"] if m else str(exc)
        unknown = re.match(r"Object contains unknown field `(.+)`", problem)
        if unknown:
            path = f"{path}.{unknown[1]}" if path else unknown[1]
            problem = "unknown field"
        missing = re.match(r"Object missing required field `(.+)`", problem)
        if missing:
            path = f"{path}.{missing[1]}" if path else missing[1]
            problem = "required field is missing"
        if "[...]" in path:  # msgspec does not name a map key (or any step of some paths)
            path = _locate(body, path, problem)
        raise FieldError(path or "body", problem) from None
    except msgspec.DecodeError as exc:
        raise FieldError("body", f"not valid JSON: {exc}", status=400) from None
    except RecursionError:  # msgspec's guard: arrays and objects nested past Python's limit
        raise FieldError("body", "JSON nested too deeply (arrays and objects within each "
                         "other, about a thousand levels)", status=400) from None


_JSON_TYPE = {str: "str", int: "int", float: "float", bool: "bool", list: "array",
              dict: "object", type(None): "null"}


LOCATE_MAX_BYTES = 1 << 20  # a refused body bigger than this keeps msgspec's path


def _locate(body: bytes, path: str, problem: str) -> str:
    """msgspec's path with its `[...]` replaced by the key or index it means, where we can
    find it; the path as msgspec gave it otherwise. Only runs on a refused body, and only
    on one of at most LOCATE_MAX_BYTES: it parses the body again."""
    if len(body) > LOCATE_MAX_BYTES:
        return path
    try:
        # The standard parser keeps what msgspec refuses to hold (1e400 is inf, huge ints
        # stay ints), so the offending value is there to be found.
        root = json.loads(body)
        if problem.startswith("Number out of range"):  # msgspec names no step of the path
            return _first_out_of_range(root) or path
        return _name_map_key(root, path, problem)
    except (ValueError, RecursionError, LookupError, TypeError):
        return path


def _out_of_range(node: Any) -> bool:
    """A number no float holds (msgspec keeps ints of any size where the type is Any)."""
    if isinstance(node, float):
        return not math.isfinite(node)
    return isinstance(node, int) and not isinstance(node, bool) and abs(node) > sys.float_info.max


def _first_out_of_range(root: Any) -> str | None:
    """The path of the first out-of-range number in document order; the path is built only
    for the one found (a few MiB of JSON hold a million nodes)."""
    top = _children(root)
    if top is None:
        return None
    keys: list[str | int] = []
    levels = [top]
    while levels:
        for key, value in levels[-1]:
            if _out_of_range(value):
                return "".join(f"[{k}]" if isinstance(k, int) else f".{k}"
                               for k in (*keys, key)).lstrip(".")
            below = _children(value)
            if below is not None:
                keys.append(key)
                levels.append(below)
                break
        else:
            levels.pop()
            if keys:
                keys.pop()
    return None


def _children(node: Any) -> Iterator[tuple[str | int, Any]] | None:
    if isinstance(node, dict):
        return iter(node.items())
    if isinstance(node, list):
        return iter(enumerate(node))
    return None


def _name_map_key(root: Any, path: str, problem: str) -> str:
    """Replace a trailing `[...]` with the first key of that map whose value has the bad type."""
    if not path.endswith("[...]"):
        return path
    got = re.search(r"got `(\w+)`", problem)
    node = root
    for step in re.findall(r"[^.\[\]]+|\[\d+\]", path.removesuffix("[...]")):
        node = node[int(step[1:-1])] if step.startswith("[") else node[step]
    bound = re.search(r"Expected `\w+` (<=|>=) (\S+)", problem)
    if isinstance(node, dict):
        for key, value in node.items():
            if got and _JSON_TYPE.get(type(value)) == got[1]:
                return f"{path.removesuffix('[...]')}.{key}"
            if bound and isinstance(value, int | float) and not isinstance(value, bool) and (
                    value > float(bound[2]) if bound[1] == "<=" else value < float(bound[2])):
                return f"{path.removesuffix('[...]')}.{key}"
    return path


_NO_REGIONS: frozenset[str] = frozenset()


def to_docs(req: RerankRequest, max_documents: int, max_text_chars: int) -> list[Doc]:
    """Check what types cannot (limits, unique ids) and build Docs, canonical URLs resolved."""
    if len(req.documents) > max_documents:
        raise FieldError("documents", f"{len(req.documents)} documents, over the limit "
                         f"of {max_documents}", status=413)
    ids = [d.id for d in req.documents]
    dup_at, first = -1, -1
    if len(set(ids)) != len(ids):  # rare: find the first repeat, raised in document order
        seen: dict[str, int] = {}
        for i, id_ in enumerate(ids):
            if id_ in seen:
                dup_at, first = i, seen[id_]
                break
            seen[id_] = i
    docs: list[Doc] = []
    append, canonical_host = docs.append, canon.canonicalize_with_host
    for i, d in enumerate(req.documents):
        if i == dup_at:
            raise FieldError(f"documents[{i}].id",
                             f"duplicate id {d.id!r} (first at documents[{first}])")
        if d.text is not None and len(d.text) > max_text_chars:
            raise FieldError(f"documents[{i}].text",
                             f"{len(d.text)} characters, over the limit of {max_text_chars}",
                             status=413)
        if d.minhash is not None and max(d.minhash.values) > _U64_MAX:
            at = next(n for n, v in enumerate(d.minhash.values) if v > _U64_MAX)
            raise FieldError(f"documents[{i}].minhash.values[{at}]",
                             "must be an unsigned 64-bit integer (<= 2**64 - 1)")
        try:
            canonical, host = canonical_host(d.url)
        except canon.InvalidURL:
            # No browser could open it: not bad input, but no host either (a canonical
            # host is never ''), so the banlist rule removes the document, naming why.
            canonical = host = ""
        # Factors need no check here: the Score type already bounds them (finite, |x| <= 1e15).
        # Positional, in Doc's field order: a third cheaper than keywords, once per document.
        append(Doc(
            d.id, d.url, d.score, d.score, canonical, host, i + 1, d.factors, d.spam_score,
            d.adult_score, d.domain_age_days, d.is_ad, d.topics,
            frozenset([r.upper() for r in d.blocked_regions]) if d.blocked_regions
            else _NO_REGIONS,
            d.text, d.minhash, d.attributes,
        ))
    return docs


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
    value: str = PField(min_length=1, max_length=8192)
    reason: str = PField(min_length=1, max_length=1000)
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
