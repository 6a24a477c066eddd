"""The reserved keys every step may carry beside its rule's own parameters.

`on_error`, `enabled`, `valid_from` and `valid_until` are the runner's business, not the
rule's: the loader takes them out of a step's parameters before the rule's Params see
them, checks them here and hands the runner a StepPolicy. `timeout_ms`, a Python rule's
own time limit, is taken out the same way (a built-in refuses it: it runs to completion).
"""
from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.errors import ConfigError
from app.phases import Phase

OPEN, CLOSED = "open", "closed"
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)?\Z")
RESERVED = frozenset({"on_error", "enabled", "valid_from", "valid_until", "timeout_ms"})
# Legal and safety rules fail closed: serving a page they could not vouch for is worse
# than serving none. Every other phase shapes the page and may be skipped.
_CLOSED_BY_DEFAULT = frozenset({Phase.PRE_FILTER, Phase.POST_FILTER})


@dataclass(frozen=True, slots=True)
class StepPolicy:
    """When a step runs and what a failure of it does; times are epoch seconds."""

    on_error: str | None = None  # None: the phase's default (default_on_error)
    enabled: bool = True
    valid_from: float | None = None
    valid_until: float | None = None
    timeout_ms: float | None = None  # Python rules: shorter than the request's deadline

    @property
    def always(self) -> bool:
        """True for an enabled step without a validity window: the runner checks nothing."""
        return self.enabled and self.valid_from is None and self.valid_until is None

    @property
    def window(self) -> str | None:
        """The validity window in UTC as explain says it ("valid from … until …"), or None."""
        if self.valid_from is None and self.valid_until is None:
            return None
        parts = ["valid"]
        for word, at in (("from", self.valid_from), ("until", self.valid_until)):
            if at is not None:
                stamp = dt.datetime.fromtimestamp(at, dt.UTC)
                parts.append(f"{word} {stamp.isoformat().replace('+00:00', 'Z')}")
        return " ".join(parts)


def default_on_error(phase: str) -> str:
    """`closed` in pre-filter and post-filter, `open` elsewhere (CONTRACT "When a rule fails")."""
    return CLOSED if phase in _CLOSED_BY_DEFAULT else OPEN


def split_reserved(place: str, params: Mapping[str, Any], phase: str
                   ) -> tuple[StepPolicy, dict[str, Any]]:
    """(the step's policy, its parameters without the reserved keys); ConfigError at
    `place` (the step, `profiles.<p>.<phase>[i] <rule>`) naming the key for a bad value."""
    rest = {k: v for k, v in params.items() if k not in RESERVED}
    on_error = params.get("on_error", default_on_error(phase))
    if on_error not in (OPEN, CLOSED):
        raise ConfigError(place, f"parameter 'on_error': must be {OPEN} or {CLOSED}, "
                          f"not {on_error!r}")
    enabled = params.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(place, f"parameter 'enabled': must be true or false, not {enabled!r}")
    start = _time(place, "valid_from", params.get("valid_from"))
    end = _time(place, "valid_until", params.get("valid_until"))
    if start is not None and end is not None and start >= end:
        raise ConfigError(place, "parameter 'valid_until': must be after valid_from "
                          f"({params['valid_from']} >= {params['valid_until']})")
    timeout = params.get("timeout_ms")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)
                                or not math.isfinite(timeout) or timeout <= 0):
        raise ConfigError(place, "parameter 'timeout_ms': must be a positive number of "
                          f"milliseconds, not {timeout!r}")
    return StepPolicy(on_error, enabled, start, end,
                      None if timeout is None else float(timeout)), rest


def _time(place: str, key: str, raw: Any) -> float | None:
    """An RFC 3339 time with an offset as epoch seconds. YAML gives a datetime for an
    unquoted timestamp and a str for a quoted one; both are taken, a naive time neither
    (which zone it meant is a guess, and a guess moves a legal deadline by hours)."""
    if raw is None:
        return None
    when = raw
    if isinstance(raw, str):
        # RFC 3339's shape (fromisoformat alone takes more: week dates, a date alone);
        # the offset is optional here so that a naive time gets its own message below.
        when = None
        if _RFC3339.match(raw):
            try:
                when = dt.datetime.fromisoformat(raw.upper())
            except ValueError:  # the right shape, an impossible date (2027-02-30)
                when = None
        if when is None:
            raise ConfigError(place, f"parameter {key!r}: {raw!r} is not an RFC 3339 time "
                              "(e.g. 2027-01-01T00:00:00Z)")
    if isinstance(raw, dt.date) and not isinstance(raw, dt.datetime):
        raise ConfigError(place, f"parameter {key!r}: {raw} is a date; give a time with "
                          "an offset (e.g. 2027-01-01T00:00:00Z)")
    if not isinstance(when, dt.datetime):
        raise ConfigError(place, f"parameter {key!r}: must be an RFC 3339 time with an "
                          f"offset (e.g. 2027-01-01T00:00:00Z), not {raw!r}")
    if when.tzinfo is None or when.utcoffset() is None:
        raise ConfigError(place, f"parameter {key!r}: {raw} has no offset; add one "
                          "(Z for UTC, or +03:00)")
    return when.timestamp()
