"""The two implementations of a request, side by side: the engine that serves it and the
reference model it replaced (tests/reference/).

A test that takes the `side` fixture (tests/conftest.py) runs once on each, and both must
pass it: what a rule or the runner does is stated once, for both. A side loads a config
(`side.load(yaml)`) and answers request documents with the response as plain JSON values,
so the assertions read the contract's fields and nothing else.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import orjson
import yaml

from app._engine import EngineMetrics
from app.api.errors import status_of
from app.banlist.index import BanIndex
from app.banlist.model import Entry
from app.config.load import load_bytes
from app.config.spec import with_core
from app.errors import FieldError
from tests.helpers import Ticking
from tests.reference import service as reference
from tests.reference.banlist_index import BanIndex as ReferenceIndex
from tests.reference.errors import RuleFailed

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
    """A config loaded by one side: it answers requests and says what its caches hold."""

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
        status, out, _, _ = self.core.rerank(
            _body(documents, request), banlist=None if bans is None else BanIndex(bans),
            quarantine=None if quarantine is None else BanIndex(quarantine), now=now,
            forced=variants, clock=Ticking(),
            budget_seconds=None if deadline_after is None else deadline_after + 0.5)
        return Answer(status, orjson.loads(out))

    def cache_stats(self):
        return [stats[:6] for stats in self.core.cache_stats()]


class ReferenceLoaded(Loaded):
    def __init__(self, config: bytes) -> None:
        self.service = reference.Service(load_bytes(config))

    def rerank(self, documents, *, bans=None, quarantine=None, now=NOW, variants=None,
               deadline_after=None, **request):
        try:
            response = self.service.rerank(
                _body(documents, request),
                banlist=None if bans is None else ReferenceIndex(bans),
                quarantine=None if quarantine is None else ReferenceIndex(quarantine),
                now=now, forced=variants, clock=Ticking(),
                # Ticking reads 0, 1, 2, … (one per check): the read numbered
                # deadline_after is past it.
                deadline=None if deadline_after is None else deadline_after - 0.5)
        except FieldError as exc:
            return Answer(status_of(exc), {"error": "invalid_request", "field": exc.field,
                                       "problem": exc.problem})
        except RuleFailed as exc:
            return Answer(503, {"error": "rule_failed", "rule": exc.rule,
                                "phase": str(exc.phase), "problem": exc.problem})
        return Answer(200, orjson.loads(msgspec.json.encode(response)))

    def cache_stats(self):
        return [(profile, kind, cache.hits, cache.misses, cache.evictions, len(cache))
                for profile, kind, cache in self.service.caches()]


@dataclass(frozen=True)
class Side:
    """One implementation: `load` a config, or `rerank` once on a config of its own."""

    name: str
    loader: type[Loaded]

    def load(self, config: str | bytes) -> Loaded:
        return self.loader(config.encode() if isinstance(config, str) else config)

    def rerank(self, config: str | bytes, documents: Sequence[dict[str, Any]],
               **request: Any) -> Answer:
        return self.load(config).rerank(documents, **request)


SIDES = (Side("engine", EngineLoaded), Side("reference", ReferenceLoaded))
