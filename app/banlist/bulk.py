"""Bulk import and export: NDJSON or CSV, every line validated, refusals reported by line."""
from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from app.banlist.base import EntrySpec, expiry, prepare
from app.banlist.model import Entry, parse_iso
from app.errors import BanlistError

FORMATS = ("ndjson", "csv")
WRITABLE = ("scope", "value", "reason", "regions", "ttl_seconds", "expires_at")
# what an export carries besides: accepted so an export imports as is, and ignored
# (the id and creation time are the new commit's, the actor is the importing token's)
IGNORED = ("id", "actor", "created_at")
CSV_COLUMNS = ("id", "scope", "value", "reason", "regions", "expires_at", "actor", "created_at")


def parse(body: bytes, fmt: str, now: float, groups: dict[str, tuple[str, ...]]
          ) -> tuple[list[tuple[int, EntrySpec]], list[dict[str, Any]]]:
    """(line number, spec) of each acceptable line, and {line, field, problem} of each refused."""
    if fmt not in FORMATS:
        raise BanlistError("format", f"unknown format {fmt!r} (ndjson or csv)")
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BanlistError("body", f"not UTF-8: {exc}") from None
    rows = _ndjson(text) if fmt == "ndjson" else _csv(text)
    specs: list[tuple[int, EntrySpec]] = []
    refused: list[dict[str, Any]] = []
    seen: dict[tuple[str, str, frozenset[str]], int] = {}
    for line, row in rows:
        try:
            if isinstance(row, str):
                raise BanlistError("line", row)
            spec = _spec(row, now)
            ok = prepare(spec, now, groups)
            key = (ok.scope, ok.value, ok.regions)
            if key in seen:
                raise BanlistError("value", f"duplicate of line {seen[key]}")
            seen[key] = line
        except BanlistError as exc:
            refused.append({"line": line, "field": exc.field, "problem": exc.problem})
        else:
            specs.append((line, spec))
    return specs, refused


def _ndjson(text: str) -> Iterator[tuple[int, dict[str, Any] | str]]:
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        try:
            item = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            yield n, f"not JSON: {exc}"
            continue
        yield n, item if isinstance(item, dict) else "not a JSON object"


def _csv(text: str) -> Iterator[tuple[int, dict[str, Any] | str]]:
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = [c for c in ("scope", "value", "reason") if c not in header]
    if missing:
        raise BanlistError("header", f"the CSV header lacks {', '.join(missing)} "
                           f"(got {', '.join(header) or 'nothing'})")
    for row in reader:
        if None in row:
            yield reader.line_num, "more fields than the header names"
            continue
        yield reader.line_num, {k: v for k, v in row.items() if v not in ("", None)}


def _spec(row: dict[str, Any], now: float) -> EntrySpec:
    unknown = sorted(set(row) - set(WRITABLE) - set(IGNORED))
    if unknown:
        raise BanlistError(unknown[0], "unknown field")
    for name in ("scope", "value", "reason"):
        if not isinstance(row.get(name), str) or not row[name].strip():
            raise BanlistError(name, "required (a non-empty string)")
    regions = row.get("regions") or ()
    if isinstance(regions, str):
        regions = regions.replace(";", " ").split()
    if not isinstance(regions, list | tuple) or not all(isinstance(r, str) for r in regions):
        raise BanlistError("regions", "a list of region codes")
    ttl, expires = row.get("ttl_seconds"), row.get("expires_at")
    try:
        seconds = None if ttl is None else float(ttl)
    except (TypeError, ValueError):
        raise BanlistError("ttl_seconds", f"not a number: {ttl!r}") from None
    try:
        at = None if expires is None else parse_iso(str(expires))
    except ValueError:
        raise BanlistError("expires_at", f"not an ISO 8601 time: {expires!r}") from None
    expires_at = expiry(seconds, at, now)
    return EntrySpec(row["scope"], row["value"], row["reason"], tuple(regions), expires_at)


def export(entries: Iterable[Entry], fmt: str) -> Iterator[bytes]:
    """Entries as NDJSON lines or CSV rows (a header first), ready to stream."""
    if fmt == "ndjson":
        for e in entries:
            yield orjson.dumps(e.as_dict()) + b"\n"
        return
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(CSV_COLUMNS)
    for n, e in enumerate(entries):
        d = e.as_dict()
        d["regions"] = ";".join(d["regions"])
        out.writerow(["" if d[c] is None else d[c] for c in CSV_COLUMNS])
        if n % 1000 == 999:
            yield buf.getvalue().encode()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue().encode()
