"""The reserved step keys: on_error, enabled, valid_from, valid_until (CONTRACT "The config
file"), parsed at load and refused like any bad parameter, with the place named."""
from __future__ import annotations

import datetime as dt

import pytest

from app.config.load import load_bytes
from app.config.step_keys import CLOSED, OPEN, StepPolicy
from app.errors import ConfigError
from tests.sides import SIDES, document


def policies(yaml: bytes, profile: str = "default") -> dict[str, StepPolicy]:
    engine = load_bytes(yaml)
    return {f"{p.value}:{s.rule.name}": s.policy for p, s in engine.profiles[profile].rules()}


def test_on_error_defaults_closed_in_the_filters_and_open_elsewhere():
    got = policies(b"profiles: {default: {pre-filter: [banlist], rerank: [spam_demotion], "
                   b"diversify: [host_crowding], trim: [depth], annotate: [ad_label], "
                   b"post-filter: [safe_search]}}")
    assert {k: p.on_error for k, p in got.items()} == {
        "pre-filter:banlist": CLOSED, "rerank:spam_demotion": OPEN,
        "diversify:host_crowding": OPEN, "trim:depth": OPEN, "annotate:ad_label": OPEN,
        "post-filter:safe_search": CLOSED}
    assert all(p.enabled and p.always for p in got.values())


def test_reserved_keys_are_taken_out_before_the_rules_params():
    got = policies(b"""
profiles:
  default:
    pre-filter: [{banlist: {on_error: open}}]
    rerank:
      - {spam_demotion: {lambda: 3, on_error: closed, enabled: false}}
      - {sandbox_damping: {valid_from: 2027-01-01T00:00:00Z,
                           valid_until: "2027-01-01T06:00:00+03:00"}}
""")
    assert got["pre-filter:banlist"] == StepPolicy(OPEN)
    assert got["rerank:spam_demotion"] == StepPolicy(CLOSED, enabled=False)
    start = dt.datetime(2027, 1, 1, tzinfo=dt.UTC).timestamp()
    # a datetime YAML built, and a quoted string at +03:00: 06:00 there is 03:00 UTC
    assert got["rerank:sandbox_damping"] == StepPolicy(OPEN, True, start, start + 3 * 3600)
    engine = load_bytes(b"profiles: {default: {rerank: [{spam_demotion: "
                        b"{lambda: 3, on_error: closed}}]}}")
    assert engine.profiles["default"].rules()[0][1].rule.params["lambda"] == 3


def test_a_window_runs_from_its_start_until_before_its_end():
    config = (b"profiles: {default: {trim: [{depth: {k: 1, valid_from: '2027-01-01T00:00:00Z', "
              b"valid_until: '2027-01-02T00:00:00Z'}}]}}")
    policy = policies(config)["trim:depth"]
    start = dt.datetime(2027, 1, 1, tzinfo=dt.UTC).timestamp()
    assert policy.valid_until - policy.valid_from == 86400 and not policy.always
    engine = SIDES[0].load(config)
    page = [document("a", 2.0), document("b", 1.0)]
    # the trim to one document runs in [valid_from, valid_until) only
    assert [len(engine.rerank(page, now=start + s).documents) for s in (-1, 0, 86399, 86400)
            ] == [2, 1, 1, 2]
    disabled = SIDES[0].load(b"profiles: {default: {trim: [{depth: {k: 1, enabled: false}}]}}")
    assert len(disabled.rerank(page, now=start).documents) == 2


