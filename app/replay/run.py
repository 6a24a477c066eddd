"""`rearrange replay`: captured requests run offline through two configs, and what changes.

Each side is a config and a banlist built in-process (the engine itself, no service); a
request is answered by both at the same `now`, and `diff` compares the two answers: the
documents removed, added and moved on the page, and the rules whose records differ.
`Report` sums the diffs per host and per rule.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from app import _engine
from app.banlist import bulk
from app.banlist.base import EntrySpec
from app.banlist.canon import InvalidURL, canonicalize_with_host
from app.banlist.embedded.store import EmbeddedStore
from app.config.load import Engine, load_file
from app.config.settings import Settings
from app.config.spec import with_core
from app.errors import BanlistError, InputFileError
from app.replay.capture import FORMAT

PROPOSED = "proposed ban (rearrange replay)"  # the reason of a --ban entry
NO_HOST = "(no host: a URL no browser opens)"


def _unreadable(file: str, line: int, field: str, problem: str) -> InputFileError:
    """A captured line that cannot be replayed: file, line and field named."""
    return InputFileError(f"{file}:{line}: {field}: {problem}" if line else f"{file}: {problem}")


@dataclass(frozen=True, slots=True)
class Captured:
    """One captured request: where it was read and what it was."""

    file: str
    line: int
    ts: float
    body: bytes  # the request body, as JSON


def read_captures(path: Path) -> Iterator[Captured]:
    """The requests of one capture file, in order; InputFileError for the first bad line."""
    name = str(path)
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise _unreadable(name, 0, "file", f"cannot read: {exc.strerror}") from None
    with fh:
        for n, raw in enumerate(fh, 1):
            if raw.strip():
                yield _captured(name, n, raw)


def _captured(name: str, n: int, raw: bytes) -> Captured:
    try:
        item = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _unreadable(name, n, "line", f"not JSON: {exc}") from None
    if not isinstance(item, dict):
        raise _unreadable(name, n, "line", "not a JSON object")
    if item.get("capture") != FORMAT:
        raise _unreadable(name, n, "capture", f"expected {FORMAT} (a line of a "
                               f"REARRANGE_CAPTURE_PATH file), got {item.get('capture')!r}")
    ts = item.get("ts")
    if not isinstance(ts, int | float) or isinstance(ts, bool):
        raise _unreadable(name, n, "ts", f"expected a number, got {ts!r}")
    request = item.get("request")
    if not isinstance(request, dict):
        raise _unreadable(name, n, "request", "expected the request body, a JSON object")
    return Captured(name, n, float(ts), orjson.dumps(request))


def parse_ban(text: str) -> EntrySpec:
    """`SCOPE VALUE [REGION,…]` (as `--ban 'domain example.com'`) → a proposed entry;
    ValueError naming the problem (the store checks scope and value)."""
    parts = text.split()
    if len(parts) not in (2, 3):
        raise ValueError(f"--ban {text!r}: expected 'SCOPE VALUE [REGION,...]', such as "
                         "'domain example.com'")
    regions = tuple(parts[2].split(",")) if len(parts) == 3 else ()
    return EntrySpec(parts[0], parts[1], PROPOSED, regions)


@dataclass
class Side:
    """A config and a banlist, answering requests as the service would (no quarantine)."""

    config: Engine
    store: EmbeddedStore
    limits: Settings

    @classmethod
    def build(cls, config: Path, banlist: Path | None, bans: Sequence[EntrySpec] = (),
              limits: Settings | None = None, served: Collection[str] | None = None) -> Side:
        """ConfigError or BanlistError naming the place of a problem. `served`: for the
        candidate, the plugin modules the served side loaded, the only ones it may name."""
        engine = with_core(load_file(config, served), _engine.EngineMetrics())
        store = EmbeddedStore(None)
        if banlist is not None:
            groups, specs = bulk.read_file(banlist)
            store.seed(specs, groups=groups)
        for spec in bans:
            try:
                store.add(spec, "replay")
            except BanlistError as exc:
                raise BanlistError(f"--ban {spec.scope} {spec.value}",
                                   f"{exc.field}: {exc.problem}") from None
        return cls(engine, store, limits or Settings())

    def answer(self, body: bytes, now: float) -> tuple[int, dict[str, Any]]:
        """(status, response) for one body, the deadline off: replay is not timed."""
        status, out, _, _, _ = self.config.core.rerank(
            body, banlist=self.store.index, quarantine=None, now=now, budget_seconds=None,
            forced=None, forced_by=None, max_documents=self.limits.max_documents,
            max_text_chars=self.limits.max_text_chars, elapsed=0.0,
            audit_line=False)
        return status, orjson.loads(out)


def host(url: str) -> str:
    """The host a ban would match (the canonical one)."""
    try:
        return canonicalize_with_host(url)[1]
    except InvalidURL:
        return NO_HOST


RuleKey = tuple[str, str, str, str]  # rule, phase, action, mode


@dataclass
class Diff:
    """What the candidate changes on one request."""

    status: tuple[int, int]
    profile: tuple[str | None, str | None]
    removed: list[dict[str, Any]] = field(default_factory=list)  # on the served page only
    added: list[dict[str, Any]] = field(default_factory=list)  # on the candidate's only
    moved: list[dict[str, Any]] = field(default_factory=list)  # on both, elsewhere
    rules: list[dict[str, Any]] = field(default_factory=list)  # records that differ

    @property
    def changed(self) -> bool:
        return (self.status[0] != self.status[1] or self.profile[0] != self.profile[1]
                or bool(self.removed or self.added or self.moved or self.rules))

    def as_dict(self) -> dict[str, Any]:
        return {"status": {"served": self.status[0], "candidate": self.status[1]},
                "profile": {"served": self.profile[0], "candidate": self.profile[1]},
                "removed": self.removed, "added": self.added, "moved": self.moved,
                "rules": self.rules}


def _page(status: int, response: dict[str, Any]) -> list[dict[str, Any]]:
    return response.get("documents", []) if status == 200 else []


def _records(status: int, response: dict[str, Any]) -> dict[RuleKey, Counter[str | None]]:
    """The docs each (rule, phase, action, mode) has records about, with multiplicity."""
    out: dict[RuleKey, Counter[str | None]] = defaultdict(Counter)
    for r in response.get("audit", []) if status == 200 else []:
        out[(r["rule"], r["phase"], r["action"], r["mode"])][r["doc_id"]] += 1
    return out


def diff(served: tuple[int, dict[str, Any]], candidate: tuple[int, dict[str, Any]]) -> Diff:
    """What changes from the served answer to the candidate's (status, response) pair."""
    (s_status, s), (c_status, c) = served, candidate
    out = Diff((s_status, c_status), (s.get("profile"), c.get("profile")))
    before = {d["id"]: d for d in _page(s_status, s)}
    after = {d["id"]: d for d in _page(c_status, c)}
    for doc_id, d in before.items():
        if doc_id not in after:
            out.removed.append({"id": doc_id, "url": d["url"], "host": host(d["url"]),
                                "position": d["position"]})
        elif after[doc_id]["position"] != d["position"]:
            out.moved.append({"id": doc_id, "url": d["url"], "from": d["position"],
                              "to": after[doc_id]["position"]})
    out.added = [{"id": doc_id, "url": d["url"], "host": host(d["url"]),
                  "position": d["position"]} for doc_id, d in after.items()
                 if doc_id not in before]
    was, now = _records(s_status, s), _records(c_status, c)
    for key in sorted(was.keys() | now.keys()):
        if was.get(key) != now.get(key):
            rule, phase, action, mode = key
            out.rules.append({"rule": rule, "phase": phase, "action": action, "mode": mode,
                              "served": sum(was.get(key, Counter()).values()),
                              "candidate": sum(now.get(key, Counter()).values())})
    return out


