"""Which active entries a bulk action takes: the filter of `POST /v1/banlist/remove`, of
`GET /v1/banlist/entries` and of `rearrange banlist list|remove` (docs/banlist.md, "Undo a
campaign").

The index picks them (`BanIndex.select`, crates/engine/src/banlist/select.rs): one pass
over its rows in Rust, so a filter over a million entries costs milliseconds a page.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from app.banlist.index import BanIndex
from app.banlist.model import SCOPES, Entry, iso
from app.errors import FieldError
from app.timespec import parse_time

# The filter's fields, in the order the docs list them; the times are ISO 8601 with an
# offset, or dates, as `from` and `until` of GET /v1/banlist/changes take them
FIELDS = ("actor", "reason_contains", "scope", "value_suffix", "created_before",
          "created_after", "expires_before")
TIMES = ("created_before", "created_after", "expires_before")
MAX_TEXT = 1000  # characters of a text field (a reason is at most as long)
PAGE = 10_000  # entries a bulk action takes from the index at a time


@dataclass(frozen=True, slots=True)
class Selection:
    """What an entry must be to be taken (each field given must hold): made by `actor`,
    its reason holding `reason_contains` (in any case), of `scope`, its value (as the
    entries list writes it) ending with `value_suffix`, created before `created_before`
    and at or after `created_after`, expiring before `expires_before` (a permanent entry
    never does). Times are epoch seconds."""

    actor: str | None = None
    reason_contains: str | None = None
    scope: str | None = None
    value_suffix: str | None = None
    created_before: float | None = None
    created_after: float | None = None
    expires_before: float | None = None

    @classmethod
    def of(cls, fields: Mapping[str, str | None], now: float, where: str) -> Selection:
        """The selection of a filter's fields as given (text); FieldError naming
        `{where}.{field}` for a bad one."""
        got: dict[str, Any] = {}
        for name in FIELDS:
            text = fields.get(name)
            if text is None:
                continue
            if not text.strip():
                raise FieldError(f"{where}.{name}", "empty: leave it out to take any")
            got[name] = _parsed(name, text, now, f"{where}.{name}")
        after, before = got.get("created_after"), got.get("created_before")
        if after is not None and before is not None and after >= before:
            raise FieldError(f"{where}.created_before", f"{iso(before)} is not after "
                             f"created_after {iso(after)}: no entry could be both")
        return cls(**got)

    def empty(self) -> bool:
        """No field given: it takes every active entry."""
        return all(v is None for v in asdict(self).values())

    def as_dict(self) -> dict[str, Any]:
        """The fields given, times as ISO 8601 UTC (what an answer echoes)."""
        return {k: iso(v) if k in TIMES else v for k, v in asdict(self).items()
                if v is not None}

    def page(self, index: BanIndex, after: str | None, limit: int,
             now: float) -> tuple[list[Entry], bool, int]:
        """Up to `limit` entries active at `now` that it takes, after id `after` in the
        entries list's order; whether more follow, and how many it takes in all."""
        return index.select(after, limit, now, **{k: v for k, v in asdict(self).items()
                                                  if v is not None})

    def entries(self, index: BanIndex, now: float) -> Iterator[Entry]:
        """Every entry it takes, in id order, PAGE at a time (never all made at once)."""
        after = None
        while True:
            found, more, _ = self.page(index, after, PAGE, now)
            yield from found
            if not more or not found:
                return
            after = found[-1].id


def _parsed(name: str, text: str, now: float, field: str) -> str | float:
    if len(text) > MAX_TEXT:
        raise FieldError(field, f"{len(text)} characters; at most {MAX_TEXT}")
    value = text.strip()
    if name in TIMES:
        try:
            return parse_time(value, now, ages=False)
        except ValueError as exc:
            raise FieldError(field, str(exc)) from None
    if name == "scope" and value not in SCOPES:
        raise FieldError(field, f"unknown scope {value[:40]!r} (one of {', '.join(SCOPES)})")
    if name == "value_suffix":  # hosts are written in lowercase; a path keeps its case
        host, slash, path = value.partition("/")
        return host.lower() + slash + path
    return value
