"""Load and validate the rules YAML into an immutable Engine: one Pipeline per profile."""
from __future__ import annotations

import hashlib
from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from app.config.experiments import check_interleaving, parse_experiments, parse_holdout
from app.config.pipeline import Pipeline, Rule, Step
from app.config.plugins import build_python_rule, load_plugins
from app.config.step_keys import split_reserved
from app.errors import ConfigError, refuse_unknown_keys
from app.experiments.bucketing import (
    BUCKETS,
    HOLDOUT,
    HOLDOUT_REST,
    Experiment,
    Holdout,
    holdout_rebucketing,
    rebucketing,
)
from app.phases import PHASES, Phase
from app.rules import RULES, Builtin, BuiltinRule

DEFAULT_PROFILE = "default"
_PROFILE_KEYS = {p.value for p in PHASES} | {"extends"}


@dataclass(frozen=True, slots=True)
class Engine:
    """A loaded config: profiles, routing and experiments; replaced whole on reload."""

    version: str
    profiles: Mapping[str, Pipeline]
    routing: Mapping[str, str]
    experiments: tuple[Experiment, ...]
    source: str = ""  # where it was read from (a path), for messages
    holdout: Holdout | None = None
    plugins: tuple[str, ...] = ()  # the modules of `plugins:`, imported at load
    # The Rust engine built from this config (app._engine.Engine): what serves requests.
    core: Any = None
    text: str = ""  # the YAML it was built from, exactly (its SHA-256 gives `version`)

    def designs(self) -> dict[str, dict[str, int]]:
        """Experiment → variant → buckets it owns: the split an SRM check expects."""
        out = {e.name: {v: hi - lo for v, (lo, hi) in e.ranges().items()}
               for e in self.experiments}
        if self.holdout is not None:
            out[HOLDOUT] = {HOLDOUT: self.holdout.upper,
                            HOLDOUT_REST: BUCKETS - self.holdout.upper}
        return out

    def route(self, classes: tuple[str, ...]) -> str:
        """The profile of the first class that has a route, else `default`."""
        for cls in classes:
            profile = self.routing.get(cls)
            if profile is not None:
                return profile
        return DEFAULT_PROFILE


