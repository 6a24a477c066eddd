"""Times as the T&S tools take them: ISO 8601 with an offset, a date, or an age (`36h`)."""
from __future__ import annotations

import re
from datetime import UTC, date, datetime

_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> int:
    """Whole seconds of a duration: `3600`, `90m`, `36h`, `7d`, `2w` (the ages parse_time
    takes); ValueError saying what is accepted."""
    raw = text.strip()
    if raw.isdigit():
        seconds = float(raw)
    elif m := _AGE.fullmatch(raw):
        seconds = float(m[1]) * _UNIT[m[2]]
    else:
        raise ValueError(f"{text[:40]!r} is not a duration: seconds (3600) or a number with "
                         "a unit s, m, h, d or w (90m, 36h, 7d, 2w)")
    if seconds < 1 or seconds != int(seconds):
        raise ValueError(f"{text[:40]!r}: a duration is a whole number of seconds, at least 1")
    return int(seconds)


def parse_time(text: str, now: float, ages: bool = True) -> float:
    """Epoch seconds of `text`; ValueError saying what is accepted.

    `2025-03-01T12:00:00Z` and `2025-03-01T15:00:00+03:00` are instants, `2025-03-01` is
    its midnight UTC; with `ages`, `90m`, `36h`, `7d`, `2w` count back from `now`. A time
    without an offset is refused: it would mean a different instant on every machine.
    """
    raw = text.strip()
    if ages and (m := _AGE.fullmatch(raw)):
        return now - float(m[1]) * _UNIT[m[2]]
    try:
        if len(raw) == 10:
            day = date.fromisoformat(raw)
            return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()
        when = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        age = ", or an age such as 36h or 7d" if ages else ""
        raise ValueError(f"{text[:40]!r} is not an ISO 8601 time with an offset "
                         f"(2025-03-01T12:00:00Z) or a date (2025-03-01){age}")
    return when.timestamp()
