"""Python rules: the `plugins:` modules of a config, checked and built at load.

A module named in `plugins:` exposes `RULES`, a list of classes with `name`, `phases` and
optionally `Params` (CONTRACT "Python rules"). Everything about them is checked when the
config loads, with the place named, so a bad plugin is refused like a bad parameter.
Per request the engine calls the instance on dicts and checks what it returns; a refused
output is a failure of that rule, handled by the step's `on_error`.
"""
from __future__ import annotations

import datetime as dt
import importlib
import json
import math
import pickle
from collections.abc import Collection, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from app.errors import ConfigError, pydantic_problem
from app.phases import PHASES, Phase


def load_plugins(raw: Any, builtins: Mapping[str, Any],
                 served: Collection[str] | None = None) -> dict[str, type]:
    """Import each module of `plugins:` and check its RULES; name → class.

    `served` (a candidate config: POST /v1/admin/config/try, replay, check-config
    --against) is the modules the served config loaded: a candidate may name only those,
    already imported, and naming another is refused before any import (an import runs the
    module's code)."""
    if raw is None:
        return {}
    if not isinstance(raw, list) or not all(isinstance(m, str) and m for m in raw):
        raise ConfigError("plugins", "a list of module names (importable from the "
                          "service's Python path) is required")
    if served is not None:
        for i, module_name in enumerate(raw):
            if module_name not in served:
                loaded = ", ".join(served) or "none"
                raise ConfigError(f"plugins[{i}] {module_name}", "not a module the served "
                                  f"config loaded (it loaded: {loaded}): a candidate config "
                                  "imports nothing; serve it through a reload to load it")
    found: dict[str, type] = {}
    owner: dict[str, str] = {}
    for i, module_name in enumerate(raw):
        place = f"plugins[{i}] {module_name}"
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # any error of the module's own code: it cannot be used
            raise ConfigError(place, f"cannot import: {type(exc).__name__}: {exc}") from exc
        rules = getattr(module, "RULES", None)
        if not isinstance(rules, list | tuple) or not rules:
            raise ConfigError(place, "has no RULES (a non-empty list of rule classes)")
        for j, cls in enumerate(rules):
            name = _check_class(f"{place}.RULES[{j}]", cls)
            if name in builtins:
                raise ConfigError(f"{place}.RULES[{j}] {name}", "the name of a built-in rule")
            if name in found:
                raise ConfigError(f"{place}.RULES[{j}] {name}",
                                  f"name already taken by a rule of {owner[name]}")
            found[name], owner[name] = cls, module_name
    return found