def load_file(path: Path, served: Collection[str] | None = None) -> Engine:
    """Read, validate and build a config file; ConfigError names the place of any problem.
    `served`: a candidate's, as load_bytes takes it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read: {exc.strerror}") from exc
    return load_bytes(raw, source=str(path), served=served)


def load_bytes(raw: bytes, source: str = "<config>",
               served: Collection[str] | None = None) -> Engine:
    """Validate and build a config from YAML bytes; config_version is their content hash.

    `served`, for a candidate config (tried, replayed, checked against the one served):
    the plugin modules the served config loaded, the only ones it may name (it imports
    nothing); None for a config to serve, whose `plugins:` are imported."""
    try:
        text = raw.decode("utf-8")  # shown and replicated as text: it must round-trip exactly
    except UnicodeDecodeError as exc:
        raise ConfigError(source, f"not UTF-8 text (byte {exc.start})") from exc
    doc = _parse(raw, source)
    if not isinstance(doc, dict):
        raise ConfigError(source, "the top level must be a mapping with `profiles`")
    refuse_unknown_keys("", doc, {"plugins", "profiles", "routing", "experiments", "holdout"},
                        "unknown top-level key (expected plugins, profiles, routing, "
                        "experiments, holdout)")
    plugins = load_plugins(doc.get("plugins"), RULES, served)
    registry: dict[str, Any] = {**RULES, **plugins}
    experiments = parse_experiments(doc.get("experiments") or [], registry)
    holdout = parse_holdout(doc.get("holdout"))
    gates = {rule: exp for exp in experiments for rule in exp.rules}
    profiles = _profiles(doc.get("profiles"), _Build(gates, registry))
    routing = _routing(doc.get("routing") or {}, profiles)
    check_interleaving(experiments, profiles)
    version = hashlib.sha256(raw).hexdigest()[:16]
    return Engine(version, profiles, routing, experiments, source, holdout,
                  plugins=tuple(doc.get("plugins") or ()), text=text)


def _parse(raw: bytes, source: str) -> Any:
    """The YAML document, as `yaml.safe_load` reads it, with a key given twice in one mapping
    refused: YAML requires unique keys, and PyYAML keeps the last one without a word (a
    second `pre-filter:` would drop the first's rules from the profile)."""
    try:
        loader = yaml.SafeLoader(raw)  # its reader refuses a character YAML does not allow
        try:
            root = loader.get_single_node()
            if root is not None:
                _refuse_repeated_keys(loader, root, "", set())
            return loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise ConfigError(source, f"not valid YAML: {exc}") from exc
    except RecursionError as exc:  # PyYAML's composer and constructor recurse per level
        raise ConfigError(source, "not valid YAML here: nested deeper than the loader "
                          "follows (a config is a few levels deep)") from exc


_MERGE = "tag:yaml.org,2002:merge"


def _refuse_repeated_keys(loader: yaml.SafeLoader, node: yaml.Node, path: str,
                          seen: set[int]) -> None:
    """Walk the composed document; ConfigError at the first key a mapping has twice.

    Keys are compared as loaded (`1` and `0x1` are one key, `1` and `"1"` two). The keys a
    merge (`<<: *base`) brings in are not compared with the mapping's own: YAML lets those
    override them. An alias is walked once (`seen`: a document may refer to itself)."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _refuse_repeated_keys(loader, item, f"{path}[{i}]", seen)
        return
    if not isinstance(node, yaml.MappingNode):
        return
    lines: dict[Any, int] = {}
    merged = 0  # the line of a `<<` already given: a second one would replace its keys
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE:
            line = key_node.start_mark.line + 1
            if merged:
                raise ConfigError(f"{path}.<<" if path else "<<", f"given twice on lines "
                                  f"{merged} and {line}: merge several with `<<: [*a, *b]`")
            merged = line
            _refuse_repeated_keys(loader, value_node, path, seen)
            continue
        key = loader.construct_object(key_node, deep=True)
        place = f"{path}.{key}" if path else str(key)
        line = key_node.start_mark.line + 1
        if isinstance(key, Hashable):  # a list as a key: the constructor refuses it itself
            if key in lines:
                where = (f"on line {line}" if lines[key] == line
                         else f"on lines {lines[key]} and {line}")
                raise ConfigError(place, f"given twice {where}: a YAML key is unique in its "
                                  f"mapping; keep one")
            lines[key] = line
        _refuse_repeated_keys(loader, value_node, place, seen)


@dataclass(frozen=True, slots=True)
class _Build:
    """What building a step needs beside its place: experiment gates and the rule table."""

    gates: Mapping[str, Experiment]
    registry: Mapping[str, Any]  # the built-in RULES and the plugins' classes by name


def _profiles(raw: Any, gates: _Build) -> dict[str, Pipeline]:
    if not isinstance(raw, dict) or not raw:
        raise ConfigError("profiles", "a mapping of at least one profile is required")
    if DEFAULT_PROFILE not in raw:
        raise ConfigError("profiles", "a `default` profile is required "
                          "(requests whose classes have no route use it)")
    resolved: dict[str, dict[str, Any]] = {}
    for name in raw:
        if not isinstance(name, str):  # `2024:` is an int in YAML; routing would never match it
            raise ConfigError(f"profiles.{name}", "a profile name must be a string (quote it)")
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
    refuse_unknown_keys(place, body, _PROFILE_KEYS,
                        f"unknown phase (phases are {', '.join(p.value for p in PHASES)})")
    phases = {k: v for k, v in body.items() if k != "extends"}
    parent = body.get("extends")
    if parent is None:
        return phases
    if not isinstance(parent, str):
        raise ConfigError(f"{place}.extends", "must be the name of one profile")
    if parent not in raw:
        raise ConfigError(f"{place}.extends", f"no profile named {parent!r}")
    return {**_resolve(parent, raw, [*chain, name]), **phases}


def _pipeline(name: str, phases: Mapping[str, Any], build: _Build) -> Pipeline:
    built = []
    for phase in PHASES:
        items = phases.get(phase.value) or []
        place = f"profiles.{name}.{phase.value}"
        if not isinstance(items, list):
            raise ConfigError(place, "must be a list of rules")
        steps = [_step(f"{place}[{i}]", item, phase, build, name)
                 for i, item in enumerate(items)]
        built.append((phase, steps))
    return Pipeline(name, built)


def _step(place: str, item: Any, phase: Phase, build: _Build, profile: str) -> Step:
    params: Any
    if isinstance(item, str):
        rule_name, params = item, {}
    elif isinstance(item, dict) and len(item) == 1:
        rule_name, params = next(iter(item.items()))
        params = {} if params is None else params
    else:
        raise ConfigError(place, "a rule is a name or a one-key mapping of name to parameters")
    cls = build.registry.get(rule_name)
    if cls is None:
        raise ConfigError(place, f"unknown rule {rule_name!r} "
                          f"(known: {', '.join(build.registry)})")
    place = f"{place} {rule_name}"
    if phase not in cls.phases:
        allowed = ", ".join(p.value for p in PHASES if p in cls.phases)
        raise ConfigError(place, f"cannot run in {phase.value} (it runs in {allowed})")
    if not isinstance(params, dict):
        raise ConfigError(place, "parameters must be a mapping")
    policy, params = split_reserved(place, params, phase)
    if policy.timeout_ms is not None and isinstance(cls, Builtin):
        raise ConfigError(place, "parameter 'timeout_ms': for Python rules only (a built-in "
                          "rule runs to completion; the request's deadline skips optional "
                          "ones)")
    rule = _rule(place, cls, params, phase, profile)
    exp = build.gates.get(rule_name)
    if exp is None:
        return Step(rule, policy=policy)
    by_variant = {}
    for variant, overrides in exp.params.items():
        if rule_name in overrides:  # built once here, never per request
            by_variant[variant] = _rule(
                f"{place} with experiments {exp.name} variant {variant}", cls,
                {**params, **overrides[rule_name]}, phase, profile)
    return Step(rule, exp.name, by_variant, policy)


def _rule(place: str, cls: Any, params: dict[str, Any], phase: Phase,
          profile: str) -> Rule:
    """A built-in rule with its parameters checked by the engine, or a Python rule's
    adapter."""
    if not isinstance(cls, Builtin):
        return build_python_rule(place, cls, params, phase, profile)
    try:
        return BuiltinRule(cls.name, phase, cls.check(params))
    except ValueError as exc:
        raise ConfigError(place, str(exc)) from exc


def _routing(raw: Any, profiles: Mapping[str, Pipeline]) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise ConfigError("routing", "must be a mapping of query class to profile")
    for cls, profile in raw.items():
        if not isinstance(profile, str):
            raise ConfigError(f"routing.{cls}", "must be the name of one profile")
        if profile not in profiles:
            raise ConfigError(f"routing.{cls}", f"routes to a missing profile {profile!r}")
    return {str(k): str(v) for k, v in raw.items()}


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


def describe(engine: Engine) -> dict[str, Any]:
    """The experiments and holdout of a config, as GET /v1/experiments and
    `rearrange check-config --json` show them (percentages, not buckets)."""
    holdout = engine.holdout
    return {
        "config_version": engine.version,
        "holdout": None if holdout is None else {
            "unit": holdout.unit, "percent": holdout.upper / 100, "salt": holdout.salt or None},
        "experiments": [
            {"name": e.name, "unit": e.unit, "layer": e.layer, "salt": e.salt or None,
             "slots": [e.slots[0] / 100, e.slots[1] / 100] if e.layer else None,
             "variants": {v: list(r) for v, r in e.ranges().items()},
             "params": e.params, "rules": list(e.rules),
             "interleave": None if e.interleave is None else dict(
                 zip(("control", "treatment"), e.interleave, strict=True))}
            for e in engine.experiments
        ],
    }
