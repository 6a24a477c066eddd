"""Config loading: profiles, extends, routing, experiments, and errors that name the place."""
from __future__ import annotations

from pathlib import Path

import pytest

from app.config.load import load_bytes, load_file
from app.config.versions import ConfigHolder
from app.errors import ConfigError
from app.phases import Phase

ROOT = Path(__file__).resolve().parents[2]


def test_sample_config_loads():
    engine = load_file(ROOT / "config" / "rules.yaml")
    assert set(engine.profiles) == {"default", "commercial"}
    commercial = engine.profiles["commercial"]
    rerank = [s.rule.name for p, s in commercial.rules() if p is Phase.RERANK]
    assert rerank == ["anti_seo_reset", "spam_demotion", "quarantine_demotion", "sandbox_damping"]
    trim = [s.rule.name for p, s in commercial.rules() if p is Phase.TRIM]
    assert trim == ["depth"]  # inherited from default through extends
    assert engine.route(("navigational", "ymyl")) == "commercial"
    assert engine.route(("navigational",)) == "default"
    gated = {s.rule.name: s.experiment for _, s in commercial.rules()}
    assert gated["spam_demotion"] == "antispam_v7" and gated["sandbox_damping"] is None


def test_version_is_the_content_hash():
    a = load_bytes(b"profiles: {default: {trim: [depth]}}")
    b = load_bytes(b"profiles: {default: {trim: [depth]}}")
    c = load_bytes(b"profiles: {default: {trim: [{depth: {k: 5}}]}}")
    assert a.version == b.version != c.version


