"""Bulk import and export: NDJSON or CSV, org groups and entries, every line validated,
refusals reported by line."""
from __future__ import annotations

import csv
import io
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from app.banlist.base import EntrySpec, GroupSpec, prepare, require_reason
from app.banlist.bodies import BanIn, GroupIn
from app.banlist.model import SCOPES, Entry, group_domains, group_name
from app.errors import BanlistError, validation_problem
from app.strict_json import RepeatedKey
from app.strict_json import loads as strict_loads

FORMATS = ("ndjson", "csv")
WRITABLE = ("scope", "value", "reason", "regions", "ttl_seconds", "expires_at")
# what an export carries besides: the actor is kept (who banned it; the change log records
# the importing token as the writer), the id and creation time are the new commit's
IGNORED = ("id", "created_at")
ENTRY_FIELDS = (*WRITABLE, "actor", *IGNORED)
MAX_ACTOR = 200
# An org group is a record of its own, `scope` "group": `value` its name, `domains` its
# members (a list, or one string split at ; , and spaces as CSV writes it), `reason`
# optional. An export writes the groups first: an `org` line must come after its group's.
GROUP = "group"
GROUP_FIELDS = ("scope", "value", "domains", "reason", *IGNORED)
GROUP_REASON = "defined by an import"
_SEPARATORS = re.compile(r"[,;\s]+")  # between the domains of a group row's one string
CSV_COLUMNS = ("id", "scope", "value", "reason", "regions", "expires_at", "actor",
               "created_at", "domains")


