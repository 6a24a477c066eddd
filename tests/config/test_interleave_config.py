"""The `interleave:` form of an experiment in the config: what loads, what is refused with
its place named, what the engine is compiled from, and the ramp check on it."""
from __future__ import annotations

import json

import pytest

from app.config.load import describe, load_bytes
from app.config.spec import compile_spec
from app.config.versions import ConfigHolder
from app.errors import ConfigError

PROFILES = ("profiles:\n"
            "  default: {rerank: [spam_demotion]}\n"
            "  v8: {rerank: [{spam_demotion: {lambda: 9}}]}\n"
            "  other: {rerank: [sandbox_damping]}\n")


def _config(experiments: str) -> bytes:
    return (PROFILES + "experiments:\n" + experiments).encode()


def test_an_interleaving_loads_and_compiles():
    engine = load_bytes(_config(
        "  - {name: spam_v8, unit: user_id, salt: s1, interleave: {control: default, "
        "treatment: v8}}\n"
        "  - {name: ab, unit: user_id, variants: {control: 50, treatment: 50}, "
        "rules: [sandbox_damping]}"))
    exp = engine.experiments[0]
    assert exp.interleave == ("default", "v8")
    assert exp.variants == (("interleaved", 10_000),)  # every bucket is in
    assert exp.rules == ()
    spec = json.loads(compile_spec(engine)[0])
    assert spec["experiments"][0]["interleave"] == {"control": "default", "treatment": "v8"}
    assert "interleave" not in spec["experiments"][1]
    assert describe(engine)["experiments"][0]["interleave"] == {
        "control": "default", "treatment": "v8"}
    assert engine.designs()["spam_v8"] == {"interleaved": 10_000}


def test_an_interleaving_may_take_a_share_of_the_buckets():
    # CONTRACT.md: "bucketed as above; no `variants` means every bucket"
    engine = load_bytes(_config(
        "  - {name: spam_v8, unit: user_id, variants: {interleaved: 20}, "
        "interleave: {control: default, treatment: v8}}"))
    assert engine.experiments[0].variants == (("interleaved", 2_000),)
    assert engine.designs()["spam_v8"] == {"interleaved": 2_000}


@pytest.mark.parametrize(("experiments", "place", "problem"), [
    ("  - {name: e, unit: u, interleave: {control: default, treatment: nope}}",
     "experiments[0] e.interleave.treatment", "unknown profile 'nope'"),
    ("  - {name: e, unit: u, interleave: {control: gone, treatment: v8}}",
     "experiments[0] e.interleave.control", "unknown profile 'gone'"),
    ("  - {name: e, unit: u, interleave: {control: v8, treatment: v8}}",
     "experiments[0] e.interleave.treatment", "the same profile as control"),
    ("  - {name: e, unit: u, interleave: {control: default, treatment: v8}, "
     "variants: {control: 50, treatment: 50}}",
     "experiments[0] e.variants", "variants are one share, {interleaved: <percent>}"),
    ("  - {name: e, unit: u, interleave: {control: default, treatment: v8}, "
     "variants: {interleaved: 120}}",
     "experiments[0] e.variants.interleaved", "weight must be a percentage from 0 to 100"),
    ("  - {name: e, unit: u, interleave: {control: default, treatment: v8}, "
     "rules: [spam_demotion]}",
     "experiments[0] e.rules", "an `interleave` experiment has no rules"),
    ("  - {name: e, unit: u, interleave: {control: default}}",
     "experiments[0] e.interleave.treatment", "a profile name is required"),
    ("  - {name: e, unit: u, interleave: {control: default, treatment: v8, mix: 1}}",
     "experiments[0] e.interleave.mix", "unknown key"),
    ("  - {name: e, unit: u, interleave: [default, v8]}",
     "experiments[0] e.interleave", "a mapping {control: <profile>"),
    ("  - {name: e, unit: u, interleave: {control: default, treatment: v8}}\n"
     "  - {name: f, unit: u, interleave: {control: default, treatment: other}}",
     "experiments[1] f.interleave.control", "e also interleaves default's requests"),
    ("  - {name: e, unit: u, layer: L, slots: [0, 50], interleave: {control: default, "
     "treatment: v8}}\n"
     "  - {name: f, unit: u, layer: L, slots: [40, 100], interleave: {control: default, "
     "treatment: other}}",
     "experiments[1] f.slots", "overlap the slots of e"),
])
def test_bad_interleavings_name_the_place(experiments, place, problem):
    with pytest.raises(ConfigError) as info:
        load_bytes(_config(experiments))
    assert (info.value.place, problem in info.value.problem) == (place, True), info.value


def test_two_interleavings_of_one_profile_in_one_layer_load():
    engine = load_bytes(_config(
        "  - {name: e, unit: u, layer: L, slots: [0, 50], interleave: {control: default, "
        "treatment: v8}}\n"
        "  - {name: f, unit: u, layer: L, slots: [50, 100], interleave: {control: default, "
        "treatment: other}}"))
    assert [e.interleave for e in engine.experiments] == [("default", "v8"),
                                                         ("default", "other")]


def test_ramps_of_an_interleaving_widen_its_slots_only(tmp_path):
    path = tmp_path / "rules.yaml"

    def write(experiment: str) -> None:
        path.write_bytes(_config(f"  - {{name: e, unit: user_id, {experiment}}}"))

    write("layer: L, slots: [0, 10], interleave: {control: default, treatment: v8}")
    holder = ConfigHolder(path)
    # a wider share, and another treatment profile: no unit leaves the experiment
    write("layer: L, slots: [0, 30], interleave: {control: default, treatment: other}")
    assert holder.reload()[0] is True
    write("layer: L, slots: [0, 20], interleave: {control: default, treatment: other}")
    with pytest.raises(ConfigError) as info:
        holder.reload()
    assert "layer slots [0, 3000] -> [0, 2000] is not a widening" in info.value.problem
    # an interleaving turned into an A/B experiment moves its units: only with a new salt
    write("variants: {control: 50, treatment: 50}, rules: [spam_demotion]")
    with pytest.raises(ConfigError):
        holder.reload()
    write("salt: r2, variants: {control: 50, treatment: 50}, rules: [spam_demotion]")
    assert holder.reload()[0] is True
