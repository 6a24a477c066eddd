"""Every error the core raises, in one place; the API layer maps them to HTTP."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError


class RearrangeError(Exception):
    """Base of the errors the core raises on purpose."""


class StartupRefused(RearrangeError):
    """The service will not start in this environment (say, Redis may evict keys)."""


class SettingsError(RearrangeError, ValueError):
    """A setting from the environment the service cannot start with; names the variable."""


class FieldError(RearrangeError):
    """Bad input: names the field (a JSON path such as `documents[3].score`) and the problem."""

    def __init__(self, field: str, problem: str, status: int = 422) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem
        self.status = status


class ConfigError(RearrangeError):
    """An invalid rules/profiles config; `place` names profile, phase, rule and parameter."""

    def __init__(self, place: str, problem: str) -> None:
        super().__init__(f"{place}: {problem}" if place else problem)
        self.place = place
        self.problem = problem


def refuse_unknown_keys(place: str, mapping: Mapping[Any, object], known: set[str] | frozenset[str],
                        problem: str) -> None:
    """ConfigError at `place.key` for the first key of `mapping` not in `known`."""
    unknown = sorted(str(k) for k in set(mapping) - set(known))
    if unknown:
        raise ConfigError(f"{place}.{unknown[0]}" if place else unknown[0], problem)


def pydantic_problem(exc: ValidationError) -> str:
    """The first pydantic error as one line naming the parameter; an unknown key first, as
    the likely cause of the rest (a misspelt required parameter is also a missing one)."""
    errors = exc.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    where = ".".join(str(part) for part in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        return f"unknown parameter {where!r}"
    return f"parameter {where!r}: {msg}" if where else msg


class BanlistError(RearrangeError):
    """A refused banlist write (unknown scope, malformed value, unknown id)."""

    def __init__(self, field: str, problem: str, status: int = 422,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem
        self.status = status
        self.extra = extra or {}  # more fields for the error body (say, a write id)
