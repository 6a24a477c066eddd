"""`rearrange banlist import FILE`: every line validated first (a dry run), then committed
chunk by chunk, and exactly what committed said when it stops."""
from __future__ import annotations

import argparse
import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from app.cli.client import Client, Refused, Unreachable
from app.cli.progress import ProgressBar
from app.cli.tables import table
from app.errors import InputFileError

CHUNK = 1000  # entry lines per import request (the service takes at most 10,000)
Lines = list[tuple[int, str]]  # (line number in the file, one NDJSON line)


def import_file(client: Client, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """0 imported (or valid, with --dry-run), 1 refused lines or a file it cannot read."""
    fmt = args.format or ("csv" if args.file.suffix.lower() == ".csv" else "ndjson")
    lines = _ndjson_lines(args.file, fmt)
    with ProgressBar.of(getattr(args, "progress", None), err) as bar:  # closed on a refusal too
        return _import_lines(client, args, lines, bar, out, err)


def _import_lines(client: Client, args: argparse.Namespace, lines: Lines, bar: ProgressBar,
                  out: IO[str], err: IO[str]) -> int:
    """Validate every line (a dry run), then commit them chunk by chunk."""
    refused: dict[tuple[int, str], dict[str, Any]] = {}
    bar("validate", 0, len(lines))
    for n, (lead, rows) in enumerate(_chunks(lines)):  # a dry run of everything first
        chunk = lead + rows
        got = client.import_lines(_body(chunk), "valid", dry_run=True)
        for r in got["refused"]:  # a group line is in every chunk: reported once
            line = chunk[r["line"] - 1][0]
            refused[line, r["field"]] = {**r, "line": line}
        bar("validate", min((n + 1) * CHUNK, len(lines)), len(lines))
    bar.close()
    if refused:
        table(sorted(refused.values(), key=lambda r: r["line"]), ["line", "field", "problem"],
              err)
    bad = {line for line, _ in refused}
    if refused and args.mode == "all":
        print(f"{len(bad)} of {len(lines)} lines refused; nothing imported "
              "(--mode valid imports the valid lines)", file=err)
        return 1
    if args.dry_run:
        print(f"{len(lines) - len(bad)} of {len(lines)} lines valid (dry run)", file=out)
        return 0
    good = [pair for pair in lines if pair[0] not in bad]
    done, present, groups, version = 0, 0, 0, None
    bar("import", 0, len(good))
    last: int | None = None
    for lead, rows in _chunks(good):
        chunk = lead + rows
        try:
            got = client.import_lines(_body(chunk), "all")
        except (Refused, Unreachable) as exc:  # a timeout or a 2xx cut off: may have committed
            bar.close()
            _stopped(last, rows or lead, done, exc, err)
            raise
        done += got["imported"]
        present += got.get("existing", 0)
        groups += got.get("groups_defined", 0)
        version = got["banlist_version"]
        last = chunk[-1][0]
        bar("import", min(done + present + groups, len(good)), len(good))
    bar.close()
    print(f"imported {done} entries, {present} already present, {len(bad)} refused"
          f"{f', {groups} groups defined' if groups else ''}; banlist version {version}",
          file=out)
    return 0


def _chunks(lines: Lines) -> Iterator[tuple[Lines, Lines]]:
    """(every group line of the file, CHUNK entry lines) per request: a chunk's `org` lines
    may name the groups, and a group already defined identically is a no-op."""
    groups: Lines = []
    entries: Lines = []
    for pair in lines:
        (groups if _is_group(pair[1]) else entries).append(pair)
    if not entries:
        yield groups, []
    for start in range(0, len(entries), CHUNK):
        yield groups, entries[start:start + CHUNK]


def _is_group(line: str) -> bool:
    """A group record (`"scope": "group"`) of an NDJSON line; one that is not JSON is left
    to the service to refuse."""
    if "group" not in line:
        return False
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and record.get("scope") == "group"


def _stopped(last: int | None, chunk: list[tuple[int, str]], done: int, exc: Exception,
             err: IO[str]) -> None:
    """Exactly what a failed import committed: each request is all or nothing."""
    body = exc.body if isinstance(exc, Refused) else {}
    # Only the service's own refusal is a definite "no": a balancer's 502/504 or a bare
    # 500 comes from something that may have passed the request on.
    own = isinstance(exc, Refused) and "error" in body and (
        exc.status < 500 or exc.status == 503)
    if own and body.get("outcome") != "unknown":
        fate = "not imported"
    elif body.get("write_id"):
        fate = (f"unknown (all or nothing): `GET /v1/banlist/writes/{body['write_id']}` "
                "tells whether they committed")
    else:
        fate = "unknown (the service did not answer): compare `history` with the file"
    before = f"file lines up to {last}" if last is not None else "nothing"
    print(f"imported {done} entries ({before}) before the failure; lines "
          f"{chunk[0][0]}-{chunk[-1][0]}: {fate}; later lines were not sent", file=err)


def _ndjson_lines(path: Path, fmt: str) -> Lines:
    """(line number in the file, one NDJSON line) for each entry line; CSV rows converted."""
    text = path.read_text(encoding="utf-8-sig")
    if fmt == "ndjson":
        return [(n, line) for n, line in enumerate(text.splitlines(), 1)
                if line.strip() and not line.lstrip().startswith("#")]
    reader = csv.DictReader(io.StringIO(text), strict=True)
    rows = []
    try:
        for row in reader:
            clean = {k: v for k, v in row.items() if v not in ("", None) and k is not None}
            if None in row:
                clean["csv_extra_columns"] = "more fields than the header names"
            rows.append((reader.line_num, json.dumps(clean)))
    except csv.Error as exc:  # a field past csv's 131,072-character limit, a stray quote
        raise InputFileError(f"{path}: line {reader.line_num + 1}: not CSV: {exc}; "
                          "nothing imported") from None
    return rows


def _body(chunk: list[tuple[int, str]]) -> bytes:
    return ("\n".join(line for _, line in chunk) + "\n").encode()
