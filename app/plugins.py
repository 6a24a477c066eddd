"""Python rules: the `plugins:` modules of a config, checked at load, run on dict documents.

A module named in `plugins:` exposes `RULES`, a list of classes with `name`, `phases` and
optionally `Params` (CONTRACT "Python rules"). Everything about them is checked when the
config loads, with the place named, so a bad plugin is refused like a bad parameter.
Per request the runner calls the instance on dicts and checks what it returns; a refused
output is a failure of that rule (errors.RefusedOutput), handled by the step's `on_error`.
"""
from __future__ import annotations

import datetime as dt
import importlib
import json
import math
from collections.abc import Mapping
from typing import Any

import msgspec
from pydantic import BaseModel, ValidationError

from app.errors import ConfigError, RefusedOutput, pydantic_problem
from app.pipeline import (
    APPLIED,
    PHASES,
    RERANK,
    AuditRecord,
    Context,
    Doc,
    Phase,
    RuleResult,
)

# What a Python rule can do to a page through the dicts it returns; annotations and
# collapses are built-in rules' business (a dict cannot carry them back).
ACTIONS = frozenset({"remove", "trim", "rescore", "move"})
_DROPS = frozenset({"remove", "trim"})
_RECORD_KEYS = frozenset({"doc_id", "action", "reason", "delta"})
MAX_SCORE = 1e15  # the request's own bound on scores: sums of deltas stay finite


def load_plugins(raw: Any, builtins: Mapping[str, Any]) -> dict[str, type]:
    """Import each module of `plugins:` and check its RULES; name → class."""
    if raw is None:
        return {}
    if not isinstance(raw, list) or not all(isinstance(m, str) and m for m in raw):
        raise ConfigError("plugins", "a list of module names (importable from the "
                          "service's Python path) is required")
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


