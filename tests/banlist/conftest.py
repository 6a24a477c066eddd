"""Fixtures of the Redis-backed banlist tests: a fresh redis-server per test, replicas."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.banlist.redis.store import RedisStore
from app.observability.metrics import Metrics
from tests.redis_server import RedisServer


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A fresh redis-server (append-only on, so a kill loses no acknowledged write)."""
    server = RedisServer(tmp_path / "redis", appendonly=True).start()
    yield server
    server.kill()


@pytest.fixture
def replicas(redis_server: RedisServer, tmp_path: Path) -> Iterator:
    """replica(name) builds and starts a RedisStore with its own metrics and snapshot file."""
    made: list[RedisStore] = []

    def replica(name: str, **kw) -> RedisStore:
        kw.setdefault("block_seconds", 0.3)
        store = RedisStore(redis_server.url, Metrics(), tmp_path / f"{name}.snapshot.json",
                           **kw)
        store.start()
        made.append(store)
        return store

    yield replica
    for store in made:
        store.close()


@pytest.fixture(params=["log file", "memory only"])
def history_store(request, tmp_path: Path):
    """tests/banlist/history_log.written, read from its log file (a byte search of it), or
    from memory (a store without a file keeps the whole history there)."""
    from tests.banlist.history_log import written

    return written(tmp_path / "banlist.jsonl" if request.param == "log file" else None)
