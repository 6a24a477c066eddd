"""The /v1/rerank wire is defined once, in the engine (crates/engine/src/wire.rs): its JSON
Schemas are the OpenAPI document's, and the hand-written decoder and writer are held to them.

- Bodies generated from the request schema (hypothesis, reading the exported schema alone)
  are answered by the engine (`Engine.rerank` on a profile of no rules); the same bodies
  with one value made invalid by the schema (the `jsonschema` library agrees it is) are
  refused with a 422 naming that field.
- Real answers validate against the response schema, with every object closed: a field the
  engine writes and the schema lacks means the schema lags.
(tests/api/test_fuzz.py runs schemathesis over the whole document as well.)
"""
from __future__ import annotations

import json
import re
import string
from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.api.contract import wire_schemas
from app.main import create_app
from tests.conftest import AUTH
from tests.sides import EngineLoaded, only

SCHEMAS = wire_schemas()
PREFIX = "#/components/schemas/"
LIMITS = (1000, 100_000)  # max documents, max text characters: above any generated page


def validator(name: str) -> jsonschema.Draft202012Validator:
    root = {"$ref": PREFIX + name, "components": {"schemas": SCHEMAS}}
    return jsonschema.Draft202012Validator(root)


def values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid by `schema`, for the keywords the wire's schemas use."""
    if "$ref" in schema:
        return st.deferred(lambda: values(SCHEMAS[schema["$ref"].removeprefix(PREFIX)]))
    if "anyOf" in schema:
        return st.one_of([values(s) for s in schema["anyOf"]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    return st.one_of([_typed(kind, schema) for kind in kinds])


def _typed(kind: str, schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "number":
        return st.floats(schema.get("minimum"), schema.get("maximum"), allow_nan=False,
                         allow_infinity=False) | st.integers(
            int(schema.get("minimum", -1e15)), int(schema.get("maximum", 1e15)))
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"].rstrip("$") + r"\Z")
        return st.text(min_size=schema.get("minLength", 0),
                       max_size=min(schema.get("maxLength", 12), 12))
    if kind == "array":
        return st.lists(values(schema.get("items", {"type": "string"})),
                        min_size=schema.get("minItems", 0),
                        max_size=min(schema.get("maxItems", 4), 4))
    props = schema.get("properties", {})
    required = set(schema.get("required", ()))
    extra = schema.get("additionalProperties", True)
    base = st.fixed_dictionaries(
        {k: values(v) for k, v in props.items() if k in required},
        optional={k: values(v) for k, v in props.items() if k not in required})
    if isinstance(extra, dict):
        return st.dictionaries(st.text(max_size=8), values(extra), max_size=3)
    if extra is True:
        return base | st.dictionaries(st.text(max_size=8), st.integers(), max_size=3)
    return base


def unique_ids(body: dict[str, Any]) -> bool:
    ids = [d["id"] for d in body["documents"]]
    return len(ids) == len(set(ids))


# An engine with a profile that runs no rule: what it answers is the decoder's verdict.
NO_RULES = EngineLoaded(only("rerank").encode()).core


def decode(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(status, body) of the engine's answer to `body`. A profile is any string to the
    wire but one the config names to the engine: a named one is renamed to its one."""
    if "profile" in body:
        body = {**body, "profile": "default"}
    answer = NO_RULES.rerank(json.dumps(body, ensure_ascii=False).encode(),
                             max_documents=LIMITS[0], max_text_chars=LIMITS[1])
    assert answer is not None
    status, out, _, _, _ = answer
    return status, json.loads(out)


BODIES = values({"$ref": PREFIX + "RerankRequest"}).filter(unique_ids)


def test_the_region_pattern_admits_the_assigned_codes_in_any_case_and_nothing_else():
    from iso3166 import countries_by_alpha2
    pattern = SCHEMAS["Query"]["properties"]["region"]["pattern"]
    pairs = [a + b for a in string.ascii_letters for b in string.ascii_letters]
    assert {p for p in pairs if re.fullmatch(pattern, p)} == {
        p for p in pairs if p.upper() in countries_by_alpha2}
    assert SCHEMAS["Document"]["properties"]["blocked_regions"]["items"]["pattern"] == pattern


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BODIES)
@pytest.mark.python_path("calls the engine itself, sends no request")
def test_every_body_the_schema_allows_is_decoded(body):
    validator("RerankRequest").validate(body)
    status, out = decode(body)
    assert status == 200, out


# One value made invalid: (where, the bad value, the field the refusal names).
BREAKS = [
    (("documents", 0, "score"), 2e15, "documents[0].score"),
    (("documents", 0, "score"), "1", "documents[0].score"),
    (("documents", 0, "id"), "", "documents[0].id"),
    (("documents", 0, "id"), "x" * 513, "documents[0].id"),
    (("documents", 0, "spam_score"), 1.5, "documents[0].spam_score"),
    (("documents", 0, "adult_score"), -0.1, "documents[0].adult_score"),
    (("documents", 0, "domain_age_days"), -1, "documents[0].domain_age_days"),
    (("documents", 0, "blocked_regions"), ["RUS"], "documents[0].blocked_regions[0]"),
    (("documents", 0, "minhash"), {"values": [], "shingles": 1, "width": 1, "seed": 0},
     "documents[0].minhash.values"),
    (("documents", 0, "minhash"), {"values": [1], "shingles": 1, "width": 101, "seed": 0},
     "documents[0].minhash.width"),
    (("documents", 0, "minhash"), {"values": [2**64], "shingles": 1, "width": 1, "seed": 0},
     "documents[0].minhash.values[0]"),
    (("documents", 0, "surprise"), 1, "documents[0].surprise"),
    (("query", "region"), "RU\n", "query.region"),
    (("query", "region"), "ru-RU", "query.region"),
    (("query", "age_mode"), "lax", "query.age_mode"),
    (("query", "text"), "q" * 4097, "query.text"),
    (("depth",), 0, "depth"),
    (("depth",), 10_001, "depth"),
    (("request_id",), 5, "request_id"),
    (("unit", "user_id"), 7, "unit.user_id"),
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BODIES.filter(lambda b: b["documents"]), st.sampled_from(BREAKS))
@pytest.mark.python_path("calls the engine itself, sends no request")
def test_a_body_the_schema_refuses_is_refused_naming_the_field(body, brk):
    where, bad, field = brk
    at = body
    for step in where[:-1]:
        at = at.setdefault(step, {}) if isinstance(step, str) else at[step]
    at[where[-1]] = bad
    assert not validator("RerankRequest").is_valid(body)
    status, out = decode(body)
    named, problem = out.get("field"), out.get("problem")
    assert (status, named) == (422, field), out
    assert problem and "msgspec" not in problem


PAGE = {"request_id": "r", "unit": {"user_id": "u1"}, "query": {"age_mode": "strict"},
        "documents": [
            {"id": "a", "url": "https://a.example/1", "score": 3, "is_ad": True},
            {"id": "b", "url": "https://a.example/2", "score": 2},
            {"id": "c", "url": "https://a.example/3", "score": 1},
            {"id": "d", "url": "http://[", "score": 1, "spam_score": 0.9, "adult_score": 0.9}]}


def closed(schema: Any) -> Any:
    """`schema` with every object closed to fields it does not name."""
    if isinstance(schema, dict):
        out = {k: closed(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    return [closed(s) for s in schema] if isinstance(schema, list) else schema


def strict(name: str) -> jsonschema.Draft202012Validator:
    root = {"$ref": PREFIX + name, "components": {"schemas": closed(SCHEMAS)}}
    return jsonschema.Draft202012Validator(root)


def test_the_engine_writes_exactly_the_documented_response(client):
    r = client.post("/v1/rerank", json=PAGE)
    assert r.status_code == 200, r.text
    answer = r.json()
    strict("RerankResponse").validate(answer)
    assert answer["audit"] and answer["removed"] and answer["experiments"]
    assert answer["documents"][0]["annotations"] and any(
        d["collapsed"] for d in answer["documents"])
    explained = client.post("/v1/rerank", json=PAGE,
                            headers={"X-Rearrange-Explain": "true", **AUTH})
    assert explained.status_code == 200, explained.text
    assert explained.json()["explain"]["steps"]
    strict("RerankResponse").validate(explained.json())


def test_a_page_skipping_a_rule_is_the_documented_response(settings):
    settings = settings.model_copy(update={"deadline_ms": 1e-6})
    with TestClient(create_app(settings)) as client:
        texts = [{**d, "text": "the same template text of more than ten words on every page"}
                 for d in PAGE["documents"][:3]]
        late = client.post("/v1/rerank", json={"documents": texts}).json()
    strict("RerankResponse").validate(late)
    assert late["skipped"]


def test_refusals_are_the_documented_error_body(client):
    for raw in (b'{"documents": [{"id": 1}]}', b"{", b'{"documents":[],"profile":"nope"}'):
        r = client.post("/v1/rerank", content=raw,
                        headers={"content-type": "application/json"})
        assert r.status_code in (400, 422), r.text
        strict("ErrorBody").validate(r.json())
        assert r.json()["field"] and not re.search(r"Expected `|msgspec", r.json()["problem"])
