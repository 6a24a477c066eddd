"""Bucketing exactly as the CONTRACT states, checked against an independent MurmurHash3."""
from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import orjson
import pytest

from app._engine import EngineMetrics
from app.config.load import load_bytes
from app.config.spec import with_core
from app.experiments.bucketing import (
    Experiment,
    Holdout,
    bucket,
    holdout_rebucketing,
    rebucketing,
)
from app.experiments.srm import chi2_sf, srm
from tests.murmur3 import murmur3_32

UNITS = ["u-1", "s-9", "пользователь-42", "😀-emoji", "x" * 300, "0"]


@pytest.mark.parametrize("unit", UNITS)
def test_bucket_matches_the_contract_formula(unit):
    h = murmur3_32(f"antispam_v7:{unit}".encode(), 1)
    assert bucket("antispam_v7", unit) == h * 10000 // 2**32


def test_unit_values_are_nfc_normalised():
    decomposed = unicodedata.normalize("NFD", "йога")
    assert decomposed != "йога"
    assert bucket("e", decomposed) == bucket("e", "йога")


def test_variants_take_consecutive_ranges_in_listed_order():
    exp = Experiment.from_weights("e", "user_id", {"control": 10, "treatment": 20.5}, ("x",))
    assert exp.variants == (("control", 1000), ("treatment", 3050))
    seen = {}
    for i in range(3000):
        got = exp.assign({"user_id": f"user-{i}"})
        b = bucket("e", f"user-{i}")
        expected = "control" if b < 1000 else "treatment" if b < 3050 else None
        assert (got[0] if got else None) == expected
        seen[expected] = seen.get(expected, 0) + 1
    assert 200 < seen["control"] < 400 and 500 < seen["treatment"] < 730


def test_missing_or_empty_unit_is_outside():
    exp = Experiment.from_weights("e", "user_id", {"control": 50, "treatment": 50}, ())
    assert exp.assign({}) is None and exp.assign({"user_id": ""}) is None
    assert exp.assign({"session_id": "s"}) is None


# --- published vectors, salt, layers, holdout, re-bucketing ------------------------------

VECTORS = json.loads((Path(__file__).parents[1] / "data" / "bucketing_vectors.json")
                     .read_text(encoding="utf-8"))


@pytest.mark.parametrize("v", VECTORS["vectors"], ids=lambda v: f"{v['name']}-{v['key'][:24]}")
def test_published_vectors(v):
    assert murmur3_32(v["key"].encode(), 1) == v["hash"]
    assert v["hash"] * 10000 >> 32 == v["bucket"]
    assert bucket(v["name"], v["unit"], v["salt"] or "") == v["bucket"]
    assert v["key"] == (f"{v['name']}:{v['salt']}:" if v["salt"] else f"{v['name']}:") + \
        unicodedata.normalize("NFC", v["unit"])


def test_vectors_cover_what_other_languages_get_wrong():
    kinds = {v["kind"] for v in VECTORS["vectors"]}
    assert {"ascii", "cyrillic", "emoji", "long", "cyrillic, NFD input (hashed as NFC)"} <= kinds
    assert {len(v["key"].encode()) % 4 for v in VECTORS["vectors"]} == {0, 1, 2, 3}  # tails


def test_published_layered_assignments():
    spec = VECTORS["layered_experiment"]
    exp = Experiment(spec["name"], "user_id", tuple(map(tuple, spec["variants"])), (),
                     layer=spec["layer"], slots=tuple(spec["slots"]))
    for a in VECTORS["layered_assignments"]:
        assert bucket(spec["layer"], a["unit"]) == a["layer_bucket"]
        got = exp.assign({"user_id": a["unit"]})
        assert (got[0] if got else None) == a["variant"]
        if got:
            assert got[1] == a["variant_bucket"]
    assert {a["variant"] for a in VECTORS["layered_assignments"]} == {None, "control",
                                                                         "treatment"}


