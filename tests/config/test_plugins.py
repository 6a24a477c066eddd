"""Python rules at config load (CONTRACT "Python rules"): the `plugins:` modules imported,
their RULES checked, each step built once as cls(params); problems name the place."""
from __future__ import annotations

import importlib

import pytest

from app.cli.main import main
from app.config.load import load_bytes
from app.config.plugins import PythonRule
from app.errors import ConfigError
from app.phases import Phase

pytestmark = pytest.mark.usefixtures("plugin_path")


def steps(engine, profile="default"):
    return [(p, s) for p, s in engine.profiles[profile].rules()]


def test_a_plugin_rule_is_built_once_per_step_with_validated_params():
    engine = load_bytes(b"""
plugins: [rr_business]
profiles:
  default:
    pre-filter: [{drop_topic: {topic: poker, on_error: open}}]
    rerank: [{demote_host: {host: b.example, by: 2}}, spam_demotion]
  shop: {extends: default}
""")
    (p1, drop), (p2, demote), (_, builtin) = steps(engine)
    assert isinstance(drop.rule, PythonRule) and isinstance(demote.rule, PythonRule)
    assert not isinstance(builtin.rule, PythonRule)
    assert (p1, drop.rule.name, p2, demote.rule.name) == \
        (Phase.PRE_FILTER, "drop_topic", Phase.RERANK, "demote_host")
    # no Params: a plain dict, the reserved keys taken out; with Params: the model
    assert drop.rule.params == {"topic": "poker"} and drop.rule.handle.instance.topic == "poker"
    assert drop.policy.on_error == "open"
    assert demote.rule.handle.instance.params.host == "b.example" and demote.rule.params.by == 2.0
    assert demote.policy.on_error == "open"  # rerank's default
    # each profile's steps are their own instances, built at load, never per request
    shop_demote = steps(engine, "shop")[1][1]
    assert shop_demote.rule.handle.instance is not demote.rule.handle.instance
    assert engine.plugins == ("rr_business",)


def test_experiments_gate_a_plugin_rule_with_variant_params():
    engine = load_bytes(b"""
plugins: [rr_business]
profiles: {default: {rerank: [{demote_host: {host: b.example}}]}}
experiments:
  - name: demote_v1
    unit: user_id
    rules: [demote_host]
    variants: {control: 50, harder: {weight: 50, params: {demote_host: {by: 4}}}}
""")
    (_, step), = steps(engine)
    assert step.experiment == "demote_v1"
    harder = step.variants["harder"]
    assert harder.params.by == 4 and harder.params.host == "b.example"
    assert harder.handle.instance is not step.rule.handle.instance and step.rule.params.by == 1.0


def place_of(yaml: bytes) -> tuple[str, str]:
    with pytest.raises(ConfigError) as err:
        load_bytes(yaml)
    return err.value.place, err.value.problem


def test_module_problems_name_the_module():
    assert place_of(b"plugins: [rr_not_there]\nprofiles: {default: {}}") == (
        "plugins[0] rr_not_there", "cannot import: ModuleNotFoundError: No module named "
        "'rr_not_there'")
    assert place_of(b"plugins: [rr_business, rr_broken_import]\nprofiles: {default: {}}") == (
        "plugins[1] rr_broken_import", "cannot import: ImportError: needs a package that is "
        "not installed")
    assert place_of(b"plugins: [rr_no_rules]\nprofiles: {default: {}}") == (
        "plugins[0] rr_no_rules", "has no RULES (a non-empty list of rule classes)")
    assert place_of(b"plugins: rr_business\nprofiles: {default: {}}")[0] == "plugins"
    place, problem = place_of(b"plugins: [rr_business, rr_business]\nprofiles: {default: {}}")
    assert place == "plugins[1] rr_business.RULES[0] demote_host"
    assert problem == "name already taken by a rule of rr_business"


@pytest.mark.parametrize(("cls", "place", "problem"), [
    ("Nameless", "RULES[0]", "Nameless has no `name`"),
    ("Phaseless", "RULES[0] phaseless", "no `phases`"),
    ("BadPhase", "RULES[0] bad_phase", "phases: 'sorting' is not a phase"),
    ("Builtin", "RULES[0] depth", "the name of a built-in rule"),
    ("NotCallable", "RULES[0] not_callable", "instances must be callable"),
])
def test_class_problems_name_the_class(monkeypatch, cls, place, problem):
    module = importlib.import_module("rr_bad_classes")
    monkeypatch.setattr(module, "RULES", [getattr(module, cls)])
    got = place_of(b"plugins: [rr_bad_classes]\nprofiles: {default: {}}")
    assert got[0] == f"plugins[0] rr_bad_classes.{place}"
    assert problem in got[1]
    monkeypatch.setattr(module, "RULES", ["not a class"])
    assert "must be a class" in place_of(b"plugins: [rr_bad_classes]\nprofiles: {default: {}}")[1]


