"""Python rules run by the Rust engine on random pages and rule behaviours: every answer
keeps the contract's promises (CONTRACT "Python rules", "When a rule fails").

The rule (tests/plugins/rr_drawn.py) does what hypothesis draws per step: raises, returns
something of the wrong shape, or returns a subset or permutation of its input with scores
changed (NaN, infinities, past ±1e15, ints, bools, strings among them), with the records
the changes need or not, and with drawn records, good or bad (unknown ids, actions the
runner refuses, missing and extra keys, deltas that are no finite number). One record of
each accepted output echoes the documents and context the rule was handed.

Whatever the rule did: a failure of a closed step answers 503 naming it; a failure of an
open one is skipped and said so; what is served is a subset of what was sent, each once,
with finite scores, every document that is missing explained by an applied record; what
a rule was handed is the page's own documents and the context of its step.
"""
from __future__ import annotations

import importlib
import json
import math
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from app._engine import BanIndex, EngineMetrics
from app.config.load import load_bytes
from app.config.spec import with_core
from tests.engine.test_engine_property import NOW, VERSION
from tests.strategies import bodies

pytestmark = pytest.mark.usefixtures("plugin_path")

PHASES = ("pre-filter", "rerank", "diversify", "trim", "annotate", "post-filter")
# Built-ins around the drawn steps: collapses (documents that leave with a removed one),
# a rescoring before the sort, a trim and a label after the rule, and the fallback.
BUILTINS = {"rerank": ["spam_demotion"], "diversify": [{"host_crowding": {"max_per_host": 1}}],
            "trim": [{"depth": {"k": 6}}], "annotate": ["ad_label"],
            "post-filter": [{"empty_result_fallback": {"strategy": "message"}}]}

FINITE = st.floats(-1e6, 1e6, allow_nan=False)
SCORES = st.one_of(
    FINITE, FINITE, FINITE,
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e15, -1e15, 1e16, -0.0, 0.0,
                     True, None, "1.0", 3, -2, 2**70, 10**400, 1e300]))
DELTAS = st.one_of(st.none(), st.floats(-10, 10, allow_nan=False), st.integers(-5, 5),
                   st.sampled_from([float("nan"), float("inf"), True, "0.5", 2**70, 2**63,
                                    -2**63, 1e300, [1]]))
RECORDS = st.fixed_dictionaries({
    "doc": st.one_of(st.integers(0, 30), st.sampled_from(["x", None, 5.0, "stranger"])),
    "action": st.sampled_from(["remove", "trim", "rescore", "move", "annotate", "collapse",
                               "fallback", None, 3, ["move"], "Move"]),
    "reason": st.one_of(st.text(max_size=6), st.sampled_from([None, 1, b"x"])),
    "delta": DELTAS,
    "drop": st.lists(st.sampled_from(["doc_id", "action", "reason", "delta"]), max_size=2),
    "extra": st.sampled_from([None, None, None, "mode", "rule", "zeta", "Alpha"]),
})
OUTPUTS = st.fixed_dictionaries({
    "kind": st.just("output"),
    # Mostly a subset in a new order (each document at most once), sometimes positions
    # that may repeat.
    "order": st.one_of(st.sampled_from(["same", "reverse"]),
                       st.fixed_dictionaries({"keys": st.lists(FINITE, min_size=1, max_size=8),
                                              "keep": st.lists(st.booleans() | st.just(True),
                                                               min_size=1, max_size=8)}),
                       st.fixed_dictionaries({"keys": st.just([0.0]),
                                              "keep": st.lists(st.booleans() | st.just(True),
                                                               min_size=1, max_size=8)}),
                       st.lists(st.integers(0, 30), max_size=12)),
    "scores": st.lists(st.tuples(st.integers(0, 30), SCORES), max_size=3),
    "stranger": st.sampled_from([False, False, False, True]),
    "auto": st.sampled_from([True, True, False]),
    "drop_action": st.sampled_from(["remove", "trim"]),
    "rescore_delta": st.one_of(st.none(), st.just(0.25), st.just(3)),
    "move_delta": st.one_of(st.none(), st.just(1), st.just(-0.5)),
    "records": st.just([]) | st.just([]) | st.lists(RECORDS, max_size=3),
    "corrupt": st.none() | st.none() | st.none() | st.tuples(st.integers(0, 30), st.sampled_from(
        ["not_dict", "no_id", "int_id", "no_score", "record_not_dict"])),
    "echo": st.booleans(),
})
RAISES = st.fixed_dictionaries({"kind": st.just("raise"), "exc": st.sampled_from(
    ["ValueError", "KeyError", "ZeroDivisionError", "RuntimeError"])})
SHAPES = st.fixed_dictionaries({"kind": st.just("shape"), "shape": st.integers(0, 9)})
# Outputs mostly: a failure anywhere in a closed step answers the whole request 503.
PLANS = st.integers(0, 9).flatmap(lambda k: RAISES if k == 0 else SHAPES if k == 1 else OUTPUTS)


