"""The built-in rules, as the engine declares them (crates/engine/src/rules/<name>.rs).

Nothing about a built-in is stated here: its name, phases, description and parameters'
JSON Schema come from the engine's catalog (`app._engine.builtin_rules()`), read once at
import, and a step's parameters are checked by the code that builds the rule
(`Builtin.check`), defaults filled. The config loader, `check-config` and the docs use
this table.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app import _engine
from app.phases import Phase


@dataclass(frozen=True, slots=True)
class Builtin:
    """A built-in rule as the catalog lists it."""

    name: str
    phases: frozenset[Phase]
    description: str
    schema: Mapping[str, Any]  # JSON Schema of its parameters

    def param_names(self) -> set[str]:
        """The parameters it takes, by their YAML names."""
        return set(self.schema.get("properties", {}))

    def check(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """`params` as the engine builds the rule from them, every default filled;
        ValueError naming the parameter and the problem."""
        checked: dict[str, Any] = json.loads(_engine.builtin_rules(self.name, params))
        return checked


@dataclass(frozen=True, slots=True)
class BuiltinRule:
    """The rule of one configured step that names a built-in: its checked parameters."""

    name: str
    phase: Phase
    params: dict[str, Any]


def _catalog() -> dict[str, Builtin]:
    return {
        entry["name"]: Builtin(entry["name"], frozenset(Phase(p) for p in entry["phases"]),
                               entry["description"], entry["params"])
        for entry in json.loads(_engine.builtin_rules())
    }


RULES: Mapping[str, Builtin] = _catalog()