def build_python_rule(place: str, cls: type, params: dict[str, Any], phase: Phase,
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
    return PythonRule(cls.name, phase, instance, validated, profile)


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


def doc_dict(doc: Doc) -> dict[str, Any]:
    """A Doc as the request's document dict: id, url, the current score and every field the
    request gave for it (CONTRACT "Python rules"), each call its own copy; a Doc built
    without a request (`given` None) gives the fields it carries."""
    out: dict[str, Any] = {"id": doc.id, "url": doc.url, "score": doc.score}
    if doc.given is not None:
        out.update(msgspec.to_builtins(doc.given))
        return out
    if doc.factors:
        out["factors"] = dict(doc.factors)
    if doc.spam_score:
        out["spam_score"] = doc.spam_score
    if doc.adult_score:
        out["adult_score"] = doc.adult_score
    if doc.domain_age_days is not None:
        out["domain_age_days"] = doc.domain_age_days
    if doc.is_ad:
        out["is_ad"] = True
    if doc.topics:
        out["topics"] = list(doc.topics)
    if doc.blocked_regions:
        out["blocked_regions"] = sorted(doc.blocked_regions)
    if doc.text is not None:
        out["text"] = doc.text
    if doc.attributes:
        out["attributes"] = doc.attributes
    return out


class PythonRule:
    """A plugin's instance in the Python runner: dicts in, the output checked, Docs out."""

    optional = False

    def __init__(self, name: str, phase: Phase, instance: Any, params: Any,
                 profile: str) -> None:
        self.name = name
        self.phase = phase
        self.instance = instance
        self.params = params  # the validated Params, or the plain dict
        self.profile = profile

    def applies(self, ctx: Context) -> bool:
        return True

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        query = msgspec.to_builtins(ctx.query) if ctx.query is not None else {
            "text": ctx.query_text, "classes": list(ctx.classes), "region": ctx.region,
            "age_mode": ctx.age_mode}
        context = {"query": query, "profile": self.profile, "variants": dict(ctx.variants),
                   "phase": self.phase.value}
        return self.checked(docs, self.instance([doc_dict(d) for d in docs], context))

    def checked(self, docs: list[Doc], result: Any) -> RuleResult:
        """The rule's (documents, records) as Docs and AuditRecords; RefusedOutput when it
        breaks the contract (unknown or repeated id, bad score, a change without a record)."""
        if not isinstance(result, tuple | list) or len(result) != 2:
            raise RefusedOutput(f"returned {type(result).__name__}, not (documents, records)")
        out, raw_records = result
        if not isinstance(out, list) or not isinstance(raw_records, list):
            raise RefusedOutput("documents and records must both be lists")
        by_id = {d.id: d for d in docs}
        page = self._page(out, by_id)
        records = self._records(raw_records, by_id)
        kept = {d.id for d in page}
        said = {(r.doc_id, r.action): r for r in records}
        for doc in docs:
            if doc.id not in kept and (doc.id, "remove") not in said and (
                    doc.id, "trim") not in said:
                raise RefusedOutput(f"removed {doc.id!r} without a remove or trim record")
        for doc in page:
            before = by_id[doc.id].score
            if doc.score != before:
                rec = said.get((doc.id, "rescore"))
                if rec is None:
                    raise RefusedOutput(f"rescored {doc.id!r} without a rescore record")
                if rec.delta is None:
                    rec.delta = doc.score - before
        if self.phase is RERANK:
            # The stable sort by score after rerank orders the page; a rerank rule's own
            # order is not kept (the built-in ones never reorder either).
            order = {d.id: i for i, d in enumerate(docs)}
            page.sort(key=lambda d: order[d.id])
        else:
            self._check_moves(docs, page, said)
        records.extend(self._went_along(docs, kept, said))
        return page, records

    def _page(self, out: list[Any], by_id: Mapping[str, Doc]) -> list[Doc]:
        page: list[Doc] = []
        seen: set[str] = set()
        for i, item in enumerate(out):
            if not isinstance(item, dict):
                raise RefusedOutput(f"documents[{i}] is a {type(item).__name__}, not a dict")
            id_ = item.get("id")
            doc = by_id.get(id_) if isinstance(id_, str) else None
            if doc is None:
                raise RefusedOutput(f"documents[{i}]: id {id_!r} was not in its input")
            if id_ in seen:
                raise RefusedOutput(f"documents[{i}]: id {id_!r} appears twice")
            seen.add(id_)
            score = item.get("score")
            if isinstance(score, bool) or not isinstance(score, int | float) or not (
                    math.isfinite(score) and abs(score) <= MAX_SCORE):
                raise RefusedOutput(f"documents[{i}] {id_}: score {score!r} is not a finite "
                                    f"number within ±{MAX_SCORE:g}")
            page.append(doc if score == doc.score else doc.replace(score=float(score)))
        return page

    def _records(self, raw: list[Any], by_id: Mapping[str, Doc]) -> list[AuditRecord]:
        records = []
        for j, rec in enumerate(raw):
            where = f"records[{j}]"
            if not isinstance(rec, dict):
                raise RefusedOutput(f"{where} is a {type(rec).__name__}, not a dict")
            extra = sorted(str(k) for k in set(rec) - _RECORD_KEYS)
            if extra:
                raise RefusedOutput(f"{where}: unknown key {extra[0]!r} "
                                    "(a record has doc_id, action, reason, delta)")
            doc_id, action, reason = rec.get("doc_id"), rec.get("action"), rec.get("reason")
            delta = rec.get("delta")
            if not isinstance(doc_id, str) or doc_id not in by_id:
                raise RefusedOutput(f"{where}: doc_id {doc_id!r} was not in its input")
            if action not in ACTIONS:
                raise RefusedOutput(f"{where}: action {action!r} is not one a Python rule "
                                    f"takes ({', '.join(sorted(ACTIONS))})")
            if not isinstance(reason, str):
                raise RefusedOutput(f"{where}: reason must be a string")
            # An int delta is written as a JSON integer: one past 64 bits has no form there.
            if delta is not None and (isinstance(delta, bool) or not isinstance(
                    delta, int | float) or (isinstance(delta, int) and not
                    -2**63 <= delta < 2**63) or not math.isfinite(delta)):
                raise RefusedOutput(f"{where}: delta {delta!r} is not a finite number or null")
            records.append(AuditRecord(self.name, self.phase, doc_id, action, reason, delta,
                                       APPLIED))
        return records

    @staticmethod
    def _check_moves(docs: list[Doc], page: list[Doc],
                     said: Mapping[tuple[str | None, str], AuditRecord]) -> None:
        kept = {d.id for d in page}
        before = {id_: i for i, id_ in enumerate(d.id for d in docs if d.id in kept)}
        for after, doc in enumerate(page):
            delta = after - before[doc.id]
            if delta:
                rec = said.get((doc.id, "move"))
                if rec is None:
                    raise RefusedOutput(f"moved {doc.id!r} without a move record")
                if rec.delta is None:
                    rec.delta = delta

    def _went_along(self, docs: list[Doc], kept: set[str],
                    said: Mapping[tuple[str | None, str], AuditRecord]) -> list[AuditRecord]:
        """Records for documents collapsed under a dropped one: they go with it."""
        extra = []
        for doc in docs:
            if doc.id in kept or not doc.collapsed:
                continue
            rec = said.get((doc.id, "remove")) or said[(doc.id, "trim")]
            verb = "trimmed" if rec.action == "trim" else "removed"
            why = f"collapsed under {doc.id}, {verb} with it: {rec.reason}"
            extra.extend(AuditRecord(self.name, self.phase, c["id"], rec.action, why, None,
                                     APPLIED) for c in doc.collapsed)
        return extra
