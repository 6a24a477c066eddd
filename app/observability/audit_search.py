"""`rearrange audit search`: which requests and rules removed or demoted a site, read from
the audit log (REARRANGE_AUDIT_LOG) and its rotated files.

Each line of the log is one request; each of its audit records names the document's `url`
and canonical `host`. A line is parsed only when its bytes hold the host searched for (and
its `ts`, read off the line's start, is in the time range), so a search reads a large log
at the speed of the disk rather than of the JSON parser.
"""
from __future__ import annotations

import gzip
import io
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from app.banlist import canon
from app.banlist.model import iso

# logrotate's names for the files it rotated out: `audit.jsonl.1`, `audit.jsonl.2.gz`,
# `audit.jsonl-20250301`, `audit.jsonl-20250301.gz`
_ROTATED = re.compile(r"(?:\.\d+|-\d{8,10})(?:\.gz)?")

Progress = Callable[[str, int, int], None]


def log_files(path: Path) -> list[Path]:
    """The log and the files rotated out of it beside it, oldest first (by modification
    time; the live log last). A `.gz` file is read through gzip."""
    rotated = [p for p in path.parent.glob(path.name + "*")
               if p != path and _ROTATED.fullmatch(p.name[len(path.name):])]
    rotated.sort(key=lambda p: (p.stat().st_mtime, p.name))
    return [*rotated, path] if path.exists() else rotated


def host_of(text: str) -> str:
    """The canonical host of a host name or URL as a T&S person writes it (`Example.COM`,
    `https://www.example.com/x`); ValueError when it has none."""
    url = text.strip() if "://" in text else f"http://{text.strip()}/"
    try:
        return canon.canonicalize_with_host(url)[1]
    except canon.InvalidURL as exc:
        raise ValueError(f"{text[:80]!r} is not a host name or URL: {exc}") from None


def canonical_url(text: str) -> str:
    """The canonical form of a URL; ValueError when no browser could open it."""
    try:
        return canon.canonicalize(text)
    except canon.InvalidURL as exc:
        raise ValueError(f"{text[:80]!r} is not a URL: {exc}") from None


@dataclass(frozen=True, slots=True)
class Query:
    """What to look for. `host` matches that host and its subdomains; `url` one canonical
    URL, either scheme (as a `url` ban matches); `since`/`until` are epoch seconds
    (inclusive, exclusive); `rules` empty means any.
    By default only records that hurt the document count (`remove`, `trim`, `collapse`, a
    `rescore` down, a `move` down); `every_action` takes all of them."""

    host: str | None = None
    url: str | None = None
    since: float | None = None
    until: float | None = None
    rules: frozenset[str] = frozenset()
    every_action: bool = False

    def needle(self) -> bytes | None:
        """Bytes every line with a matching record holds (None: any line may)."""
        host = self.host or (canon.split(self.url)[0] if self.url else None)
        return host.encode() if host else None

    def in_time(self, ts: float) -> bool:
        return (self.since is None or ts >= self.since) and (self.until is None
                                                             or ts < self.until)

    def matches(self, record: dict[str, Any]) -> bool:
        host = record.get("host")
        if self.host is not None and not (host == self.host or (
                isinstance(host, str) and host.endswith("." + self.host))):
            return False
        if self.rules and record.get("rule") not in self.rules:
            return False
        if not (self.every_action or hurts(record)):
            return False
        if self.url is not None:
            try:
                return _key(canon.canonicalize(record.get("url") or "")) == _key(self.url)
            except canon.InvalidURL:
                return False
        return record.get("url") is not None


def _key(canonical: str) -> str:
    return canonical.partition("://")[2]


def hurts(record: dict[str, Any]) -> bool:
    """A record that took the document off the page or pushed it down."""
    action, delta = record.get("action"), record.get("delta")
    if action in ("remove", "trim", "collapse"):
        return True
    if action == "rescore":
        return isinstance(delta, int | float) and delta < 0
    if action == "move":
        return isinstance(delta, int | float) and delta > 0
    return False


