"""Load and validate the rules YAML into an immutable Engine: one Pipeline per profile."""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from app.errors import ConfigError
from app.experiments import (
    BUCKETS,
    CONTROL,
    HOLDOUT,
    Experiment,
    Holdout,
    holdout_rebucketing,
    rebucketing,
)
from app.pipeline import PHASES, Phase, Pipeline, Step
from app.rules import RULES

DEFAULT_PROFILE = "default"
_PROFILE_KEYS = {p.value for p in PHASES} | {"extends"}


@dataclass(frozen=True, slots=True)
class Engine:
    """A loaded config: profiles, routing and experiments; replaced whole on reload."""

    version: str
    profiles: Mapping[str, Pipeline]
    routing: Mapping[str, str]
    experiments: tuple[Experiment, ...]
    source: str = ""
    holdout: Holdout | None = None

    def designs(self) -> dict[str, dict[str, int]]:
        """Experiment → variant → buckets it owns: the split an SRM check expects."""
        out = {e.name: {v: hi - lo for v, (lo, hi) in e.ranges().items()}
               for e in self.experiments}
        if self.holdout is not None:
            out[HOLDOUT] = {HOLDOUT: self.holdout.upper, "rest": BUCKETS - self.holdout.upper}
        return out

    def route(self, classes: tuple[str, ...]) -> str:
        """The profile of the first class that has a route, else `default`."""
        for cls in classes:
            profile = self.routing.get(cls)
            if profile is not None:
                return profile
        return DEFAULT_PROFILE


def load_file(path: Path) -> Engine:
    """Read, validate and build a config file; ConfigError names the place of any problem."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read: {exc.strerror}") from exc
    return load_bytes(raw, source=str(path))


def load_bytes(raw: bytes, source: str = "<config>") -> Engine:
    """Validate and build a config from YAML bytes; config_version is their content hash."""
    try:
        doc = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise ConfigError(source, f"not valid YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise ConfigError(source, "the top level must be a mapping with `profiles`")
    unknown = set(doc) - {"profiles", "routing", "experiments", "holdout"}
    if unknown:
        raise ConfigError(sorted(unknown)[0], "unknown top-level key "
                          "(expected profiles, routing, experiments, holdout)")
    experiments = _experiments(doc.get("experiments") or [])
    holdout = _holdout(doc.get("holdout"))
    gates = {rule: exp for exp in experiments for rule in exp.rules}
    profiles = _profiles(doc.get("profiles"), gates)
    routing = _routing(doc.get("routing") or {}, profiles)
    version = hashlib.sha256(raw).hexdigest()[:16]
    return Engine(version, profiles, routing, experiments, source, holdout)


def _profiles(raw: Any, gates: Mapping[str, Experiment]) -> dict[str, Pipeline]:
    if not isinstance(raw, dict) or not raw:
        raise ConfigError("profiles", "a mapping of at least one profile is required")
    if DEFAULT_PROFILE not in raw:
        raise ConfigError("profiles", "a `default` profile is required "
                          "(requests whose classes have no route use it)")
    resolved: dict[str, dict[str, Any]] = {}
    for name in raw:
        resolved[name] = _resolve(name, raw, [])
    return {name: _pipeline(name, phases, gates) for name, phases in resolved.items()}


def _resolve(name: str, raw: Mapping[str, Any], chain: list[str]) -> dict[str, Any]:
    """The profile's phases with those it does not list inherited through `extends`."""
    place = f"profiles.{name}"
    if name in chain:
        raise ConfigError(place, "extends cycle: " + " -> ".join([*chain, name]))
    body = raw[name]
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise ConfigError(place, "must be a mapping of phase to rule list")
    unknown = set(body) - _PROFILE_KEYS
    if unknown:
        raise ConfigError(f"{place}.{sorted(unknown)[0]}",
                          f"unknown phase (phases are {', '.join(p.value for p in PHASES)})")
    phases = {k: v for k, v in body.items() if k != "extends"}
    parent = body.get("extends")
    if parent is None:
        return phases
    if parent not in raw:
        raise ConfigError(f"{place}.extends", f"no profile named {parent!r}")
    return {**_resolve(parent, raw, [*chain, name]), **phases}