@pytest.mark.parametrize(("yaml", "place", "problem"), [
    (b"profiles: {default: {rerank: [boost]}}", "profiles.default.rerank[0]",
     "unknown rule 'boost'"),
    (b"profiles: {default: {rerank: [banlist]}}", "profiles.default.rerank[0] banlist",
     "cannot run in rerank"),
    (b"profiles: {default: {rerank: [{spam_demotion: {lamda: 3}}]}}",
     "profiles.default.rerank[0] spam_demotion", "unknown field `lamda`"),
    (b"profiles: {default: {rerank: [{spam_demotion: {lambda: -1}}]}}",
     "profiles.default.rerank[0] spam_demotion", "lambda: -1 is below 0"),
    (b"profiles: {default: {rerank: [{spam_demotion: {theta_low: '0.3'}}]}}",
     "profiles.default.rerank[0] spam_demotion", "theta_low: invalid type: string \"0.3\""),
    (b"profiles: {default: {trim: [{depth: {k: 0}}]}}", "profiles.default.trim[0] depth",
     "k: 0 is below 1"),
    (b"profiles: {default: {}, c: {extends: nope}}", "profiles.c.extends",
     "no profile named 'nope'"),
    (b"profiles: {default: {extends: c}, c: {extends: default}}", "profiles.default",
     "extends cycle"),
    (b"profiles: {default: {sort: []}}", "profiles.default.sort", "unknown phase"),
    (b"profiles: {other: {}}", "profiles", "`default` profile is required"),
    (b"profiles: {default: {}}\nrouting: {commercial: shop}", "routing.commercial",
     "missing profile 'shop'"),
    (b"profiles: {default: {}}\nexperiments: [{name: e, unit: user_id, "
     b"variants: {a: 60, b: 50}, rules: [depth]}]", "experiments[0] e.variants",
     "add up to 110, over 100"),
    (b"profiles: {default: {}}\nexperiments: [{name: e, unit: user_id, "
     b"variants: {a: 50}, rules: [nope]}]", "experiments[0] e.rules", "unknown rule 'nope'"),
    (b"profiles: {default: {}}\nexperiments: [{name: e, unit: user_id, "
     b"variants: {control: .nan}, rules: [depth]}]", "experiments[0] e.variants.control",
     "weight must be a percentage from 0 to 100"),
    (b"profiles: {default: {}}\nexperiments: [{name: e, unit: user_id, "
     b"variants: {control: .inf}, rules: [depth]}]", "experiments[0] e.variants.control",
     "weight must be a percentage from 0 to 100"),
    (b"profiles: {default: {}}\nexperiments: [{name: e, unit: user_id, "
     b"variants: {control: -.inf}, rules: [depth]}]", "experiments[0] e.variants.control",
     "weight must be a percentage from 0 to 100"),
    (b"profiles: {default: {}}\nexperiments: [{name: e, unit: user_id, "
     b"variants: {control: 1" + b"0" * 400 + b"}, rules: [depth]}]",
     "experiments[0] e.variants.control",
     "weight must be a percentage from 0 to 100"),
    (b"profiles: {default: {}}\nexperiments: [{name: e, unit: user_id, "
     b"variants: {control: 101}, rules: [depth]}]", "experiments[0] e.variants.control",
     "weight must be a percentage from 0 to 100"),
    (b"profiles: {default: {}}\nexperiments: [{name: e, unit: u, variants: {a: 5}, "
     b"rules: [depth]}, {name: f, unit: u, variants: {a: 5}, rules: [depth]}]",
     "experiments[1] f.rules", "already gated by e"),
    (b"profiles: {default: {trim: [{depth: {k: 1}, ad_label: {}}]}}",
     "profiles.default.trim[0]", "one-key mapping"),
    (b"profiles: [", "<config>", "not valid YAML"),
    ("profiles: {default: {}} # \u0091".encode(), "<config>", "not valid YAML"),  # reader's
    # PyYAML would keep the second list alone: banlist and spam_ban gone without a word
    (b"profiles:\n  default:\n    pre-filter: [banlist, spam_ban]\n    rerank: [spam_demotion]"
     b"\n    pre-filter: [safe_search]\n", "profiles.default.pre-filter",
     "given twice on lines 3 and 5"),
    (b"profiles: {default: {trim: [{depth: {k: 3, k: 4}}]}}", "profiles.default.trim[0].depth.k",
     "given twice on line 1"),
    (b"profiles: {default: {}}\nprofiles: {default: {trim: [depth]}}", "profiles",
     "given twice on lines 1 and 2"),
    (b"profiles: {default: {}}\nexperiments: [{name: e, unit: user_id, "
     b"variants: {a: 5, 'a': 6}, rules: [depth]}]", "experiments[0].variants.a", "given twice"),
    (b"profiles: {default: {}, 1: {}, 0x1: {}}", "profiles.1", "given twice"),  # one int key
    # two merges: PyYAML lets the second replace the first's keys (here its pre-filter)
    (b"a: &a {pre-filter: [banlist, spam_ban]}\nb: &b {pre-filter: [topic_filter]}\nprofiles:"
     b"\n  default:\n    <<: *a\n    <<: *b\n", "profiles.default.<<",
     "given twice on lines 5 and 6"),
    (b"profiles: {default: {}}\nx: " + b"[" * 3000 + b"]" * 3000, "<config>",
     "nested deeper than the loader follows"),
    (b"profilez: {}", "profilez", "unknown top-level key"),
    (b"profiles: {default: {}, c: {extends: [default]}}", "profiles.c.extends",
     "must be the name of one profile"),
    (b"profiles: {default: {}}\nrouting: {shop: [default]}", "routing.shop",
     "must be the name of one profile"),
    (b"profiles: {default: {}, 2024: {}}", "profiles.2024", "must be a string"),
])
def test_invalid_configs_name_the_place(yaml, place, problem):
    with pytest.raises(ConfigError) as info:
        load_bytes(yaml)
    assert info.value.place == place
    assert problem in info.value.problem


def test_keys_a_merge_brings_in_may_be_overridden():
    # YAML's merge: the mapping's own `trim` overrides the one `<<: *d` brings
    engine = load_bytes(b"profiles:\n  default: &d\n    trim: [depth]\n    annotate: [ad_label]\n"
                        b"  c:\n    <<: *d\n    trim: [{depth: {k: 3}}]\n")
    c = [(p, s.rule.name, s.rule.params) for p, s in engine.profiles["c"].rules()]
    assert [(p, name) for p, name, _ in c] == [(Phase.TRIM, "depth"), (Phase.ANNOTATE, "ad_label")]
    assert c[0][2]["k"] == 3


