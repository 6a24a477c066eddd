"""Each built-in rule's parameters are checked by the engine at load (crates/engine/src/rules/
<name>.rs): a bad value is refused with the step's place and a problem naming the parameter.

The table holds one bad value per rule (a new rule adds its line, the last test says so) and
the strictness the config has always had: a string or a bool where a number goes, a float
where an integer goes, .inf and .nan, a scalar where a list goes, unknown keys.
"""
from __future__ import annotations

import pytest
import yaml

from app.config.load import load_bytes
from app.errors import ConfigError
from app.rules import RULES

# rule, phase, params (YAML), what the problem must say
BAD = [
    ("banlist", "pre-filter", "{strict: true}", "unknown field `strict`"),
    ("regional_removals", "pre-filter", "{region: RU}", "unknown field `region`"),
    ("topic_filter", "pre-filter", "{blocked_topics: [adult, 7]}",
     "blocked_topics[1]: invalid type: integer `7`"),
    ("safe_search", "post-filter", "{thresholds: {strict: 1.5}}",
     "thresholds.strict: 1.5 is outside [0, 1]"),
    ("spam_ban", "pre-filter", "{threshold: -0.1}", "threshold: -0.1 is outside [0, 1]"),
    ("query_hide", "pre-filter", "{match: {domains: [co.uk]}}",
     "match.domains[0]: co.uk is a public suffix"),
    ("anti_seo_reset", "rerank", "{weights: {link: 2}}", "weights.link: 2 is outside [0, 1]"),
    ("spam_demotion", "rerank", "{theta_low: 0.9, theta_high: 0.8}",
     "theta_low (0.9) must be below theta_high (0.8)"),
    ("sandbox_damping", "rerank", "{t_sandbox_days: 0}", "t_sandbox_days: 0 is not above 0"),
    ("quarantine_demotion", "rerank", "{penalty: -1}", "penalty: -1 is below 0"),
    ("query_boost", "rerank", "{match: {hosts: [a.example]}, by: 0}",
     "by: 0 changes nothing"),
    ("query_pin", "diversify", "{pin: [{url: 'https://a.example/', position: 0}]}",
     "pin[0].position: 1 to 1000"),
    ("host_crowding", "diversify", "{key: site}", "key: must be host or domain"),
    ("near_duplicates", "diversify", "{num_perm: 8}", "num_perm: 8 is outside [16, 1024]"),
    ("depth", "trim", "{k: 0}", "k: 0 is below 1"),
    ("host_quota", "trim", "{max_per_host: 0}", "max_per_host: 0 is below 1"),
    ("ad_label", "annotate", "{label: ad}", "unknown field `label`"),
    ("age_label", "annotate", "{threshold: 2}", "threshold: 2 is outside [0, 1]"),
    ("empty_result_fallback", "post-filter", "{min_age_mode: never}",
     "min_age_mode: must be strict, moderate or off"),
]

