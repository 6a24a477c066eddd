"""A compiled config for the Rust Engine from a loaded Python config (tests only).

The service compiles its config with `app.config.spec.compile_spec`.
tests/engine/test_engine.py uses this smaller compiler instead because it can leave rules
out and append raw steps (reserved keys, Python rules by index) that a YAML config would
spell differently or refuse. Both emit the shape the Engine parses.
"""
from __future__ import annotations

import json
from typing import Any

from app.config.load import Engine as Loaded


def _params(rule: Any) -> dict[str, Any]:
    return dict(rule.params)


def compile_spec(loaded: Loaded, skip: frozenset[str] = frozenset({"near_duplicates"}),
                 extra: dict[str, list[dict[str, Any]]] | None = None) -> str:
    """The JSON the Engine takes; `extra` appends raw steps to profiles (Python rules,
    reserved keys)."""
    profiles: dict[str, list[dict[str, Any]]] = {}
    for name, pipeline in loaded.profiles.items():
        steps = []
        for phase, step in pipeline.rules():
            if step.rule.name in skip:
                continue
            steps.append({
                "phase": phase.value, "rule": step.rule.name, "params": _params(step.rule),
                "on_error": None, "enabled": True, "valid_from": None, "valid_until": None,
                "experiment": step.experiment,
                "variants": {v: _params(r) for v, r in step.variants.items()},
                "python": None,
            })
        steps.extend((extra or {}).get(name, []))
        profiles[name] = steps
    experiments = [{"name": e.name, "unit": e.unit, "variants": [list(v) for v in e.variants],
                    "salt": e.salt, "layer": e.layer, "slots": list(e.slots)}
                   for e in loaded.experiments]
    holdout = (None if loaded.holdout is None else
               {"unit": loaded.holdout.unit, "upper": loaded.holdout.upper,
                "salt": loaded.holdout.salt})
    return json.dumps({"version": loaded.version, "profiles": profiles,
                       "routing": dict(loaded.routing), "experiments": experiments,
                       "holdout": holdout})
