"""The compiled spec the Rust engine is built from: profiles resolved, steps in run order,
parameters validated with every default filled under their YAML names, JSON-native."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from app.config.load import load_bytes, load_file
from app.config.spec import compile_spec

ROOT = Path(__file__).resolve().parents[2]
STEP_KEYS = ["phase", "rule", "params", "on_error", "enabled", "valid_from", "valid_until",
             "window", "experiment", "variants", "python", "variant_python", "timeout_ms"]


def spec_of(engine):
    text, instances = compile_spec(engine)
    return json.loads(text), instances


def by_rule(steps):
    return {(s["phase"], s["rule"]): s for s in steps}


def test_the_sample_config():
    engine = load_file(ROOT / "config" / "rules.yaml")
    spec, instances = spec_of(engine)
    assert instances == []
    assert list(spec) == ["version", "profiles", "routing", "experiments", "holdout"]
    assert spec["version"] == engine.version and len(spec["version"]) == 16
    assert spec["routing"] == {"commercial": "commercial", "ymyl": "commercial"}
    assert spec["holdout"] is None
    assert spec["experiments"] == [{"name": "antispam_v7", "unit": "user_id",
                                    "variants": [["control", 5000], ["treatment", 10000]],
                                    "salt": "", "layer": None, "slots": [0, 10000]}]
    default, commercial = spec["profiles"]["default"], spec["profiles"]["commercial"]
    assert [(s["phase"], s["rule"]) for s in default] == [
        ("pre-filter", "banlist"), ("pre-filter", "regional_removals"),
        ("pre-filter", "safe_search"), ("pre-filter", "spam_ban"),
        ("rerank", "spam_demotion"), ("rerank", "quarantine_demotion"),
        ("rerank", "sandbox_damping"),
        ("diversify", "host_crowding"), ("diversify", "near_duplicates"), ("trim", "depth"),
        ("annotate", "ad_label"), ("annotate", "age_label"),
        ("post-filter", "safe_search"), ("post-filter", "empty_result_fallback")]
    # extends applied: commercial's own rerank, every other phase inherited
    assert [s["rule"] for s in commercial if s["phase"] == "rerank"] == [
        "anti_seo_reset", "spam_demotion", "quarantine_demotion", "sandbox_damping"]
    assert [s for s in commercial if s["phase"] != "rerank"] == \
        [s for s in default if s["phase"] != "rerank"]
    for step in default + commercial:
        assert list(step) == STEP_KEYS
        assert step["on_error"] == ("closed" if step["phase"] in ("pre-filter", "post-filter")
                                    else "open")
        assert step["enabled"] is True and step["valid_from"] is step["valid_until"] is None
        assert step["python"] is None and step["variant_python"] == {}
    steps = by_rule(commercial)
    assert steps[("rerank", "spam_demotion")]["experiment"] == "antispam_v7"
    assert steps[("rerank", "spam_demotion")]["params"] == {
        "theta_low": 0.3, "theta_high": 0.8, "lambda": 5.0}  # the YAML name, not lambda_
    assert steps[("rerank", "anti_seo_reset")]["params"] == {"blocks": ["link", "behav"],
                                                            "weights": {}}
    assert steps[("pre-filter", "safe_search")]["params"] == {
        "thresholds": {"strict": 0.5, "moderate": 0.8}}
    assert steps[("post-filter", "safe_search")]["params"] == {  # bare: defaults filled
        "thresholds": {"strict": 0.5, "moderate": 0.8}}
    assert steps[("post-filter", "empty_result_fallback")]["params"] == {
        "strategy": "relax", "min_age_mode": "moderate"}
    assert steps[("diversify", "near_duplicates")]["params"]["method"] == "auto"
    assert steps[("trim", "depth")]["params"] == {"k": 10}
    assert steps[("annotate", "ad_label")]["params"] == {}


def test_the_experiments_example():
    spec, _ = spec_of(load_file(ROOT / "config" / "experiments.example.yaml"))
    assert spec["holdout"] == {"unit": "user_id", "upper": 200, "salt": ""}
    antispam, sandbox = spec["experiments"]
    assert antispam == {"name": "antispam_v7", "unit": "user_id",
                        "variants": [["control", 5000], ["treatment", 7500],
                                     ["lambda3", 10000]],
                        "salt": "", "layer": "ranking", "slots": [0, 3000]}
    assert (sandbox["salt"], sandbox["slots"], sandbox["variants"]) == (
        "2026-11-restart", [3000, 6000], [["control", 1000], ["treatment", 2000]])
    steps = by_rule(spec["profiles"]["default"])
    demotion = steps[("rerank", "spam_demotion")]
    # the variant's params are the profile's merged with its overrides, defaults filled
    assert demotion["variants"] == {"lambda3": {"theta_low": 0.3, "theta_high": 0.8,
                                                "lambda": 3.0}}
    assert steps[("rerank", "sandbox_damping")]["experiment"] == "sandbox_v2"
    assert steps[("rerank", "sandbox_damping")]["variants"] == {}


def test_params_are_as_the_engine_checked_them_and_reserved_keys_become_fields():
    spec, _ = spec_of(load_bytes(b"""
