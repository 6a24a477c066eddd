"""The Rust engine against the reference model (the Python request path it replaced), on
random configs, pages and banlists: the same bytes for every answer.

Both sides get the same banlist entries (each in its own index: the engine's Rust one,
the reference's Python one), the same clock reading and no deadline. Where the two must
differ by design (issue 14, CONTRACT.md), the comparison says so in `expected_bytes`.
"""
from __future__ import annotations

from typing import Any

import msgspec
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app._engine import EngineMetrics
from app.api.errors import status_of
from app.banlist.base import EntrySpec, prepare
from app.banlist.index import BanIndex
from app.config.load import load_bytes
from app.config.spec import with_core
from app.errors import BanlistError, FieldError
from tests.reference import service as reference
from tests.reference.banlist_index import BanIndex as ReferenceIndex
from tests.reference.errors import RuleFailed
from tests.reference.strategies import bans, bodies, configs

NOW = 1_900_000_000.0
VERSION = 42
_encode = msgspec.json.Encoder().encode


def entries(specs: list[dict[str, Any]]) -> list[Any]:
    """The specs as the store would commit them (normalized, ids 1..n); refused ones are
    left out, as a store refuses them."""
    out = []
    for spec in specs:
        try:
            prepared = prepare(EntrySpec(spec["scope"], spec["value"], spec["reason"],
                                         tuple(spec.get("regions", ()))), NOW, {})
        except BanlistError:
            continue
        out.append(prepared.entry(str(len(out) + 1), "tns", NOW - 100))
    return out


def error_body(status: int, field: str | None, problem: str) -> bytes:
    return orjson.dumps({"error": "invalid_request" if status < 500 else "error",
                         "field": field, "problem": problem})


def expected_answer(config: Any, raw: bytes, banned: list[Any]) -> tuple[int, bytes]:
    """What the reference model answers: (status, body)."""
    try:
        response = reference.rerank(config, raw, banlist=ReferenceIndex(banned),
                                    banlist_version=VERSION, now=NOW)
    except FieldError as exc:
        return status_of(exc), error_body(status_of(exc), exc.field, exc.problem)
    except RuleFailed as exc:
        return 503, orjson.dumps({"error": "rule_failed", "rule": exc.rule,
                                  "phase": str(exc.phase), "problem": exc.problem})
    return 200, _encode(response)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(configs(), bodies(("default", "commercial", "missing")), bans())
def test_the_engine_answers_what_the_reference_answers(yaml_text, body, specs):
    config = load_bytes(yaml_text.encode())
    core = with_core(config, EngineMetrics()).core
    banned = entries(specs)
    raw = orjson.dumps(body)
    status, out, _, _ = core.rerank(raw, banlist=BanIndex(banned, version=VERSION),
                                    now=NOW)
    want_status, want = expected_answer(config, raw, banned)
    assert status == want_status, (out, want)
    assert out == want


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(configs(), bodies(("default", "commercial")), bans())
def test_the_audit_line_is_the_references(yaml_text, body, specs):
    """The line the engine writes for the audit log: the reference's, byte for byte, each
    record carrying its document's URL and canonical host."""
    config = load_bytes(yaml_text.encode())
    core = with_core(config, EngineMetrics()).core
    banned = entries(specs)
    raw = orjson.dumps(body)
    status, _, line, _ = core.rerank(raw, banlist=BanIndex(banned, version=VERSION),
                                     now=NOW)
    try:
        response = reference.rerank(config, raw, banlist=ReferenceIndex(banned),
                                    banlist_version=VERSION, now=NOW)
    except (FieldError, RuleFailed):
        assert status != 200 and line is None
        return
    want = reference.audit_line(raw, response, NOW)
    if line is None or want is None:
        assert line is None and want is None
        return
    got = orjson.loads(line)
    want["request_id"] = got["request_id"]  # generated on each side when the body has none
    assert line == _encode(want)
    documents = {d["id"]: d["url"] for d in body["documents"]}
    assert all(r["url"] == documents.get(r["doc_id"]) for r in got["audit"])


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(configs(), bodies(), st.sampled_from([
    ("score", "x"), ("score", 1e16), ("spam_score", 1.5), ("adult_score", -0.1),
    ("id", ""), ("id", 7), ("url", ""), ("topics", "casino"), ("is_ad", "yes"),
    ("domain_age_days", -1), ("factors", {"link": "x"}), ("extra_field", 1),
]))
def test_bad_documents_get_the_reference_4xx(yaml_text, body, corruption):
    config = load_bytes(yaml_text.encode())
    core = with_core(config, EngineMetrics()).core
    field, value = corruption
    body["documents"] = body["documents"] or [{"id": "d0", "url": "http://a.example/",
                                               "score": 1.0}]
    body["documents"][-1][field] = value
    raw = orjson.dumps(body)
    status, out, _, _ = core.rerank(raw, banlist=BanIndex(version=VERSION), now=NOW)
    want_status, want = expected_answer(config, raw, [])
    assert (status, out) == (want_status, want)