@st.composite
def setups(draw: st.DrawFn) -> tuple[str, dict[int, dict[str, Any]]]:
    """A config with drawn steps in some phases (each with a drawn on_error), built-ins
    around them, maybe an experiment putting them in shadow; and each step's plan."""
    profile: dict[str, list[Any]] = {}
    plans: dict[int, dict[str, Any]] = {}
    for phase in PHASES:
        steps: list[Any] = []
        builtins = BUILTINS.get(phase, []) if draw(st.booleans()) else []
        if phase in ("diversify", "rerank"):
            steps.extend(builtins)
        for _ in range(draw(st.integers(0, 2))):
            k = len(plans)
            params: dict[str, Any] = {"step": k}
            on_error = draw(st.sampled_from([None, "open", "open", "closed"]))
            if on_error is not None:
                params["on_error"] = on_error
            steps.append({"drawn": params})
            plans[k] = draw(PLANS)
        if phase not in ("diversify", "rerank"):
            steps.extend(builtins)
        if steps:
            profile[phase] = steps
    config: dict[str, Any] = {"plugins": ["rr_drawn"], "profiles": {"default": profile}}
    if plans and draw(st.integers(0, 3)) == 0:
        config["experiments"] = [{"name": "exp_d", "unit": "user_id", "rules": ["drawn"],
                                  "variants": {"control": 50, "treatment": 50}}]
    return yaml.safe_dump(config, sort_keys=False), plans


MINHASH = st.one_of(st.none(), st.builds(
    lambda values, shingles: {"values": values, "shingles": shingles, "width": 3, "seed": 1},
    st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=4), st.integers(0, 50)))


@st.composite
def pages(draw: st.DrawFn) -> dict[str, Any]:
    """A body of tests/strategies, some documents with a minhash (or null), some
    with optional fields sent at their defaults (a rule is handed them too)."""
    body = draw(bodies())
    body.pop("profile", None)
    for doc in body["documents"]:
        if draw(st.integers(0, 4)) == 0:
            doc["minhash"] = draw(MINHASH)
        if draw(st.integers(0, 4)) == 0:
            doc.update(draw(st.sampled_from([{"spam_score": 0.0}, {"is_ad": False},
                                             {"factors": {}}, {"attributes": {}},
                                             {"topics": []}, {"domain_age_days": None}])))
    return body


# 200 draws reach as much of the runner's handling of Python rules as 300 did
# (docs/development.md says how the counts were chosen).
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(setups(), pages())
def test_python_rules_answers_keep_the_contract(setup, body):
    yaml_text, plans = setup
    drawn = importlib.import_module("rr_drawn")
    drawn.PLANS.clear()
    drawn.PLANS.update(plans)
    config = load_bytes(yaml_text.encode())
    core = with_core(config, EngineMetrics()).core
    raw = orjson.dumps(body)
    status, out, _, failures, _ = core.rerank(raw, banlist=BanIndex(version=VERSION), now=NOW)
    answer = orjson.loads(out)
    event(f"status {status}")
    closed = [f for f in failures if f[3]]
    if status != 200:
        # the first closed failure stops the request; open ones before it were skipped
        assert status == 503 and closed, answer
        rule, phase, problem = closed[0][:3]
        assert answer == {"error": "rule_failed", "rule": rule, "phase": phase,
                          "problem": problem}
    else:
        assert not closed
        served = min(out.count(b'"rule":"drawn"'), 3)
        event(f"drawn records served: {served}")
        # each step that failed is said once (a post-filter step runs again on a refill)
        assert {(s["rule"], s["phase"]) for s in answer.get("skipped", [])
                if s["reason"] == "error"} == {(rule, phase) for rule, phase, *_ in failures}
        sent = {d["id"]: d for d in body["documents"]}
        ids = [d["id"] for d in answer["documents"]]
        assert len(set(ids)) == len(ids) and set(ids) <= set(sent)
        assert all(math.isfinite(d["score"]) for d in answer["documents"])
        explained = {r["doc_id"] for r in answer["audit"] if r["mode"] == "applied"
                     and r["action"] in ("remove", "trim", "collapse")}
        assert set(sent) - set(ids) <= explained
        for record in answer["audit"]:
            if record["rule"] == "drawn" and record["reason"].startswith("[["):
                handed, context = json.loads(record["reason"])  # an echo
                assert context["phase"] == record["phase"]
                assert context["profile"] == answer["profile"]
                for doc in handed:
                    assert sent[doc["id"]]["url"] == doc["url"]
    for rule, _phase, problem, _closed, profile, cause in failures:
        event(problem.split(":")[0] if problem.startswith("raised") else
              problem.removeprefix("returned output the runner refuses: ")[:24])
        assert (rule, profile) == ("drawn", "default")
        # An exception reaches the log (with the rule's traceback when the rule raised
        # it, not one of the runner's own checks); a refused output has no exception.
        if problem.startswith("raised "):
            assert isinstance(cause, Exception)
            if "drawn failure" in problem:
                assert cause.__traceback__ is not None
        else:
            assert problem.startswith("returned output the runner refuses: ")
            assert cause is None