def test_step_problems_name_the_step(monkeypatch):
    base = b"plugins: [rr_business]\nprofiles: {default: "
    assert place_of(base + b"{trim: [{demote_host: {host: a}}]}}") == (
        "profiles.default.trim[0] demote_host", "cannot run in trim (it runs in rerank)")
    assert place_of(base + b"{rerank: [{demote_host: {host: a, bye: 2}}]}}") == (
        "profiles.default.rerank[0] demote_host", "unknown parameter 'bye'")
    place, problem = place_of(base + b"{rerank: [{demote_host: {host: a, by: 0}}]}}")
    assert (place, problem.split(":")[0]) == ("profiles.default.rerank[0] demote_host",
                                              "parameter 'by'")
    assert place_of(base + b"{rerank: [demote_host]}}")[1].startswith("parameter 'host'")
    assert place_of(base + b"{rerank: [{demote_host: {host: a, on_error: maybe}}]}}") == (
        "profiles.default.rerank[0] demote_host",
        "parameter 'on_error': must be open or closed, not 'maybe'")
    assert place_of(base + b"{pre-filter: [{drop_topic: {topic: .nan}}]}}") == (
        "profiles.default.pre-filter[0] drop_topic", "parameter value nan is not a finite number")
    without = place_of(b"profiles: {default: {rerank: [demote_host]}}")  # no plugins: unknown
    assert "unknown rule 'demote_host'" in without[1]
    module = importlib.import_module("rr_bad_classes")
    monkeypatch.setattr(module, "RULES", [module.Strict, module.Refuses])
    bad = b"plugins: [rr_bad_classes]\nprofiles: {default: "
    assert place_of(bad + b"{rerank: [{strict: {k: 1, j: 2}}]}}") == (
        "profiles.default.rerank[0] strict", "unknown parameter 'j'")
    assert place_of(bad + b"{rerank: [refuses]}}") == (
        "profiles.default.rerank[0] refuses",
        "building the rule failed: ValueError: needs a `table` parameter")


def test_experiment_problems_with_plugin_rules():
    base = b"plugins: [rr_business]\nprofiles: {default: {rerank: [{demote_host: {host: a}}]}}\n"
    assert place_of(base + b"experiments: [{name: e, unit: user_id, rules: [demote_host], "
                    b"variants: {control: 50, t: {weight: 50, params: {demote_host: "
                    b"{bye: 1}}}}}]") == ("experiments[0] e.variants.t.params.demote_host",
                                          "unknown parameter 'bye'")
    place, problem = place_of(base + b"experiments: [{name: e, unit: user_id, rules: "
                              b"[demote_host], variants: {control: 50, t: {weight: 50, params: "
                              b"{demote_host: {by: -1}}}}}]")
    assert place == "profiles.default.rerank[0] demote_host with experiments e variant t"
    assert problem.startswith("parameter 'by'")


def test_check_config_runs_the_same_code(tmp_path, capsys):
    good = tmp_path / "good.yaml"
    good.write_text("plugins: [rr_business]\nprofiles: {default: {rerank: [{demote_host: "
                    "{host: a, enabled: false}}], trim: [{depth: {valid_until: "
                    "2030-01-01T00:00:00Z}}]}}\n")
    assert main(["check-config", str(good)]) == 0
    out = capsys.readouterr().out
    assert "rerank:demote_host (python, disabled), trim:depth (windowed)" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("plugins: [rr_business]\nprofiles: {default: {annotate: [demote_host]}}\n")
    assert main(["check-config", str(bad)]) == 1
    assert "profiles.default.annotate[0] demote_host: cannot run in annotate" in \
        capsys.readouterr().err


def test_a_rule_class_a_process_cannot_import_by_its_name_is_refused(monkeypatch):
    """Rules run in processes that import their class as `module.qualname`: a class made
    in a function (or renamed after) cannot be found so, and is refused at load."""
    module = importlib.import_module("rr_bad_classes")

    def made_here():
        class Local:
            name = "local"
            phases = {"rerank"}

            def __init__(self, params):
                pass

            def __call__(self, documents, context):
                return documents, []

        return Local

    monkeypatch.setattr(module, "RULES", [made_here()])
    assert place_of(b"plugins: [rr_bad_classes]\nprofiles: {default: {rerank: [local]}}") == (
        "profiles.default.rerank[0] local",
        "class test_a_rule_class_a_process_cannot_import_by_its_name_is_refused.<locals>."
        "made_here.<locals>.Local cannot be imported as tests.config.test_plugins.test_a_rule_"
        "class_a_process_cannot_import_by_its_name_is_refused.<locals>.made_here.<locals>."
        "Local: Python rules run in processes of their own, which import the class by that "
        "name")
