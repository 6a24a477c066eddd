"""Every error the core raises, in one place. None carries an HTTP status: the API maps
each class to one, once, at its boundary (app/api/errors.py).

The boundaries keep their own transport exceptions beside their code, as they are no
core error: the API's body reader its `BodyRefused` kinds (app/api/errors.py) and
`ClientGone` (app/api/observe.py, the client left mid-body), the CLI's client `Refused`
and `Unreachable` (app/cli/client.py, what the service said or that it did not answer)."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sized
from typing import Any

from pydantic import ValidationError


class RearrangeError(Exception):
    """Base of the errors the core raises on purpose."""


class StartupRefused(RearrangeError):
    """The service will not start in this environment (say, Redis may evict keys)."""


class SettingsError(RearrangeError, ValueError):
    """A setting from the environment the service cannot start with; names the variable."""


class FieldError(RearrangeError):
    """Bad input: names the field (a JSON path such as `documents[3].score`) and the problem.

    `extra` holds more fields for the error body (say, a write id). The subclasses below
    say why the input is refused when it is not simply invalid; `code`, when a subclass
    sets one, is the body's `error` (CONTRACT.md names some, as `not_durable`)."""

    code: str | None = None

    def __init__(self, field: str, problem: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem
        self.extra = extra or {}


class Malformed(FieldError):
    """The input cannot be read at all (a body that is not JSON)."""


class NotFound(FieldError):
    """The input names something that does not exist (an entry id, a config version)."""


class Forbidden(FieldError):
    """The caller may not do this, whatever their token's rights (approving their own
    proposal, say)."""


class Conflict(FieldError):
    """The input is valid but the state refuses it (another history, a read-only store)."""


class TooLarge(FieldError):
    """The input is over a size limit (a body, a document's text, one write's entries)."""


class Unavailable(FieldError):
    """A store the answer needs is unreachable or refusing writes; `problem` says what
    was and was not done."""


class BanlistError(FieldError):
    """A refused banlist value or entry (unknown scope, malformed value, bad regions); the
    banlist and sanction stores raise it, or one of the kinds below, for what they refuse."""


class BanlistNotFound(BanlistError, NotFound):
    """No such entry, or no such write id."""


class BanlistConflict(BanlistError, Conflict):
    """A write the store's state refuses (read-only, another history, decided on a copy
    another replica has moved past)."""


class BanlistTooLarge(BanlistError, TooLarge):
    """More entries than one write commits."""


class BanlistUnavailable(BanlistError, Unavailable):
    """Redis or the change log failed or refuses writes; `problem` says what was done."""


class BanlistNotDurable(BanlistUnavailable):
    """A write no Redis replica confirmed in time (`WAIT`): it may be on the primary alone,
    where a failover would lose it. A retry of an add is safe."""

    code = "not_durable"


class ConfigError(RearrangeError):
    """An invalid rules/profiles config; `place` names profile, phase, rule and parameter."""

    def __init__(self, place: str, problem: str) -> None:
        super().__init__(f"{place}: {problem}" if place else problem)
        self.place = place
        self.problem = problem


class InputFileError(RearrangeError, ValueError):
    """A file given to a command (captures, an export, saved pages) that cannot be read as
    what it claims to be; the message names the file, the line and the problem."""


class Interrupted(RearrangeError):
    """A store failed partway through a write: `cause` is its error, `problem` says what was
    and was not committed, `result` the answer's fields as far as it went."""

    def __init__(self, cause: Exception, problem: str, result: dict[str, Any]) -> None:
        super().__init__(problem)
        self.cause = cause
        self.problem = problem
        self.result = result


def refuse_unknown_keys(place: str, mapping: Mapping[Any, object], known: set[str] | frozenset[str],
                        problem: str) -> None:
    """ConfigError at `place.key` for the first key of `mapping` not in `known`."""
    unknown = sorted(str(k) for k in set(mapping) - set(known))
    if unknown:
        raise ConfigError(f"{place}.{unknown[0]}" if place else unknown[0], problem)


A_TIME = "a time with its offset, such as 2026-12-31T00:00:00Z"
# pydantic's error types, in the project's words: what the value should be. `{name}` is
# filled from the error's context (its bounds); a type not here keeps pydantic's message.
_WORDS = {
    "missing": "required", "extra_forbidden": "unknown field",
    "timezone_aware": A_TIME, "datetime_parsing": A_TIME, "datetime_from_date_parsing": A_TIME,
    "datetime_type": A_TIME, "datetime_object_invalid": A_TIME,
    "string_type": "a string", "int_type": "a whole number", "int_parsing": "a whole number",
    "int_from_float": "a whole number", "float_type": "a number", "float_parsing": "a number",
    "finite_number": "a finite number", "bool_type": "true or false",
    "bool_parsing": "true or false", "list_type": "a list", "dict_type": "an object",
    "model_type": "an object", "model_attributes_type": "an object",
    "literal_error": "one of {expected}", "enum": "one of {expected}",
    "string_too_long": "at most {max_length} characters",
    "string_too_short": "at least {min_length} characters",
    "too_long": "at most {max_length} items", "too_short": "at least {min_length} items",
    "greater_than": "more than {gt}", "greater_than_equal": "at least {ge}",
    "less_than": "less than {lt}", "less_than_equal": "at most {le}",
    "string_pattern_mismatch": "of the form {pattern}",
    "json_invalid": "not valid JSON: {error}",
}
_OWN_MESSAGE = ("Value error, ", "Assertion failed, ")  # a validator's own words


def validation_problem(error: Mapping[str, Any]) -> str:
    """One pydantic error (an item of `ValidationError.errors()`) as the project says it:
    `a time with its offset, such as …`, `at most 1000 characters (got 5000)`, never
    pydantic's `Input should have timezone info`. The field is the caller's to name."""
    kind, ctx, given = error.get("type", ""), error.get("ctx") or {}, error.get("input")
    msg = str(error.get("msg", ""))
    for prefix in _OWN_MESSAGE:
        if msg.startswith(prefix):
            return msg.removeprefix(prefix) + ("" if given is None else _got(kind, given))
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    words = _WORDS.get(kind)
    if words is None:
        return msg
    ctx = {k: f"{v:g}" if isinstance(v, float) else v for k, v in ctx.items()}  # 0, not 0.0
    if "expected" in ctx:  # "'url', 'prefix' or 'host'"
        ctx["expected"] = str(ctx["expected"]).replace(" or ", ", ")
    try:
        said = words.format(**ctx)
    except (KeyError, IndexError):  # a context without the bound: the words without it
        said = words.split(" {")[0]
    return said + _got(kind, given)


def _got(kind: str, given: object) -> str:
    """` (got …)`: the value refused, as JSON and short (a length for a long one)."""
    if kind in ("missing", "extra_forbidden", "json_invalid"):
        return ""
    if kind in ("string_too_long", "too_long", "too_short") and isinstance(given, Sized):
        return f" (got {len(given)})"
    if isinstance(given, str) and len(given) > 40:
        given = given[:40] + "…"
    if isinstance(given, str | bool | int | float) or given is None:
        return f" (got {json.dumps(given, ensure_ascii=False)})"
    return ""


def pydantic_problem(exc: ValidationError) -> str:
    """The first pydantic error as one line naming the parameter; an unknown key first, as
    the likely cause of the rest (a misspelt required parameter is also a missing one)."""
    errors = exc.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    where = ".".join(str(part) for part in first["loc"])
    msg = validation_problem(first)
    if first["type"] == "extra_forbidden":
        return f"unknown parameter {where!r}"
    return f"parameter {where!r}: {msg}" if where else msg
