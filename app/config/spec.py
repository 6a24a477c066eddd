"""The compiled spec: a loaded config as the JSON the Rust engine is built from, and the
engine built from it (`with_core`).

One narrow door between the planes (STYLE 7): the engine gets plain JSON text, fully
resolved (extends applied, every default filled, steps in run order), and the list of
Python rule instances that steps name by index. The field names are the ones the
engine's parser reads; changing one is a change on both sides.
"""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from pydantic import BaseModel

from app import _engine
from app.config.load import Engine
from app.config.pipeline import Rule, Step
from app.config.plugins import PythonRule, RuleHandle, jsonable
from app.config.step_keys import default_on_error
from app.errors import ConfigError
from app.experiments.bucketing import Experiment
from app.phases import Phase


def compile_spec(engine: Engine) -> tuple[str, list[Any]]:
    """(the spec as JSON text, the Python rule instances its steps' `python` indexes)."""
    instances: list[Any] = []
    profiles = {}
    for name, pipeline in engine.profiles.items():
        steps = []
        for phase, phase_steps in pipeline.phases:
            for i, step in enumerate(phase_steps):
                place = f"profiles.{name}.{phase.value}[{i}] {step.rule.name}"
                steps.append(_step(place, phase, step, instances))
        profiles[name] = steps
    spec = {
        "version": engine.version,
        "profiles": profiles,
        "routing": dict(engine.routing),
        "experiments": [_experiment(e) for e in engine.experiments],
        "holdout": None if engine.holdout is None else {
            "unit": engine.holdout.unit, "upper": engine.holdout.upper,
            "salt": engine.holdout.salt},
    }
    return json.dumps(spec, ensure_ascii=False, separators=(",", ":"), allow_nan=False), instances


def _experiment(e: Experiment) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": e.name, "unit": e.unit, "variants": [[v, upper] for v, upper in e.variants],
        "salt": e.salt, "layer": e.layer, "slots": list(e.slots)}
    if e.interleave is not None:
        out["interleave"] = {"control": e.interleave[0], "treatment": e.interleave[1]}
    return out


def _step(place: str, phase: Phase, step: Step, instances: list[Any]) -> dict[str, Any]:
    policy = step.policy
    return {
        "phase": phase.value,
        "rule": step.rule.name,
        "params": _params(place, step.rule),
        "on_error": policy.on_error or default_on_error(phase),
        "enabled": policy.enabled,
        "valid_from": policy.valid_from,
        "valid_until": policy.valid_until,
        "window": policy.window,
        "experiment": step.experiment,
        "variants": {v: _params(f"{place} variant {v}", r) for v, r in step.variants.items()},
        "python": _python(step.rule, instances),
        "variant_python": {v: i for v, r in step.variants.items()
                           if (i := _python(r, instances)) is not None},
        "timeout_ms": policy.timeout_ms,
    }


def python_rules(engine: Engine) -> list[RuleHandle]:
    """The handles of every Python rule the config's steps and variants name."""
    handles: list[RuleHandle] = []
    for pipeline in engine.profiles.values():
        for _, phase_steps in pipeline.phases:
            for step in phase_steps:
                for rule in (step.rule, *step.variants.values()):
                    if isinstance(rule, PythonRule):
                        handles.append(rule.handle)
    return handles


def _python(rule: Rule, instances: list[Any]) -> int | None:
    if not isinstance(rule, PythonRule):
        return None
    instances.append(rule.handle)
    return len(instances) - 1


def _params(place: str, rule: Rule) -> dict[str, Any]:
    """The rule's validated parameters by their YAML names, every default filled."""
    params = rule.params
    if isinstance(params, BaseModel):
        params = params.model_dump(by_alias=True)
    named: dict[str, Any] = jsonable(place, params)
    return named


def with_core(engine: Engine, engine_metrics: Any) -> Engine:
    """The config with its Rust engine built (from compile_spec's JSON and Python rules);
    a spec the engine refuses is a ConfigError like any other, so the last good config
    stays in use."""
    spec, python_rules = compile_spec(engine)
    try:
        core = _engine.Engine(spec, python_rules, engine_metrics)
    except ValueError as exc:
        raise ConfigError("engine", str(exc)) from exc
    return replace(engine, core=core)