@pytest.mark.parametrize(("params", "problem"), [
    ("{on_error: ignore}", "parameter 'on_error': must be open or closed, not 'ignore'"),
    ("{on_error: true}", "parameter 'on_error': must be open or closed"),
    ("{enabled: 'no'}", "parameter 'enabled': must be true or false, not 'no'"),
    ("{enabled: 1}", "parameter 'enabled': must be true or false"),
    ("{valid_from: 2027-01-01T00:00:00}",
     "parameter 'valid_from': 2027-01-01 00:00:00 has no offset"),
    ("{valid_until: '2027-01-01T00:00:00'}",
     "parameter 'valid_until': 2027-01-01T00:00:00 has no offset"),
    ("{valid_from: 2027-01-01}", "parameter 'valid_from': 2027-01-01 is a date"),
    ("{valid_from: '2027-01-01'}", "parameter 'valid_from': '2027-01-01' is not an RFC 3339"),
    ("{valid_from: 'next tuesday'}",
     "parameter 'valid_from': 'next tuesday' is not an RFC 3339 time"),
    ("{valid_from: '2027-W01-1T00:00Z'}", "is not an RFC 3339 time"),
    ("{valid_from: 1798761600}", "parameter 'valid_from': must be an RFC 3339 time"),
    ("{valid_from: '2027-01-02T00:00:00Z', valid_until: '2027-01-01T00:00:00Z'}",
     "parameter 'valid_until': must be after valid_from"),
    ("{valid_from: '2027-01-01T00:00:00Z', valid_until: '2027-01-01T03:00:00+03:00'}",
     "parameter 'valid_until': must be after valid_from"),
])
def test_a_bad_reserved_value_is_refused_naming_the_step(params, problem):
    with pytest.raises(ConfigError) as err:
        load_bytes(("profiles: {default: {pre-filter: [regional_removals, {banlist: "
                    f"{params}}}]}}}}").encode())
    assert err.value.place == "profiles.default.pre-filter[1] banlist"
    assert problem in err.value.problem


@pytest.mark.parametrize(("params", "problem"), [
    ("{timeout_ms: 0}", "parameter 'timeout_ms': must be a positive number of milliseconds"),
    ("{timeout_ms: -5}", "parameter 'timeout_ms': must be a positive number"),
    ("{timeout_ms: '50'}", "parameter 'timeout_ms': must be a positive number"),
    ("{timeout_ms: true}", "parameter 'timeout_ms': must be a positive number"),
    ("{timeout_ms: .nan}", "parameter 'timeout_ms': must be a positive number"),
])
def test_a_bad_timeout_ms_is_refused_naming_the_step(params, problem, plugin_path):
    with pytest.raises(ConfigError) as err:
        load_bytes(f"plugins: [rr_hostile]\nprofiles: {{default: {{rerank: [{{sleeper: "
                   f"{params}}}]}}}}".encode())
    assert err.value.place == "profiles.default.rerank[0] sleeper"
    assert problem in err.value.problem


def test_timeout_ms_is_a_python_rules_own(plugin_path):
    got = policies(b"plugins: [rr_hostile]\nprofiles: {default: {rerank: [{sleeper: "
                   b"{seconds: 1, timeout_ms: 25}}]}}")
    assert got["rerank:sleeper"].timeout_ms == 25.0
    with pytest.raises(ConfigError) as err:  # a built-in runs to completion
        load_bytes(b"profiles: {default: {rerank: [{spam_demotion: {timeout_ms: 25}}]}}")
    assert err.value.place == "profiles.default.rerank[0] spam_demotion"
    assert "parameter 'timeout_ms': for Python rules only" in err.value.problem


def test_a_variant_may_not_set_a_reserved_key():
    with pytest.raises(ConfigError) as err:
        load_bytes(b"profiles: {default: {rerank: [spam_demotion]}}\nexperiments: [{name: e, "
                   b"unit: user_id, rules: [spam_demotion], variants: {control: 50, "
                   b"treatment: {weight: 50, params: {spam_demotion: {on_error: closed}}}}}]")
    assert err.value.place == "experiments[0] e.variants.treatment.params.spam_demotion"
    assert "'on_error' is a reserved step key" in err.value.problem


def test_policies_follow_extends():
    got = policies(b"profiles: {default: {trim: [{depth: {enabled: false}}]}, "
                   b"shop: {extends: default}}", "shop")
    assert got["trim:depth"].enabled is False
