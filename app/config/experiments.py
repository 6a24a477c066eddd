"""The `experiments:` and `holdout:` sections of the rules YAML, and the re-bucketing check.

Split from config.py so the profile loader stays short; the same ConfigError, naming the
place, for every problem.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeGuard

from app.config.plugins import known_params
from app.config.step_keys import RESERVED
from app.errors import ConfigError, refuse_unknown_keys
from app.experiments.bucketing import (
    BUCKETS,
    CONTROL,
    HOLDOUT,
    INTERLEAVED,
    Experiment,
    Holdout,
)
from app.rules import RULES, Builtin

_EXPERIMENT_KEYS = {"name", "unit", "variants", "rules", "salt", "layer", "slots",
                    "interleave"}


def parse_experiments(raw: Any, registry: Mapping[str, Any] = RULES
                      ) -> tuple[Experiment, ...]:
    """Validate the experiments list; layers, slots, salts and variant overrides included.

    `registry` is every rule the config may name: the built-ins and its plugins' rules.
    """
    if not isinstance(raw, list):
        raise ConfigError("experiments", "must be a list")
    built: list[Experiment] = []
    owner: dict[str, str] = {}
    for i, item in enumerate(raw):
        place = f"experiments[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(place, "must be a mapping with name, unit, variants, rules")
        refuse_unknown_keys(place, item, _EXPERIMENT_KEYS,
                            f"unknown key (known: {', '.join(sorted(_EXPERIMENT_KEYS))})")
        name, unit = item.get("name"), item.get("unit")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{place}.name", "a non-empty string is required")
        place = f"experiments[{i}] {name}"
        if name == HOLDOUT:
            raise ConfigError(f"{place}.name", f"{HOLDOUT!r} is reserved for the global holdout")
        if any(e.name == name for e in built):
            raise ConfigError(place, "duplicate experiment name")
        if not isinstance(unit, str) or not unit:
            raise ConfigError(f"{place}.unit", "names the field of `unit` to hash, e.g. user_id")
        if "interleave" in item:
            built.append(_interleaving(place, item, name, unit, built))
            continue
        rules = item.get("rules") or []
        if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
            raise ConfigError(f"{place}.rules", "must be a list of rule names")
        for rule in rules:
            if rule not in registry:
                raise ConfigError(f"{place}.rules", f"unknown rule {rule!r}")
            if rule in owner:
                raise ConfigError(f"{place}.rules", f"{rule} is already gated by {owner[rule]}")
            owner[rule] = name
        weights, params = _variants(f"{place}.variants", item.get("variants"), rules,
                                    registry)
        salt = _salt(f"{place}.salt", item.get("salt"))
        layer, slots = _layer(place, item, name, unit, built)
        built.append(Experiment.from_weights(name, unit, weights, tuple(rules), salt=salt,
                                             layer=layer, slots=slots, params=params))
    names = {e.name for e in built}
    for i, e in enumerate(built):
        if e.layer in names:
            raise ConfigError(f"experiments[{i}] {e.name}.layer", f"{e.layer!r} is also an "
                              "experiment's name: layer and experiment hashes must differ")
    return tuple(built)


def _interleaving(place: str, item: Mapping[str, Any], name: str, unit: str,
                  built: list[Experiment]) -> Experiment:
    """An interleaving experiment: two profiles, on every bucket, or on the share of them
    `variants: {interleaved: <percent>}` names (the CONTRACT's "no `variants` means every
    bucket"; a layer's slots take a share too). Its profiles are checked against the
    config's by `check_interleaving` once the profiles are loaded."""
    if "rules" in item:
        raise ConfigError(f"{place}.rules", "an `interleave` experiment has no rules: it "
                          "compares two profiles on every unit it takes")
    weights = {INTERLEAVED: 100.0}
    if "variants" in item:
        weights, _ = _variants(f"{place}.variants", item["variants"], [], RULES)
        if set(weights) != {INTERLEAVED}:
            raise ConfigError(f"{place}.variants", f"an `interleave` experiment's variants "
                              f"are one share, {{{INTERLEAVED}: <percent>}}: every unit in "
                              "it sees both profiles on one page (no `variants` means every "
                              "bucket)")
    raw = item["interleave"]
    iplace = f"{place}.interleave"
    if not isinstance(raw, dict):
        raise ConfigError(iplace, "a mapping {control: <profile>, treatment: <profile>} "
                          "is required")
    refuse_unknown_keys(iplace, raw, {"control", "treatment"},
                        "unknown key (an interleave has control and treatment)")
    arms = []
    for arm in ("control", "treatment"):
        profile = raw.get(arm)
        if not isinstance(profile, str) or not profile:
            raise ConfigError(f"{iplace}.{arm}", "a profile name is required")
        arms.append(profile)
    if arms[0] == arms[1]:
        raise ConfigError(f"{iplace}.treatment", f"the same profile as control ({arms[0]}): "
                          "an interleaving compares two profiles")
    salt = _salt(f"{place}.salt", item.get("salt"))
    layer, slots = _layer(place, item, name, unit, built)
    return Experiment.from_weights(name, unit, weights, (), salt=salt, layer=layer,
                                   slots=slots, interleave=(arms[0], arms[1]))


def check_interleaving(experiments: tuple[Experiment, ...], profiles: Collection[str]) -> None:
    """Each interleaving names two loaded profiles, and two that take over requests of one
    control profile share a layer (a page is one interleaving)."""
    seen: dict[str, Experiment] = {}
    for i, e in enumerate(experiments):
        if e.interleave is None:
            continue
        place = f"experiments[{i}] {e.name}.interleave"
        for arm, profile in zip(("control", "treatment"), e.interleave, strict=True):
            if profile not in profiles:
                raise ConfigError(f"{place}.{arm}", f"unknown profile {profile!r} (known: "
                                  f"{', '.join(sorted(profiles))})")
        control = e.interleave[0]
        other = seen.get(control)
        if other is not None and (other.layer is None or other.layer != e.layer):
            raise ConfigError(f"{place}.control", f"{other.name} also interleaves {control}'s "
                              "requests: put both in one layer so that a unit is in one")
        seen[control] = e


def _salt(place: str, raw: Any) -> str:
    if raw is None:
        return ""
    if isinstance(raw, bool) or not isinstance(raw, str | int) or raw == "":
        raise ConfigError(place, "a non-empty string (or integer) is required")
    return str(raw)


def _layer(place: str, item: Mapping[str, Any], name: str, unit: str,
           built: list[Experiment]) -> tuple[str | None, tuple[int, int]]:
    """The experiment's layer and its [lo, hi) slots, disjoint from the layer's others."""
    layer, raw = item.get("layer"), item.get("slots")
    if layer is None:
        if raw is not None:
            raise ConfigError(f"{place}.slots", "slots need a `layer`")
        return None, (0, BUCKETS)
    if not isinstance(layer, str) or not layer:
        raise ConfigError(f"{place}.layer", "a non-empty string is required")
    if layer in (HOLDOUT, name):
        raise ConfigError(f"{place}.layer", f"{layer!r} is reserved or the experiment's own "
                          "name: layer and experiment hashes must differ")
    if (not isinstance(raw, list) or len(raw) != 2
            or not all(_is_percent(x) for x in raw) or raw[0] >= raw[1]):
        raise ConfigError(f"{place}.slots", "[from, to] percentages of the layer's traffic, "
                          "0 <= from < to <= 100, multiples of 0.01")
    slots = (round(raw[0] * 100), round(raw[1] * 100))
    for other in built:
        if other.layer == layer:
            if other.unit != unit:
                raise ConfigError(f"{place}.unit", f"layer {layer} hashes {other.unit} "
                                  f"(experiment {other.name}); its experiments share one unit")
            if slots[0] < other.slots[1] and other.slots[0] < slots[1]:
                raise ConfigError(f"{place}.slots", f"overlap the slots of {other.name} in "
                                  f"layer {layer}: a unit is in at most one experiment a layer")
    return layer, slots


def _is_percent(x: object) -> TypeGuard[float]:
    return (not isinstance(x, bool) and isinstance(x, int | float) and 0 <= x <= 100
            and abs(x * 100 - round(x * 100)) < 1e-9)


def _variants(place: str, raw: Any, rules: list[str], registry: Mapping[str, Any]
              ) -> tuple[dict[str, float], dict[str, dict[str, dict[str, Any]]]]:
    """Weights per variant, and per-variant parameter overrides of the gated rules.

    A variant is `name: weight` or `name: {weight: W, params: {rule: {param: value}}}`.
    """
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(place, "a mapping of variant to percentage is required")
    weights: dict[str, float] = {}
    params: dict[str, dict[str, dict[str, Any]]] = {}
    total = 0.0
    for variant, spec in raw.items():
        vplace = f"{place}.{variant}"
        weight = spec
        if isinstance(spec, dict):
            refuse_unknown_keys(vplace, spec, {"weight", "params"},
                                "unknown key (a variant has weight and params)")
            weight = spec.get("weight")
            overrides = spec.get("params") or {}
            if overrides:
                params[str(variant)] = _overrides(f"{vplace}.params", overrides, rules,
                                                  str(variant), registry)
        # `not 0 <= w <= 100` also refuses .nan, .inf and ints too large for a float
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not (
                0 <= weight <= 100):
            raise ConfigError(vplace, "weight must be a percentage from 0 to 100")
        if abs(weight * 100 - round(weight * 100)) > 1e-9:
            raise ConfigError(vplace, "weight must be a multiple of 0.01%")
        total += weight
        weights[str(variant)] = float(weight)
    if total > 100 + 1e-9:
        raise ConfigError(place, f"variant weights add up to {total:g}, over 100")
    return weights, params


def _overrides(place: str, raw: Any, rules: list[str], variant: str,
               registry: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    if variant == CONTROL:
        raise ConfigError(place, "control runs its rules in shadow with the profile's "
                          "parameters; overrides belong to treatment variants")
    if not isinstance(raw, dict):
        raise ConfigError(place, "a mapping of rule to parameters is required")
    out = {}
    for rule, values in raw.items():
        if rule not in rules:
            raise ConfigError(f"{place}.{rule}", "not a rule this experiment gates "
                              f"(it gates {', '.join(rules) or 'none'})")
        if not isinstance(values, dict) or not values:
            raise ConfigError(f"{place}.{rule}", "a mapping of parameter to value is required")
        cls = registry[rule]
        # None: a Python rule without Params takes any. The values are checked when the
        # step is built with them (app/config/load.py), by the same code as the step's own.
        known = cls.param_names() if isinstance(cls, Builtin) else known_params(cls)
        for key in values:
            if key in RESERVED:
                # A variant changes what a rule computes, not whether it runs or how its
                # failure is handled: those belong to the step, the same in every variant.
                raise ConfigError(f"{place}.{rule}", f"{key!r} is a reserved step key; set "
                                  "it on the step in the profile, not per variant")
            if known is not None and key not in known:
                raise ConfigError(f"{place}.{rule}", f"unknown parameter {key!r}")
        out[str(rule)] = dict(values)
    return out


def parse_holdout(raw: Any) -> Holdout | None:
    """Validate the optional global holdout: unit, percent, salt."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError("holdout", "a mapping with unit and percent is required")
    refuse_unknown_keys("holdout", raw, {"unit", "percent", "salt"},
                        "unknown key (unit, percent, salt)")
    unit, percent = raw.get("unit"), raw.get("percent")
    if not isinstance(unit, str) or not unit:
        raise ConfigError("holdout.unit", "names the field of `unit` to hash, e.g. user_id")
    if not _is_percent(percent):
        raise ConfigError("holdout.percent", "a percentage in [0, 100], a multiple of 0.01")
    return Holdout(unit, round(percent * 100), _salt("holdout.salt", raw.get("salt")))