def _pipeline(name: str, phases: Mapping[str, Any], gates: Mapping[str, Experiment]) -> Pipeline:
    built = []
    for phase in PHASES:
        items = phases.get(phase.value) or []
        place = f"profiles.{name}.{phase.value}"
        if not isinstance(items, list):
            raise ConfigError(place, "must be a list of rules")
        steps = [_step(f"{place}[{i}]", item, phase, gates) for i, item in enumerate(items)]
        built.append((phase, steps))
    return Pipeline(name, built)


def _step(place: str, item: Any, phase: Phase, gates: Mapping[str, Experiment]) -> Step:
    if isinstance(item, str):
        rule_name, params = item, {}
    elif isinstance(item, dict) and len(item) == 1:
        rule_name, params = next(iter(item.items()))
        params = {} if params is None else params
    else:
        raise ConfigError(place, "a rule is a name or a one-key mapping of name to parameters")
    cls = RULES.get(rule_name)
    if cls is None:
        raise ConfigError(place, f"unknown rule {rule_name!r} (known: {', '.join(RULES)})")
    place = f"{place} {rule_name}"
    if phase not in cls.phases:
        allowed = ", ".join(p.value for p in PHASES if p in cls.phases)
        raise ConfigError(place, f"cannot run in {phase.value} (it runs in {allowed})")
    if not isinstance(params, dict):
        raise ConfigError(place, "parameters must be a mapping")
    try:
        validated = cls.Params.model_validate(params)
    except ValidationError as exc:
        raise ConfigError(place, _pydantic_problem(exc)) from exc
    exp = gates.get(rule_name)
    if exp is None:
        return Step(cls(validated, phase))
    by_variant = {}
    for variant, overrides in exp.params.items():
        if rule_name not in overrides:
            continue
        try:
            merged = cls.Params.model_validate({**params, **overrides[rule_name]})
        except ValidationError as exc:
            raise ConfigError(f"{place} with experiments {exp.name} variant {variant}",
                              _pydantic_problem(exc)) from exc
        by_variant[variant] = cls(merged, phase)  # built once here, never per request
    return Step(cls(validated, phase), exp.name, by_variant)


def _pydantic_problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        return f"unknown parameter {where!r}"
    return f"parameter {where!r}: {msg}" if where else msg


def _routing(raw: Any, profiles: Mapping[str, Pipeline]) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise ConfigError("routing", "must be a mapping of query class to profile")
    for cls, profile in raw.items():
        if profile not in profiles:
            raise ConfigError(f"routing.{cls}", f"routes to a missing profile {profile!r}")
    return {str(k): str(v) for k, v in raw.items()}


_EXPERIMENT_KEYS = {"name", "unit", "variants", "rules", "salt", "layer", "slots"}


