"""Config loading: profiles, extends, routing, experiments, and errors that name the place."""
from __future__ import annotations

from pathlib import Path

import pytest

from app.config import ConfigHolder, load_bytes, load_file
from app.errors import ConfigError
from app.pipeline import Phase

ROOT = Path(__file__).resolve().parents[1]


def test_sample_config_loads():
    engine = load_file(ROOT / "config" / "rules.yaml")
    assert set(engine.profiles) == {"default", "commercial"}
    commercial = engine.profiles["commercial"]
    rerank = [s.rule.name for p, s in commercial.rules() if p is Phase.RERANK]
    assert rerank == ["anti_seo_reset", "spam_demotion", "sandbox_damping"]
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
     "profiles.default.rerank[0] spam_demotion", "unknown parameter 'lamda'"),
    (b"profiles: {default: {rerank: [{spam_demotion: {lambda: -1}}]}}",
     "profiles.default.rerank[0] spam_demotion", "parameter 'lambda'"),
    (b"profiles: {default: {rerank: [{spam_demotion: {theta_low: '0.3'}}]}}",
     "profiles.default.rerank[0] spam_demotion", "parameter 'theta_low'"),
    (b"profiles: {default: {trim: [{depth: {k: 0}}]}}", "profiles.default.trim[0] depth",
     "parameter 'k'"),
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
    (b"profiles: {default: {}}\nexperiments: [{name: e, unit: u, variants: {a: 5}, "
     b"rules: [depth]}, {name: f, unit: u, variants: {a: 5}, rules: [depth]}]",
     "experiments[1] f.rules", "already gated by e"),
    (b"profiles: {default: {trim: [{depth: {k: 1}, ad_label: {}}]}}",
     "profiles.default.trim[0]", "one-key mapping"),
    (b"profiles: [", "<config>", "not valid YAML"),
    (b"profilez: {}", "profilez", "unknown top-level key"),
])
def test_invalid_configs_name_the_place(yaml, place, problem):
    with pytest.raises(ConfigError) as info:
        load_bytes(yaml)
    assert info.value.place == place
    assert problem in info.value.problem


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
    assert holder.engine is not good
