"""Bulk import and export: NDJSON or CSV, every line validated, refusals reported by line."""
from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
from pydantic import ValidationError

from app.banlist.base import EntrySpec, prepare
from app.banlist.model import SCOPES, Entry
from app.contract import BanIn
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
    reader = csv.DictReader(io.StringIO(text), strict=True)
    try:
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
    except csv.Error as exc:
        # a field past csv's limit (131,072 characters, far above any field's own limit) or
        # a malformed quote: the reader cannot go on, so the whole body is refused, by line
        line = reader.line_num + 1  # the record that failed starts after the last one read
        raise BanlistError("body", f"line {line}: not CSV: {exc} (nothing imported)",
                           extra={"line": line}) from None


def _spec(row: dict[str, Any], now: float) -> EntrySpec:
    """A line as the single add takes it: validated by the same model (BanIn), so every
    limit of `POST /v1/banlist/entries` holds for every line too."""
    unknown = sorted(set(row) - set(WRITABLE) - set(IGNORED))
    if unknown:
        raise BanlistError(unknown[0], "unknown field")
    fields = {k: row[k] for k in WRITABLE if k in row}
    if isinstance(fields.get("scope"), str) and fields["scope"].strip():
        scope = fields["scope"]
        if scope not in SCOPES:  # the store's wording, which names the scopes
            raise BanlistError("scope", f"unknown scope {scope!r} "
                               f"(one of {', '.join(SCOPES)})")
    if isinstance(fields.get("regions"), str):  # CSV, or a string in NDJSON: one item,
        fields["regions"] = [fields["regions"]]  # split at , ; and spaces like the add's
    try:
        body = BanIn.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}"
                        for part in first["loc"]).lstrip(".") or "line"
        raise BanlistError(where, first["msg"].removeprefix("Value error, ")) from None
    return EntrySpec(body.scope, body.value, body.reason, tuple(body.regions),
                     body.expiry(now))


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