def _experiments(raw: Any) -> tuple[Experiment, ...]:
    if not isinstance(raw, list):
        raise ConfigError("experiments", "must be a list")
    built: list[Experiment] = []
    owner: dict[str, str] = {}
    for i, item in enumerate(raw):
        place = f"experiments[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(place, "must be a mapping with name, unit, variants, rules")
        unknown = set(item) - _EXPERIMENT_KEYS
        if unknown:
            raise ConfigError(f"{place}.{sorted(unknown)[0]}",
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
        rules = item.get("rules") or []
        if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
            raise ConfigError(f"{place}.rules", "must be a list of rule names")
        for rule in rules:
            if rule not in RULES:
                raise ConfigError(f"{place}.rules", f"unknown rule {rule!r}")
            if rule in owner:
                raise ConfigError(f"{place}.rules", f"{rule} is already gated by {owner[rule]}")
            owner[rule] = name
        weights, params = _variants(f"{place}.variants", item.get("variants"), rules)
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


def _is_percent(x: Any) -> bool:
    return (not isinstance(x, bool) and isinstance(x, int | float) and 0 <= x <= 100
            and abs(x * 100 - round(x * 100)) < 1e-9)


def _variants(place: str, raw: Any, rules: list[str]
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
            unknown = set(spec) - {"weight", "params"}
            if unknown:
                raise ConfigError(f"{vplace}.{sorted(unknown)[0]}",
                                  "unknown key (a variant has weight and params)")
            weight = spec.get("weight")
            overrides = spec.get("params") or {}
            if overrides:
                params[str(variant)] = _overrides(f"{vplace}.params", overrides, rules,
                                                  str(variant))
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
            raise ConfigError(vplace, "weight must be a percentage >= 0")
        if abs(weight * 100 - round(weight * 100)) > 1e-9:
            raise ConfigError(vplace, "weight must be a multiple of 0.01%")
        total += weight
        weights[str(variant)] = float(weight)
    if total > 100 + 1e-9:
        raise ConfigError(place, f"variant weights add up to {total:g}, over 100")
    return weights, params


def _overrides(place: str, raw: Any, rules: list[str], variant: str
               ) -> dict[str, dict[str, Any]]:
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
        known = RULES[rule].Params.model_fields
        for key in values:
            if key not in known and not any(f.alias == key for f in known.values()):
                raise ConfigError(f"{place}.{rule}", f"unknown parameter {key!r}")
        out[str(rule)] = dict(values)
    return out


def _holdout(raw: Any) -> Holdout | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError("holdout", "a mapping with unit and percent is required")
    unknown = set(raw) - {"unit", "percent", "salt"}
    if unknown:
        raise ConfigError(f"holdout.{sorted(unknown)[0]}", "unknown key (unit, percent, salt)")
    unit, percent = raw.get("unit"), raw.get("percent")
    if not isinstance(unit, str) or not unit:
        raise ConfigError("holdout.unit", "names the field of `unit` to hash, e.g. user_id")
    if not _is_percent(percent):
        raise ConfigError("holdout.percent", "a percentage in [0, 100], a multiple of 0.01")
    return Holdout(unit, round(percent * 100), _salt("holdout.salt", raw.get("salt")))


def check_rebucketing(old: Engine, new: Engine) -> None:
    """ConfigError naming the experiment if `new` would move units of a running experiment."""
    running = {e.name: e for e in old.experiments}
    for i, exp in enumerate(new.experiments):
        before = running.get(exp.name)
        problem = before and rebucketing(before, exp)
        if problem:
            raise ConfigError(f"experiments[{i}] {exp.name}",
                              f"would re-bucket units of the running experiment: {problem}; "
                              "change its `salt` to restart it with fresh buckets")
    problem = holdout_rebucketing(old.holdout, new.holdout)
    if problem:
        raise ConfigError("holdout", f"would re-bucket held-out units: {problem}; "
                          "change its `salt` to draw a fresh holdout")


class ConfigHolder:
    """The Engine in use; a reload builds a new one aside and swaps one reference."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.engine = load_file(path)
        self._stamp = self._file_stamp()

    def reload(self) -> tuple[bool, str]:
        """Load the file again; (changed, version). ConfigError (an invalid file, or one that
        would re-bucket a running experiment) leaves the old Engine in use."""
        self._stamp = self._file_stamp()  # a refused file is reported once, not every poll
        engine = load_file(self.path)
        check_rebucketing(self.engine, engine)
        changed = engine.version != self.engine.version
        if changed:
            self.engine = engine
        return changed, engine.version

    def changed_on_disk(self) -> bool:
        """True when the file's mtime, size or inode moved (a ConfigMap swaps a symlink)."""
        return self._file_stamp() != self._stamp

    def _file_stamp(self) -> tuple[float, int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime, st.st_size, st.st_ino)