def _check_class(place: str, cls: Any) -> str:
    if not isinstance(cls, type):
        raise ConfigError(place, f"must be a class, not {type(cls).__name__}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ConfigError(place, f"{cls.__name__} has no `name` (a non-empty string)")
    phases = getattr(cls, "phases", None)
    known = ", ".join(p.value for p in PHASES)
    if not isinstance(phases, set | frozenset | list | tuple) or not phases:
        raise ConfigError(f"{place} {name}", f"no `phases` (a set of phase names: {known})")
    for phase in phases:
        if phase not in {p.value for p in PHASES}:
            raise ConfigError(f"{place} {name}", f"phases: {phase!r} is not a phase ({known})")
    params = getattr(cls, "Params", None)
    if params is not None and not (isinstance(params, type) and issubclass(params, BaseModel)):
        raise ConfigError(f"{place} {name}", "Params must be a pydantic model class")
    if not any("__call__" in vars(k) for k in cls.__mro__[:-1]):
        raise ConfigError(f"{place} {name}", "instances must be callable as "
                          "rule(documents, context)")
    return name


def known_params(cls: Any) -> set[str] | None:
    """The parameter names a rule accepts (YAML names, aliases included); None: any."""
    model = getattr(cls, "Params", None)
    if model is None:
        return None
    fields = model.model_fields
    return set(fields) | {f.alias for f in fields.values() if f.alias}


def build_python_rule(place: str, cls: type[Any], params: dict[str, Any], phase: Phase,
                      profile: str) -> PythonRule:
    """Validate a step's parameters (reserved keys already out) and build `cls(params)`."""
    model = getattr(cls, "Params", None)
    validated: Any = dict(params)
    if model is None:
        jsonable(place, validated)  # the compiled spec carries them: refuse NaN here
    else:
        known = known_params(cls) or set()
        unknown = sorted(str(k) for k in params if k not in known)
        if unknown:
            raise ConfigError(place, f"unknown parameter {unknown[0]!r}")
        try:
            validated = model.model_validate(params)
        except ValidationError as exc:
            raise ConfigError(place, pydantic_problem(exc)) from exc
    try:
        instance = cls(validated)
    except Exception as exc:  # the plugin's constructor refused its parameters
        raise ConfigError(place, f"building the rule failed: {type(exc).__name__}: "
                          f"{exc}") from exc
    try:
        handle = RuleHandle(instance, *_address(place, cls), dict(params))
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise ConfigError(place, f"parameters cannot be handed to a rule process: "
                          f"{exc}") from exc
    return PythonRule(cls.name, phase, handle, validated, profile)


def find(module_name: str, qualname: str) -> Any:
    """The class `qualname` of module `module_name`, imported."""
    found: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _address(place: str, cls: type[Any]) -> tuple[str, str]:
    """(module, qualname) by which a rule process imports `cls`, checked: it builds its own
    copy of the rule (app/engine/rule_worker.py)."""
    module, qualname = cls.__module__, cls.__qualname__
    try:
        found = find(module, qualname)
    except (ImportError, AttributeError):
        found = None
    if found is not cls:
        raise ConfigError(place, f"class {qualname} cannot be imported as "
                          f"{module}.{qualname}: Python rules run in processes of their own, "
                          "which import the class by that name")
    return module, qualname


def jsonable(place: str, value: Any) -> Any:
    """`value` in JSON's own types: sets as sorted lists, tuples as lists, times as RFC 3339
    text; ConfigError at `place` for what JSON cannot hold (NaN, an object)."""
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(place, f"parameter value {value} is not a finite number")
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(place, v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        items = [jsonable(place, v) for v in value]
        if all(isinstance(v, str) for v in items):
            return sorted(items)
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, list | tuple):
        return [jsonable(place, v) for v in value]
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, BaseModel):
        return jsonable(place, value.model_dump(by_alias=True))
    raise ConfigError(place, f"parameter value of type {type(value).__name__} has no JSON form")


class PythonRule:
    """The rule of a step that names a Python rule: the plugin's instance, built at config
    load (in its handle, which a rule process builds its own copy from), and the parameters
    it was built with. The engine calls the handle per request
    (crates/engine/src/rules/python.rs) and checks what it returns."""

    def __init__(self, name: str, phase: Phase, handle: RuleHandle, params: Any,
                 profile: str) -> None:
        self.name = name
        self.phase = phase
        self.handle = handle
        self.params = params  # the validated Params, or the plain dict
        self.profile = profile


class RuleHandle:
    """A Python rule as the engine holds it: callable here (the offline tools call it in
    their own process), and named so that a rule process builds the same rule: the class
    `qualname` of `module`, on the step's parameters as the config gave them."""

    __slots__ = ("instance", "key")

    def __init__(self, instance: Any, module: str, qualname: str,
                 params: dict[str, Any]) -> None:
        self.instance = instance
        # what a rule process builds the rule from, and keeps it by: the same rule and
        # parameters in the next config (a reload) is the same rule, not built again
        self.key = pickle.dumps((module, qualname, params), pickle.HIGHEST_PROTOCOL)

    def __call__(self, documents: Any, context: Any) -> Any:
        return self.instance(documents, context)