STRICT = [
    ("spam_demotion", "rerank", "{theta_low: '0.3'}", 'theta_low: invalid type: string "0.3"'),
    ("spam_demotion", "rerank", "{lambda: true}", "lambda: invalid type: boolean `true`"),
    ("spam_demotion", "rerank", "{lambda: .inf}", "lambda: inf is not a finite number"),
    ("spam_demotion", "rerank", "{theta_high: .nan}", "theta_high: NaN is not a finite number"),
    ("spam_demotion", "rerank", "{lamda: 3}", "unknown field `lamda`"),
    ("depth", "trim", "{k: 2.0}", "k: invalid type: floating point `2.0`"),
    ("depth", "trim", "{k: 1" + "0" * 30 + "}", "k: 1" + "0" * 30 + " is too large"),
    ("near_duplicates", "diversify", "{seed: -1}", "seed: invalid value: integer `-1`"),
    ("anti_seo_reset", "rerank", "{blocks: link}", "blocks: invalid type: string"),
    ("anti_seo_reset", "rerank", "{weights: {link: .inf}}",
     "weights.link: inf is not a finite number"),
    ("query_boost", "rerank", "{match: {attributes: {tier: [a]}}, by: 1}",
     "match.attributes.tier: a string, a number or a boolean"),
    ("query_pin", "diversify", "{pin: [{url: 'https://a.example/', position: 1, at: 2}]}",
     "pin[0].at: unknown field `at`"),
    ("query_hide", "pre-filter", "{when: {regions: [RUS]}, match: {hosts: [a.example]}}",
     "when.regions[0]"),
    ("query_hide", "pre-filter", "{match: {hosts: ['*.a.example']}}",
     "match.hosts[0]: \"*.a.example\" is not a host name"),
    ("query_hide", "pre-filter", "{match: {domains: [10.0.0.1]}}",
     "match.domains[0]: 10.0.0.1 is an IP address"),
    ("query_hide", "pre-filter", "{match: {attributes: {'': 1}}}",
     "match.attributes: a key cannot be empty"),
    ("query_hide", "pre-filter", "{label: 'no spaces', match: {hosts: [a.example]}}",
     "label: \"no spaces\" is not 1 to 64"),
    ("safe_search", "pre-filter", "{thresholds: {strict: 0.5, lax: 0.9}}",
     "thresholds.lax: unknown field `lax`"),
    ("topic_filter", "pre-filter", "{blocked_topics: {adult: 1}}",
     "blocked_topics: invalid type: map"),
    ("depth", "trim", "{k: 2020-01-01}", "k: a date is not a parameter value"),
]


def config(rule: str, phase: str, params: str) -> bytes:
    step = {rule: yaml.safe_load(params)}
    return yaml.safe_dump({"profiles": {"default": {phase: [step]}}}).encode()


@pytest.mark.parametrize(("rule", "phase", "params", "problem"), BAD + STRICT)
def test_a_bad_parameter_is_refused_naming_it(rule, phase, params, problem):
    with pytest.raises(ConfigError) as info:
        load_bytes(config(rule, phase, params))
    assert info.value.place == f"profiles.default.{phase}[0] {rule}"
    assert problem in info.value.problem, info.value.problem


# The bad values a variant can override: an unknown key is refused before any value is
# checked, so those cases are left to the step's test above.
OVERRIDES = [case for case in BAD
             if not set(yaml.safe_load(case[2])) - RULES[case[0]].param_names()]


@pytest.mark.parametrize(("rule", "phase", "params", "problem"), OVERRIDES)
def test_a_variant_override_is_checked_as_the_step_is(rule, phase, params, problem):
    # The same value given by an experiment's treatment variant is refused the same way.
    base = {"query_hide": "{match: {hosts: [a.example]}}",
            "query_boost": "{match: {hosts: [a.example]}, by: 1}",
            "query_pin": "{pin: [{url: 'https://b.example/', position: 2}]}"}.get(rule, "{}")
    overrides = yaml.safe_load(params)
    doc = {"profiles": {"default": {phase: [{rule: yaml.safe_load(base)}]}},
           "experiments": [{"name": "e", "unit": "user_id", "rules": [rule],
                            "variants": {"t": {"weight": 50, "params": {rule: overrides}}}}]}
    with pytest.raises(ConfigError) as info:
        load_bytes(yaml.safe_dump(doc).encode())
    assert info.value.place == (f"profiles.default.{phase}[0] {rule} with experiments e "
                                "variant t")
    assert problem in info.value.problem, info.value.problem


def test_every_built_in_rule_has_a_bad_value_above():
    assert [rule for rule, *_ in BAD] == list(RULES)


def test_defaults_are_the_engines_and_filled_at_load():
    engine = load_bytes(b"profiles: {default: {rerank: [spam_demotion]}}")
    (_, step), = engine.profiles["default"].rules()
    assert step.rule.params == {"theta_low": 0.3, "theta_high": 0.8, "lambda": 5.0}
    assert RULES["spam_demotion"].schema["properties"]["lambda"]["default"] == 5.0
