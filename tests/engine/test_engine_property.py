"""The Rust engine on random configs, pages and banlists: what every answer must satisfy,
whatever the rules did (CONTRACT "Response", "Audit"). No second implementation: each
property follows from the contract alone.

- Errors have the contract's shape; an unknown profile is a 422 naming `profile`.
- Served documents are a subset of those sent, each once, with their own URL, original
  score and original position, numbered 1, 2, 3, ...
- Records explain every change: a document not served was removed, trimmed or collapsed by
  an applied record, and `removed` repeats those records; a served document whose score
  changed has an applied rescore record.
- A banned document is never served when the profile runs the banlist.
- Shadow changes nothing: without the shadowed rule, the same page is served.
- The audit line, written when there is something to say, is the response's records,
  each with its document's URL and host.
- A bad document is refused with a 4xx naming that document's field.
"""
from __future__ import annotations

from typing import Any

import orjson
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app._engine import EngineMetrics
from app.banlist import canon
from app.banlist.base import EntrySpec, prepare
from app.banlist.index import BanIndex
from app.config.load import Engine, load_bytes
from app.config.spec import with_core
from app.errors import BanlistError
from tests.strategies import bans, bodies, configs

NOW = 1_900_000_000.0
VERSION = 42
# Examples per test (docs/development.md says how the counts were chosen): 200 draws of the
# whole pipeline reach as much of the engine as 300 did.
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))


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


def answer(yaml_text: str, body: dict[str, Any], banned: list[Any]
           ) -> tuple[int, dict[str, Any], bytes | None]:
    return answer_on(load_bytes(yaml_text.encode()), body, banned)


def answer_on(config: Engine, body: dict[str, Any], banned: list[Any]
              ) -> tuple[int, dict[str, Any], bytes | None]:
    """`answer` on a config loaded already (a test that reads it too loads it once)."""
    core = with_core(config, EngineMetrics()).core
    status, out, line, _, _ = core.rerank(orjson.dumps(body),
                                       banlist=BanIndex(banned, version=VERSION), now=NOW)
    return status, orjson.loads(out), line


def assert_error_shape(status: int, out: dict[str, Any], body: dict[str, Any],
                       config: Engine) -> None:
    if status == 503:
        assert out["error"] == "rule_failed" and set(out) == {"error", "rule", "phase",
                                                               "problem"}
        return
    assert status == 422 and out["error"] == "invalid_request", out
    assert set(out) == {"error", "field", "problem"} and out["problem"]
    if body.get("profile") not in config.profiles:
        assert out["field"] == "profile"


def profile_rules(config: Engine, profile: str) -> set[tuple[str, str]]:
    """(phase, rule) of every step the profile runs (extends resolved by the loader)."""
    return {(phase.value, step.rule.name) for phase, step in config.profiles[profile].rules()}


@SETTINGS
@given(configs(), bodies(("default", "commercial", "missing")), bans())
def test_every_answer_keeps_the_contracts_invariants(yaml_text, body, specs):
    banned = entries(specs)
    config = load_bytes(yaml_text.encode())
    status, out, _ = answer_on(config, body, banned)
    if status != 200:
        assert_error_shape(status, out, body, config)
        return
    assert out["request_id"] == "prop" and out["banlist_version"] == VERSION
    sent = {d["id"]: (n, d) for n, d in enumerate(body["documents"], 1)}
    served = [d["id"] for d in out["documents"]]
    assert len(set(served)) == len(served) and set(served) <= set(sent)
    for position, doc in enumerate(out["documents"], 1):
        n, mine = sent[doc["id"]]
        assert (doc["position"], doc["original_position"]) == (position, n)
        assert (doc["url"], doc["original_score"]) == (mine["url"], mine["score"])
        if doc["score"] != doc["original_score"]:
            assert any(r["doc_id"] == doc["id"] and r["action"] == "rescore"
                       and r["mode"] == "applied" for r in out["audit"]), doc["id"]
    applied = [r for r in out["audit"] if r["mode"] == "applied"]
    gone = {r["doc_id"] for r in applied if r["action"] in ("remove", "trim", "collapse")}
    assert set(sent) - set(served) <= gone
    for removed in out["removed"]:
        assert removed["id"] not in served
        assert {"rule": removed["rule"], "phase": removed["phase"], "doc_id": removed["id"],
                "action": removed["action"], "reason": removed["reason"], "delta": None,
                "mode": "applied"} in applied
    if ("pre-filter", "banlist") in profile_rules(config, out["profile"]):
        index = BanIndex(banned)
        region = (body["query"].get("region") or "").upper() or None
        kept = [sent[i][1] for i in served] + [
            sent[c["id"]][1] for d in out["documents"] for c in d["collapsed"]]
        for doc in kept:
            url, host = canon.canonicalize_with_host(doc["url"])
            assert index.match(url, host, region, NOW) is None, doc["url"]