profiles:
  default:
    pre-filter:
      - {topic_filter: {blocked_topics: [casino, adult, betting], on_error: open,
                        valid_from: 2027-01-01T00:00:00Z, valid_until: '2027-01-01T06:00:00+03:00'}}
    rerank: [{spam_demotion: {enabled: false}}]
"""))
    topic, demotion = spec["profiles"]["default"]
    assert topic["params"] == {"blocked_topics": ["casino", "adult", "betting"]}
    start = dt.datetime(2027, 1, 1, tzinfo=dt.UTC).timestamp()
    assert (topic["on_error"], topic["valid_from"], topic["valid_until"]) == (
        "open", start, start + 3 * 3600)
    assert isinstance(topic["valid_from"], float)
    assert (demotion["enabled"], demotion["on_error"]) == (False, "open")
    assert "enabled" not in demotion["params"]


@pytest.mark.usefixtures("plugin_path")
def test_python_rules_are_indexes_into_the_instance_list():
    engine = load_bytes(b"""
plugins: [rr_business]
profiles:
  default:
    pre-filter: [banlist, {drop_topic: {topic: poker, note: [b, a]}}]
    rerank: [{demote_host: {host: b.example}}]
  shop:
    extends: default
    rerank: [{demote_host: {host: c.example, by: 2, on_error: closed}}]
experiments:
  - {name: demote_v1, unit: user_id, rules: [demote_host],
     variants: {control: 50, harder: {weight: 50, params: {demote_host: {by: 4}}}}}
""")
    spec, instances = spec_of(engine)
    default, shop = spec["profiles"]["default"], spec["profiles"]["shop"]
    drop = by_rule(default)[("pre-filter", "drop_topic")]
    # no Params: the dict as given (lists stay lists), the reserved keys out
    assert drop["params"] == {"topic": "poker", "note": ["b", "a"]}
    assert drop["on_error"] == "closed" and drop["experiment"] is None
    demote = by_rule(default)[("rerank", "demote_host")]
    assert demote["params"] == {"host": "b.example", "by": 1.0}
    assert demote["experiment"] == "demote_v1"
    assert demote["variants"] == {"harder": {"host": "b.example", "by": 4.0}}
    shop_demote = by_rule(shop)[("rerank", "demote_host")]
    assert shop_demote["params"] == {"host": "c.example", "by": 2.0}
    assert shop_demote["on_error"] == "closed"
    assert shop_demote["variants"] == {"harder": {"host": "c.example", "by": 4.0}}
    indexes = [s["python"] for s in default + shop if s["python"] is not None]
    indexes += [i for s in default + shop for i in s["variant_python"].values()]
    assert sorted(indexes) == list(range(len(instances))) == list(range(6))
    assert by_rule(default)[("pre-filter", "banlist")]["python"] is None
    # every index names the instance that step was built with
    steps = {s.rule.name: s for _, s in engine.profiles["default"].rules()}
    assert instances[demote["python"]] is steps["demote_host"].rule.handle
    assert instances[demote["variant_python"]["harder"]] is \
        steps["demote_host"].variants["harder"].handle
    assert instances[drop["python"]] is steps["drop_topic"].rule.handle


def test_a_window_is_handed_to_the_engine_as_explain_says_it():
    engine = load_bytes(b"""
profiles:
  default:
    trim:
      - {depth: {valid_from: "2026-12-24T00:00:00+03:00", valid_until: "2026-12-27T00:00:00Z"}}
    annotate: [{ad_label: {valid_until: "2027-01-01T00:00:00Z"}}, age_label]
""")
    spec, _ = spec_of(engine)
    assert [s["window"] for s in spec["profiles"]["default"]] == [
        "valid from 2026-12-23T21:00:00Z until 2026-12-27T00:00:00Z",
        "valid until 2027-01-01T00:00:00Z", None]