@dataclass(slots=True)
class Parsed:
    """A body's groups and entries, each with its line number, and what was refused."""

    groups: list[tuple[int, GroupSpec]] = field(default_factory=list)
    specs: list[tuple[int, EntrySpec]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    lines: int = 0  # records read (blank and comment lines are not records)


def parse(body: bytes, fmt: str, now: float, groups: Mapping[str, tuple[str, ...]]) -> Parsed:
    """The groups and entries of a body, validated line by line as the single add and the
    group definition validate them; {line, field, problem} of each refused line.

    An `org` line is checked against `groups` (the store's) and the group records above it.
    A line repeating an earlier one's ban is not refused: the add decides it is `existing`,
    as for a ban that is active already."""
    if fmt not in FORMATS:
        raise BanlistError("format", f"unknown format {fmt!r} (ndjson or csv)")
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BanlistError("body", f"not UTF-8: {exc}") from None
    rows = _ndjson(text) if fmt == "ndjson" else _csv(text)
    out = Parsed()
    known = dict(groups)
    defined: dict[str, tuple[int, GroupSpec]] = {}
    for line, row in rows:
        out.lines += 1
        try:
            if isinstance(row, BanlistError):
                raise row
            if row.get("scope") == GROUP:
                group = _group(row)
                earlier = defined.get(group.name)
                if earlier is not None:
                    if set(earlier[1].domains) != set(group.domains):
                        raise BanlistError("domains", f"group {group.name!r} is defined with "
                                           f"other members on line {earlier[0]}")
                    continue  # the same definition again: nothing more to do
                defined[group.name] = (line, group)
                known[group.name] = group.domains
                out.groups.append((line, group))
                continue
            spec = _spec(row, now)
            prepare(spec, now, known)
        except BanlistError as exc:
            out.refused.append({"line": line, "field": exc.field, "problem": exc.problem})
        else:
            out.specs.append((line, spec))
    return out


def format_of(path: Path, body: bytes) -> str:
    """A file's format: by its extension (.csv; .ndjson, .jsonl, .json), else by its first
    line that is not blank or a comment (an NDJSON record starts with `{`)."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".ndjson", ".jsonl", ".json"):
        return "ndjson"
    for raw in body.decode("utf-8-sig", errors="replace").splitlines():
        if raw.strip() and not raw.lstrip().startswith("#"):
            return "ndjson" if raw.lstrip().startswith("{") else "csv"
    return "ndjson"


def read_file(path: Path, now: float | None = None) -> tuple[list[GroupSpec], list[EntrySpec]]:
    """The groups and entries of a banlist file (an export in either format, an import
    file, the sample's JSON lines), for a seed; BanlistError naming `FILE:LINE` and the
    field of the first line refused."""
    try:
        body = path.read_bytes()
    except OSError as exc:
        raise BanlistError(str(path), f"cannot read: {exc.strerror or exc}") from None
    fmt = format_of(path, body)
    try:
        got = parse(body, fmt, time.time() if now is None else now, {})
    except BanlistError as exc:  # the whole file refused (not UTF-8, not CSV at a line)
        where = exc.extra.get("line")
        if where is None:
            raise BanlistError(str(path), f"{exc.field}: {exc.problem}") from None
        raise BanlistError(f"{path}:{where}", exc.problem.removeprefix(f"line {where}: ")
                           ) from None
    if got.refused:
        first = got.refused[0]
        more = f" ({len(got.refused) - 1} more lines refused)" if len(got.refused) > 1 else ""
        raise BanlistError(f"{path}:{first['line']}", f"{first['field']}: {first['problem']}"
                           f" (read as {fmt}){more}")
    return [g for _, g in got.groups], [s for _, s in got.specs]


def _ndjson(text: str) -> Iterator[tuple[int, dict[str, Any] | BanlistError]]:
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        try:
            item = strict_loads(raw)  # a key given twice is refused, as in any body
        except RepeatedKey as exc:
            yield n, BanlistError(exc.path, "duplicate key")
            continue
        except ValueError as exc:
            yield n, BanlistError("line", f"not JSON: {exc}")
            continue
        yield n, item if isinstance(item, dict) else BanlistError("line", "not a JSON object")


def _csv(text: str) -> Iterator[tuple[int, dict[str, Any] | BanlistError]]:
    reader = csv.DictReader(io.StringIO(text), strict=True)
    try:
        header = reader.fieldnames or []
        missing = [c for c in ("scope", "value", "reason") if c not in header]
        if missing:
            raise BanlistError("header", f"the CSV header lacks {', '.join(missing)} "
                               f"(got {', '.join(header) or 'nothing'})")
        for row in reader:
            if None in row:
                yield reader.line_num, BanlistError("line", "more fields than the header names")
                continue
            fields: dict[str, Any] = {k: v for k, v in row.items() if v not in ("", None)}
            ttl = fields.get("ttl_seconds")
            if isinstance(ttl, str) and ttl.strip().isascii() and ttl.strip().isdigit():
                fields["ttl_seconds"] = int(ttl)  # CSV has only text: a JSON body gives a number
            yield reader.line_num, fields
    except csv.Error as exc:
        # a field past csv's limit (131,072 characters, far above any field's own limit) or
        # a malformed quote: the reader cannot go on, so the whole body is refused, by line
        line = reader.line_num + 1  # the record that failed starts after the last one read
        raise BanlistError("body", f"line {line}: not CSV: {exc} (nothing imported)",
                           extra={"line": line}) from None


def _spec(row: dict[str, Any], now: float) -> EntrySpec:
    """A line as the single add takes it: validated by the same model (BanIn), so every
    limit of `POST /v1/banlist/entries` holds for every line too."""
    unknown = sorted(set(row) - set(ENTRY_FIELDS))
    if unknown:
        raise BanlistError(unknown[0], "unknown field" if unknown[0] != "domains" else
                           "only a group record (scope group) has domains")
    fields = {k: row[k] for k in WRITABLE if k in row}
    if isinstance(fields.get("scope"), str) and fields["scope"].strip():
        scope = fields["scope"]
        if scope not in SCOPES:  # the store's wording, which names the scopes
            raise BanlistError("scope", f"unknown scope {scope!r} "
                               f"(one of {', '.join(SCOPES)}, or {GROUP} for a group record)")
    if isinstance(fields.get("regions"), str):  # CSV, or a string in NDJSON: one item,
        fields["regions"] = [fields["regions"]]  # split at , ; and spaces like the add's
    body = _validated(BanIn, fields)
    return EntrySpec(body.scope, body.value, body.reason, tuple(body.regions),
                     body.expiry(now), _actor(row.get("actor")))


def _group(row: dict[str, Any]) -> GroupSpec:
    """A group record, validated as `PUT /v1/banlist/groups/{name}` validates its body."""
    extra = sorted(set(row) - set(GROUP_FIELDS))
    if extra:
        raise BanlistError(extra[0], "a group record has only value (its name), domains "
                           "and reason")
    if "value" not in row:
        raise BanlistError("value", "a group record names its group in value")
    if not isinstance(row["value"], str):
        raise BanlistError("value", "must be a string")
    domains = row.get("domains")
    if isinstance(domains, str):
        domains = [d for d in _SEPARATORS.split(domains) if d]
    body = _validated(GroupIn, {"domains": domains if domains is not None else [],
                                "reason": row.get("reason", GROUP_REASON)})
    return GroupSpec(group_name(row["value"], "value"), group_domains(body.domains),
                     require_reason(body.reason, "a group definition"))


def _actor(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BanlistError("actor", "must be a non-empty string (who banned it)")
    if len(value) > MAX_ACTOR:
        raise BanlistError("actor", f"{len(value)} characters; at most {MAX_ACTOR}")
    return value.strip()


M = TypeVar("M", bound=BaseModel)


def _validated(model: type[M], fields: dict[str, Any]) -> M:
    """`model` of `fields`, or BanlistError naming the first field refused (`regions[1]`)."""
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}"
                        for part in first["loc"]).lstrip(".") or "line"
        raise BanlistError(where, validation_problem(first)) from None


def export(groups: Mapping[str, tuple[str, ...]], entries: Iterable[Entry],
           fmt: str) -> Iterator[bytes]:
    """The org groups (by name), then the entries, as NDJSON lines or CSV rows (a header
    first), ready to stream: the layout `parse` reads back."""
    named = sorted(groups.items())
    if fmt == "ndjson":
        for name, members in named:
            yield orjson.dumps({"scope": GROUP, "value": name, "domains": list(members)}) + b"\n"
        for e in entries:
            yield orjson.dumps(e.as_dict()) + b"\n"
        return
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(CSV_COLUMNS)
    for name, members in named:
        row = {"scope": GROUP, "value": name, "domains": ";".join(members)}
        out.writerow([row.get(c, "") for c in CSV_COLUMNS])
    for n, e in enumerate(entries):
        d = e.as_dict()
        d["regions"] = ";".join(d["regions"])
        out.writerow(["" if d.get(c) is None else d[c] for c in CSV_COLUMNS])
        if n % 1000 == 999:
            yield buf.getvalue().encode()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue().encode()