def without_rule(yaml_text: str, rule: str) -> str:
    """The config with `rule` taken out of every profile, and no experiments."""
    config = yaml.safe_load(yaml_text)
    config.pop("experiments", None)
    for profile in config["profiles"].values():
        for phase, steps in list(profile.items()):
            if phase != "extends":
                profile[phase] = [s for s in steps
                                  if (s if isinstance(s, str) else next(iter(s))) != rule]
    return yaml.safe_dump(config, sort_keys=False, allow_unicode=True)


# Every config gates a rule with every unit in control, every body has a unit: about
# four draws in ten put a rule in shadow that acts on the page, where one in fourteen of
# the pipeline's own draws did; 100 check the property more often than 300 of those.
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(configs(shadow=True), bodies(("default", "commercial"), unit=True), bans())
def test_shadow_changes_nothing(yaml_text, body, specs):
    """A unit in an experiment's control arm sees its gated rule in shadow: its records
    say what it would have done, and the page is the one served without the rule."""
    banned = entries(specs)
    status, out, _ = answer(yaml_text, body, banned)
    shadowed = {r["rule"] for r in out.get("audit", ()) if r["mode"] == "shadow"}
    if status != 200 or not shadowed:
        return
    (rule,) = shadowed  # configs() gates one rule at most
    status, plain, _ = answer(without_rule(yaml_text, rule), body, banned)
    assert status == 200
    for key in ("documents", "removed", "fallback"):
        assert plain[key] == out[key], key
    assert plain["audit"] == [r for r in out["audit"] if r["mode"] != "shadow"]


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(configs(), bodies(("default", "commercial")), bans())
def test_the_audit_line_is_the_responses_records_with_urls_and_hosts(yaml_text, body, specs):
    status, out, line = answer(yaml_text, body, entries(specs))
    if status != 200:
        assert line is None
        return
    # a line for every request with something to say: a record, an assignment, a skip
    assert (line is None) == (not out["audit"] and not out["experiments"]
                              and not out.get("skipped")), out
    if line is None:
        return
    got = orjson.loads(line)
    assert got["request_id"] == out["request_id"] and got["ts"] == NOW
    assert got["experiments"] == out["experiments"]
    urls = {d["id"]: d["url"] for d in body["documents"]}
    assert [{k: v for k, v in r.items() if k not in ("url", "host")} for r in got["audit"]
            ] == out["audit"]
    for record in got["audit"]:
        url = urls.get(record["doc_id"])
        assert record["url"] == url
        if url is not None and record["host"] is not None:
            assert record["host"] == canon.canonicalize_with_host(url)[1]


# Twelve corruptions, each refused before any rule runs: 100 draws try each of them
# about eight times, on pages of every size, and reach the decoder as 200 did. (An empty
# `url` is not one: no browser opens it, so the banlist rule removes it, page served.)
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(configs(), bodies(), st.sampled_from([
    ("score", "x"), ("score", 1e16), ("spam_score", 1.5), ("adult_score", -0.1),
    ("id", ""), ("id", 7), ("url", 7), ("topics", "casino"), ("is_ad", "yes"),
    ("domain_age_days", -1), ("factors", {"link": "x"}), ("extra_field", 1),
]))
def test_a_bad_document_is_refused_naming_its_field(yaml_text, body, corruption):
    field, value = corruption
    body["documents"] = body["documents"] or [{"id": "d0", "url": "http://a.example/",
                                               "score": 1.0}]
    body["documents"][-1][field] = value
    status, out, line = answer(yaml_text, body, [])
    assert status == 422 and line is None
    assert out["error"] == "invalid_request"
    assert out["field"].startswith(f"documents[{len(body['documents']) - 1}].{field}"), out