def test_buckets_are_uniform_over_100k_ids():
    counts = [0] * 100
    for i in range(100_000):
        counts[bucket("uniformity", f"user-{i}") // 100] += 1
    expected = 1000
    stat = sum((c - expected) ** 2 / expected for c in counts)
    assert chi2_sf(stat, 99) > 0.001, stat
    # and a split as configured: a 10/90 experiment gets 10% within sampling error
    exp = Experiment.from_weights("split", "u", {"control": 10, "treatment": 90}, ())
    got = [exp.assign({"u": f"id-{i}"})[0] for i in range(100_000)]
    assert srm({("split", v): got.count(v) for v in ("control", "treatment")},
               {"split": {"control": 10, "treatment": 90}})[0].flagged is False


def test_salt_moves_buckets_and_no_salt_is_the_contract_key():
    units = [f"u{i}" for i in range(2000)]
    plain = [bucket("e", u) for u in units]
    salted = [bucket("e", u, "s2") for u in units]
    assert plain == [murmur3_32(f"e:{u}".encode(), 1) * 10000 >> 32 for u in units]
    assert salted == [murmur3_32(f"e:s2:{u}".encode(), 1) * 10000 >> 32 for u in units]
    assert sum(a == b for a, b in zip(plain, salted, strict=True)) < 20  # ~1 in 10000 collide


LAYERED = """
profiles: {default: {}}
experiments:
  - {name: exp_a, unit: user_id, layer: ranking, slots: [0, 50],
     variants: {control: 50, treatment: 50}, rules: []}
  - {name: exp_b, unit: user_id, layer: ranking, slots: [50, 100],
     variants: {control: 50, treatment: 50}, rules: []}
  - {name: exp_c, unit: user_id, variants: {control: 50, treatment: 50}, rules: []}
"""


class Served:
    """The engine behind a config: each request's assignments, and the assignment counter."""

    def __init__(self, config: str) -> None:
        self.metrics = EngineMetrics()
        self.core = with_core(load_bytes(config.encode()), self.metrics).core

    def exposures(self, unit: dict[str, str], forced: dict[str, str] | None = None
                  ) -> list[dict]:
        status, out, _, _, _ = self.core.rerank(
            orjson.dumps({"documents": [], "unit": unit}), now=1_900_000_000.0, forced=forced)
        assert status == 200, out
        return orjson.loads(out)["experiments"]

    def variants(self, unit: dict[str, str]) -> dict[str, str]:
        return {e["experiment"]: e["variant"] for e in self.exposures(unit)}

    def counted(self) -> dict[tuple[str, str], float]:
        return dict(self.metrics.snapshot()["counters"]["rearrange_experiment_assignments_total"])


def test_layer_experiments_are_mutually_exclusive_and_variants_use_their_own_hash():
    served = Served(LAYERED)
    seen = {"exp_a": 0, "exp_b": 0, "exp_c": 0}
    a_treated = 0
    for i in range(20_000):
        got = served.variants({"user_id": f"user-{i}"})
        assert not ("exp_a" in got and "exp_b" in got)
        assert "exp_a" in got or "exp_b" in got  # the slots cover the whole layer
        for name in got:
            seen[name] += 1
        a_treated += got.get("exp_a") == "treatment"
    assert seen["exp_c"] == 20_000  # an experiment outside the layer sees everyone
    assert 9_500 < seen["exp_a"] < 10_500
    # Were the slot hash reused for the variant, exp_a's slots [0, 5000) would all be
    # control; its own hash splits it half and half.
    assert 0.46 < a_treated / seen["exp_a"] < 0.54


def test_holdout_units_get_no_experiment_and_are_counted_both_sides():
    served = Served(LAYERED + "holdout: {unit: user_id, percent: 10}\n")
    held = 0
    for i in range(5000):
        out = served.exposures({"user_id": f"user-{i}"})
        in_holdout = bucket("holdout", f"user-{i}") < 1000
        held += in_holdout
        if in_holdout:
            assert out == [{"experiment": "holdout", "variant": "holdout",
                            "bucket": bucket("holdout", f"user-{i}"), "layer": None,
                            "salt": None}]
        else:
            assert out and all(e["experiment"] != "holdout" for e in out)
    assert 400 < held < 600
    counted = served.counted()
    assert counted[("holdout", "holdout")] == held
    assert counted[("holdout", "rest")] == 5000 - held
    assert served.exposures({}) == [] and served.counted() == counted  # no unit: neither side


def test_forced_variant_wins_takes_the_layer_and_is_not_counted():
    served = Served(LAYERED + "holdout: {unit: user_id, percent: 100}\n")
    unit = next({"user_id": f"u{i}"} for i in range(100)
                if "exp_b" in Served(LAYERED).variants({"user_id": f"u{i}"}))
    out = served.exposures(unit, {"exp_a": "treatment"})
    # the unit stays held out (and says so), yet exp_a is served; exp_b yields its layer
    assert [e["experiment"] for e in out] == ["holdout", "exp_a"]
    forced = [e for e in out if e.get("forced")]
    assert forced == [{"experiment": "exp_a", "variant": "treatment",
                       "bucket": bucket("exp_a", unit["user_id"]), "layer": "ranking",
                       "salt": None, "forced": True}]
    assert ("exp_a", "treatment") not in served.counted()
    assert served.exposures({}, {"exp_a": "control"})[0]["bucket"] is None


@pytest.mark.parametrize(("old", "new", "problem"), [
    ({"control": 10, "treatment": 10}, {"control": 10, "treatment": 20}, None),
    ({"control": 10, "treatment": 10}, {"control": 10, "treatment": 10, "b": 5}, None),
    ({"control": 10, "treatment": 10}, {"control": 20, "treatment": 20},
     "variant treatment buckets [1000, 2000) -> [2000, 4000) is not a widening"),
    ({"control": 50, "treatment": 50}, {"treatment": 50, "control": 50}, "keeps its variants"),
    ({"control": 50, "treatment": 50}, {"control": 50}, "keeps its variants"),
    ({"control": 10, "treatment": 10}, {"control": 10, "treatment": 5}, "not a widening"),
])
def test_rebucketing_allows_only_widening(old, new, problem):
    before = Experiment.from_weights("e", "user_id", old, ())
    after = Experiment.from_weights("e", "user_id", new, ())
    got = rebucketing(before, after)
    assert (got is None) if problem is None else (problem in got)
    assert rebucketing(before, Experiment.from_weights("e", "user_id", new, (), salt="2")) \
        is None


def test_rebucketing_of_layers_and_units():
    a = Experiment.from_weights("e", "user_id", {"control": 50, "treatment": 50}, (),
                                layer="L", slots=(0, 2000))
    wider = Experiment.from_weights("e", "user_id", {"control": 50, "treatment": 50}, (),
                                    layer="L", slots=(0, 4000))
    assert rebucketing(a, wider) is None
    assert "not a widening" in rebucketing(wider, a)
    assert "layer changed" in rebucketing(a, Experiment.from_weights(
        "e", "user_id", {"control": 50, "treatment": 50}, ()))
    assert "unit changed" in rebucketing(a, Experiment.from_weights(
        "e", "session_id", {"control": 50, "treatment": 50}, (), layer="L", slots=(0, 2000)))
    assert holdout_rebucketing(Holdout("user_id", 500), Holdout("user_id", 800)) is None
    assert "releases" in holdout_rebucketing(Holdout("user_id", 500), Holdout("user_id", 100))
    assert holdout_rebucketing(Holdout("user_id", 500), Holdout("user_id", 100, "2")) is None
