"""Every error the core raises, in one place. None carries an HTTP status: the API maps
each class to one, once, at its boundary (app/api/errors.py).

The boundaries keep their own transport exceptions beside their code, as they are no
core error: the API's body reader its `BodyRefused` kinds (app/api/errors.py) and
`ClientGone` (app/api/observe.py, the client left mid-body), the CLI's client `Refused`
and `Unreachable` (app/cli/client.py, what the service said or that it did not answer)."""
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