def test_holder_keeps_last_good_config(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_bytes(b"profiles: {default: {trim: [depth]}}")
    holder = ConfigHolder(path)
    good = holder.engine
    path.write_bytes(b"profiles: {default: {trim: [nope]}}")
    assert holder.changed_on_disk()
    with pytest.raises(ConfigError):
        holder.reload()
    assert holder.engine is good
    path.write_bytes(b"profiles: {default: {trim: [{depth: {k: 3}}]}}")
    assert holder.reload() == (True, holder.engine.version)
    kept = holder.engine
    path.write_bytes(b"profiles:\n  default:\n    trim: [depth]\n    trim: [{depth: {k: 9}}]\n")
    with pytest.raises(ConfigError, match="given twice"):
        holder.reload()
    assert holder.engine is kept
    assert holder.engine is not good


EXP = b"""
profiles:
  default:
    rerank: [{spam_demotion: {theta_low: 0.2, lambda: 5}}, sandbox_damping]
  other:
    rerank: [spam_demotion]
holdout: {unit: user_id, percent: 2.5, salt: h1}
experiments:
  - name: antispam_v7
    unit: user_id
    layer: ranking
    slots: [0, 40]
    variants:
      control: 50
      lambda3: {weight: 25, params: {spam_demotion: {lambda: 3}}}
      lambda8: {weight: 25}
    rules: [spam_demotion]
  - name: sandbox_v2
    unit: user_id
    layer: ranking
    slots: [40, 100]
    salt: 7
    variants: {control: 10, treatment: 10}
    rules: [sandbox_damping]
"""


def test_layers_holdout_salt_and_variant_params_load():
    engine = load_bytes(EXP)
    a, b = engine.experiments
    assert (a.layer, a.slots, a.salt) == ("ranking", (0, 4000), "")
    assert (b.layer, b.slots, b.salt) == ("ranking", (4000, 10000), "7")
    assert a.variants == (("control", 5000), ("lambda3", 7500), ("lambda8", 10000))
    assert a.params == {"lambda3": {"spam_demotion": {"lambda": 3}}}
    assert (engine.holdout.unit, engine.holdout.upper, engine.holdout.salt) == \
        ("user_id", 250, "h1")
    assert engine.designs()["holdout"] == {"holdout": 250, "rest": 9750}
    assert engine.designs()["antispam_v7"] == {"control": 5000, "lambda3": 2500,
                                               "lambda8": 2500}
    step = next(s for _, s in engine.profiles["default"].rules()
                if s.rule.name == "spam_demotion")
    # the override is merged over the profile's own parameters, built once at load
    assert set(step.variants) == {"lambda3"}
    assert step.variants["lambda3"].params["lambda"] == 3
    assert step.variants["lambda3"].params["theta_low"] == 0.2
    assert step.rule.params["lambda"] == 5
    other = next(s for _, s in engine.profiles["other"].rules())
    assert other.variants["lambda3"].params["theta_low"] == 0.3


def _exp(body: str) -> bytes:
    return ("profiles: {default: {rerank: [spam_demotion, sandbox_damping]}}\n"
            "experiments:\n" + body).encode()


@pytest.mark.parametrize(("yaml", "place", "problem"), [
    (_exp("  - {name: e, unit: u, layer: L, variants: {a: 5}, rules: []}"),
     "experiments[0] e.slots", "[from, to] percentages"),
    (_exp("  - {name: e, unit: u, slots: [0, 5], variants: {a: 5}, rules: []}"),
     "experiments[0] e.slots", "slots need a `layer`"),
    (_exp("  - {name: e, unit: u, layer: L, slots: [0, 50], variants: {a: 5}, rules: []}\n"
          "  - {name: f, unit: u, layer: L, slots: [40, 60], variants: {a: 5}, rules: []}"),
     "experiments[1] f.slots", "overlap the slots of e in layer L"),
    (_exp("  - {name: e, unit: u, layer: L, slots: [0, 50], variants: {a: 5}, rules: []}\n"
          "  - {name: f, unit: s, layer: L, slots: [50, 60], variants: {a: 5}, rules: []}"),
     "experiments[1] f.unit", "its experiments share one unit"),
    (_exp("  - {name: e, unit: u, layer: f, slots: [0, 50], variants: {a: 5}, rules: []}\n"
          "  - {name: f, unit: u, variants: {a: 5}, rules: []}"),
     "experiments[0] e.layer", "also an experiment's name"),
    (_exp("  - {name: holdout, unit: u, variants: {a: 5}, rules: []}"),
     "experiments[0] holdout.name", "reserved"),
    (_exp("  - {name: e, unit: u, variants: {control: 50, b: {weight: 50, params: "
          "{sandbox_damping: {beta: 0.1}}}}, rules: [spam_demotion]}"),
     "experiments[0] e.variants.b.params.sandbox_damping", "not a rule this experiment gates"),
    (_exp("  - {name: e, unit: u, variants: {control: 50, b: {weight: 50, params: "
          "{spam_demotion: {lamda: 3}}}}, rules: [spam_demotion]}"),
     "experiments[0] e.variants.b.params.spam_demotion", "unknown parameter 'lamda'"),
    (_exp("  - {name: e, unit: u, variants: {control: {weight: 50, params: "
          "{spam_demotion: {lambda: 3}}}}, rules: [spam_demotion]}"),
     "experiments[0] e.variants.control.params", "overrides belong to treatment"),
    (_exp("  - {name: e, unit: u, variants: {control: 50, b: {weight: 50, params: "
          "{spam_demotion: {lambda: -3}}}}, rules: [spam_demotion]}"),
     "profiles.default.rerank[0] spam_demotion with experiments e variant b",
     "lambda: -3 is below 0"),
    (_exp("  - {name: e, unit: u, variants: {control: 50, b: {wieght: 50}}, rules: []}"),
     "experiments[0] e.variants.b.wieght", "unknown key"),
    (_exp("  - {name: e, unit: u, salt: '', variants: {a: 5}, rules: []}"),
     "experiments[0] e.salt", "non-empty"),
    (_exp("  - {name: e, unit: u, variants: {a: 5}, rules: [], stage: 1}"),
     "experiments[0].stage", "unknown key"),
    (b"profiles: {default: {}}\nholdout: {unit: user_id, percent: 101}", "holdout.percent",
     "a percentage"),
    (b"profiles: {default: {}}\nholdout: {percent: 5}", "holdout.unit", "names the field"),
])
def test_invalid_experiments_name_the_place(yaml, place, problem):
    with pytest.raises(ConfigError) as info:
        load_bytes(yaml)
    assert info.value.place == place
    assert problem in info.value.problem


def test_reload_refuses_rebucketing_a_running_experiment_unless_salted(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_bytes(_exp("  - {name: e, unit: user_id, variants: {control: 10, "
                          "treatment: 10}, rules: [spam_demotion]}"))
    holder = ConfigHolder(path)
    good = holder.engine
    path.write_bytes(_exp("  - {name: e, unit: user_id, variants: {control: 20, "
                          "treatment: 20}, rules: [spam_demotion]}"))
    with pytest.raises(ConfigError) as info:
        holder.reload()
    assert info.value.place == "experiments[0] e"
    assert "re-bucket units of the running experiment" in info.value.problem
    assert "salt" in info.value.problem
    assert holder.engine is good
    # widening the last variant is a ramp: accepted
    path.write_bytes(_exp("  - {name: e, unit: user_id, variants: {control: 10, "
                          "treatment: 30}, rules: [spam_demotion]}"))
    assert holder.reload()[0] is True
    # a new salt restarts the experiment with fresh buckets: accepted
    path.write_bytes(_exp("  - {name: e, unit: user_id, salt: r2, variants: {treatment: 50, "
                          "control: 50}, rules: [spam_demotion]}"))
    assert holder.reload()[0] is True
    assert holder.engine.experiments[0].salt == "r2"