@dataclass(slots=True)
class Found:
    """What a search read and found: one hit per matching record, with its request."""

    hits: list[dict[str, Any]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    lines: int = 0
    parsed: int = 0
    unreadable: int = 0  # torn by a failed write (docs/operations.md#the-audit-log): skipped
    bytes: int = 0


def search(files: list[Path], query: Query, progress: Progress | None = None) -> Found:
    """Every record of `files` that `query` matches, oldest first."""
    found = Found(files=[str(p) for p in files])
    total = sum(p.stat().st_size for p in files)
    needle = query.needle()
    done = 0
    for path in files:
        for line, at in _lines(path):
            found.lines += 1
            if progress is not None and found.lines % 20_000 == 0:
                progress("reading KiB", (done + at) >> 10, total >> 10)
            if needle is not None and needle not in line:
                continue
            ts = _ts(line)
            if ts is not None and not query.in_time(ts):
                continue
            try:
                request = orjson.loads(line)
            except orjson.JSONDecodeError:
                found.unreadable += 1
                continue
            found.parsed += 1
            if not isinstance(request, dict) or not query.in_time(request.get("ts", 0.0)):
                continue
            for record in request.get("audit") or ():
                if isinstance(record, dict) and query.matches(record):
                    found.hits.append(_hit(request, record))
        done += path.stat().st_size
    if progress is not None:
        progress("reading KiB", total >> 10, total >> 10)
    found.bytes = total
    found.hits.sort(key=lambda h: h["ts"])  # rotated files may overlap in time
    return found


def _lines(path: Path) -> Iterator[tuple[bytes, int]]:
    """(line, bytes of the file read so far) for each line; gzip read through."""
    with path.open("rb") as raw:
        fh: io.BufferedIOBase = gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw
        for line in fh:
            yield line, raw.tell()


def _ts(line: bytes) -> float | None:
    """The `ts` a line starts with (the engine writes it first), without parsing the rest."""
    if not line.startswith(b'{"ts":'):
        return None
    end = line.find(b",", 6)
    try:
        return float(line[6:end])
    except ValueError:
        return None


def _hit(request: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    query = request.get("query") or {}
    ts = request.get("ts", 0.0)
    return {"ts": ts, "at": iso(ts), "request_id": request.get("request_id"),
            "profile": request.get("profile"), "config_version": request.get("config_version"),
            "banlist_version": request.get("banlist_version"),
            "query": query.get("text"), "region": query.get("region"),
            **{k: record.get(k) for k in ("rule", "phase", "action", "mode", "delta",
                                          "reason", "doc_id", "url", "host")}}


def summarize(found: Found) -> dict[str, Any]:
    """Counts by rule and action, requests, time span, and the versions they were served by."""
    hits = found.hits
    applied = [h for h in hits if h["mode"] == "applied"]
    by = Counter((h["rule"], h["action"]) for h in applied)
    shadow = Counter((h["rule"], h["action"]) for h in hits if h["mode"] != "applied")
    return {
        "records": len(hits), "requests": len({h["request_id"] for h in hits}),
        "first": hits[0]["at"] if hits else None, "last": hits[-1]["at"] if hits else None,
        "urls": len({h["url"] for h in hits}),
        "applied": [{"rule": r, "action": a, "records": n} for (r, a), n in by.most_common()],
        "shadow": [{"rule": r, "action": a, "records": n} for (r, a), n in shadow.most_common()],
        "config_versions": dict(Counter(h["config_version"] for h in hits).most_common()),
        "banlist_versions": ([min(h["banlist_version"] for h in hits),
                              max(h["banlist_version"] for h in hits)] if hits else None),
        "read": {"files": found.files, "lines": found.lines, "parsed": found.parsed,
                 "unreadable": found.unreadable, "bytes": found.bytes},
    }