@dataclass
class Report:
    """The diffs of a replay, summed per host and per rule."""

    requests: int = 0
    changed: list[tuple[Captured, str, Diff]] = field(default_factory=list)  # and query text
    hosts: dict[str, list[int]] = field(default_factory=dict)  # → [lost, gained, requests]
    rules: dict[RuleKey, list[int]] = field(default_factory=dict)  # → [served, cand., reqs]

    def add(self, captured: Captured, query: str, d: Diff) -> None:
        """Count one request's diff."""
        self.requests += 1
        if not d.changed:
            return
        self.changed.append((captured, query, d))
        touched: set[str] = set()
        for doc, column in [(x, 0) for x in d.removed] + [(x, 1) for x in d.added]:
            row = self.hosts.setdefault(doc["host"], [0, 0, 0])
            row[column] += 1
            touched.add(doc["host"])
        for h in touched:
            self.hosts[h][2] += 1
        for r in d.rules:
            row = self.rules.setdefault((r["rule"], r["phase"], r["action"], r["mode"]),
                                        [0, 0, 0])
            row[0] += r["served"]
            row[1] += r["candidate"]
            row[2] += 1

    def totals(self) -> dict[str, int]:
        """The summary line's counts."""
        diffs = [d for _, _, d in self.changed]
        return {"requests": self.requests, "changed": len(diffs),
                "removed": sum(len(d.removed) for d in diffs),
                "added": sum(len(d.added) for d in diffs),
                "moved": sum(len(d.moved) for d in diffs),
                "status_changed": sum(d.status[0] != d.status[1] for d in diffs)}

    def host_rows(self) -> list[dict[str, Any]]:
        """Hosts by results lost, then gained."""
        rows = [{"host": h, "lost": v[0], "gained": v[1], "requests": v[2]}
                for h, v in self.hosts.items()]
        return sorted(rows, key=lambda r: (-r["lost"], -r["gained"], r["host"]))

    def rule_rows(self) -> list[dict[str, Any]]:
        """Rules by the requests where their records differ."""
        rows = [{"rule": k[0], "phase": k[1], "action": k[2], "mode": k[3], "served": v[0],
                 "candidate": v[1], "requests": v[2]} for k, v in self.rules.items()]
        return sorted(rows, key=lambda r: (-r["requests"], r["rule"], r["action"]))

    def as_dict(self) -> dict[str, Any]:
        """The whole report, as `--json` prints it."""
        return {"summary": self.totals(), "hosts": self.host_rows(), "rules": self.rule_rows(),
                "requests": [{"file": c.file, "line": c.line, "query": q, **d.as_dict()}
                             for c, q, d in self.changed]}
