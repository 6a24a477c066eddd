"""A request answered by the engine, for tests that state what a rule or the runner does.

A test takes the `side` fixture (tests/conftest.py): it loads a config (`side.load(yaml)`)
and answers request documents with the response as plain JSON values, so the assertions
read the contract's fields and nothing else. The expected values are written in the tests,
worked from the seeds' formulas.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import yaml

from app._engine import EngineMetrics
from app.banlist.index import BanIndex
from app.banlist.model import Entry
from app.config.load import load_bytes
from app.config.spec import with_core
from tests.helpers import Ticking

NOW = 1_900_000_000.0


def document(id: str, score: float = 1.0, host: str | None = None,
             **fields: Any) -> dict[str, Any]:
    """A request document with a URL on `host` (default `<id>.example`)."""
    host = host or f"{id}.example"
    return {"id": id, "url": fields.pop("url", f"https://{host}/{id}"), "score": score,
            **fields}


def only(phase: str, *steps: Any) -> str:
    """A config whose default profile runs `steps` (a rule name, or {name: params}) in
    `phase` and nothing else."""
    return yaml.safe_dump({"profiles": {"default": {phase: list(steps)}}}, sort_keys=False)


@dataclass
class Answer:
    """A response: the status and the body as JSON values."""

    status: int
    body: dict[str, Any]

    @property
    def documents(self) -> list[dict[str, Any]]:
        assert self.status == 200, self.body
        return self.body["documents"]

    def ids(self) -> list[str]:
        return [d["id"] for d in self.documents]

    def scores(self) -> list[float]:
        return [d["score"] for d in self.documents]

    def records(self, rule: str | None = None) -> list[dict[str, Any]]:
        """The audit records, of `rule` only if given."""
        assert self.status == 200, self.body
        return [r for r in self.body["audit"] if rule is None or r["rule"] == rule]


class Loaded:
    """A config loaded by the engine: it answers requests and says what its caches hold."""

    def rerank(self, documents: Sequence[dict[str, Any]], *, bans: Sequence[Entry] | None = None,
               quarantine: Sequence[Entry] | None = None, now: float = NOW,
               variants: dict[str, str] | None = None, deadline_after: int | None = None,
               **request: Any) -> Answer:
        """Answer a body of `documents` and `request`'s other fields (query, depth, unit,
        profile). `variants` forces experiments' variants (the QA header); the deadline
        passes after `deadline_after` readings of a clock a second later at each (the
        deadline checks; None: no deadline)."""
        raise NotImplementedError

    def cache_stats(self) -> list[tuple[str, str, int, int, int, int]]:
        """(profile, signature | shingle, hits, misses, evictions, entries) of every
        near_duplicates cache, in Engine.cache_stats' order."""
        raise NotImplementedError


def _body(documents: Sequence[dict[str, Any]], request: dict[str, Any]) -> bytes:
    return orjson.dumps({"request_id": "side", "documents": list(documents), **request})


class EngineLoaded(Loaded):
    def __init__(self, config: bytes) -> None:
        self.core = with_core(load_bytes(config), EngineMetrics()).core

    def rerank(self, documents, *, bans=None, quarantine=None, now=NOW, variants=None,
               deadline_after=None, **request):
        # The engine reads the clock (0) to place the deadline, then once per check (1, 2, …)
        status, out, _, _, _ = self.core.rerank(
            _body(documents, request), banlist=None if bans is None else BanIndex(bans),
            quarantine=None if quarantine is None else BanIndex(quarantine), now=now,
            forced=variants, clock=Ticking(),
            budget_seconds=None if deadline_after is None else deadline_after + 0.5)
        return Answer(status, orjson.loads(out))

    def cache_stats(self):
        return [stats[:6] for stats in self.core.cache_stats()]


@dataclass(frozen=True)
class Side:
    """The engine: `load` a config, or `rerank` once on a config of its own."""

    name: str
    loader: type[Loaded]

    def load(self, config: str | bytes) -> Loaded:
        return self.loader(config.encode() if isinstance(config, str) else config)

    def rerank(self, config: str | bytes, documents: Sequence[dict[str, Any]],
               **request: Any) -> Answer:
        return self.load(config).rerank(documents, **request)


SIDES = (Side("engine", EngineLoaded),)
