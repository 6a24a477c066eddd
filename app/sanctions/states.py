"""Where host sanction states live: a JSON-lines file (embedded) or a Redis hash."""
from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

import redis

from app.errors import RearrangeError
from app.sanctions.machine import HostState, Transition

T = TypeVar("T")
HISTORY_LIMIT = 500  # transitions kept per host; older ones stay in the banlist change log


class HostStates(Protocol):
    """Read-modify-write of one host's state, atomic against other writers."""

    def get(self, key: str) -> HostState: ...

    def update(self, key: str, change: Callable[[HostState], tuple[HostState, T]]) -> T: ...

    def __iter__(self) -> Iterator[HostState]: ...


def to_dict(state: HostState) -> dict[str, Any]:
    """JSON form of a host state (an infinite pin is written as null + permanent)."""
    permanent = state.pinned_until == float("inf")
    return {
        "key": state.key, "scope": state.scope, "state": state.state, "score": state.score,
        "observed_at": state.observed_at,
        "pinned_until": None if permanent else state.pinned_until, "pinned_forever": permanent,
        "ban_entry_id": state.ban_entry_id, "quarantine_entry_id": state.quarantine_entry_id,
        "history": [t.as_dict() for t in state.history[-HISTORY_LIMIT:]],
    }


def from_dict(data: dict[str, Any]) -> HostState:
    """Inverse of to_dict."""
    pinned = float("inf") if data.get("pinned_forever") else data.get("pinned_until")
    history = tuple(Transition(t["at"], t["from"], t["to"], t["score"], t["actor"], t["reason"])
                    for t in data.get("history", ()))
    return HostState(data["key"], data.get("scope", "host"), data["state"], data.get("score"),
                     data.get("observed_at"), pinned, data.get("ban_entry_id"),
                     data.get("quarantine_entry_id"), history)


class FileStates:
    """Embedded: states in memory, each change appended (fsynced) to a JSON-lines file."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._states: dict[str, HostState] = {}
        self._lock = threading.Lock()
        if path is not None and path.exists():
            lines = path.read_text(encoding="utf-8").splitlines()
            for n, line in enumerate(lines, 1):
                try:
                    state = from_dict(json.loads(line))
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    if n == len(lines):
                        break  # a torn last line: the write was never acknowledged
                    raise RearrangeError(f"{path}:{n}: not a sanction state ({exc})") from exc
                self._states[state.key] = state

    def get(self, key: str) -> HostState:
        return self._states.get(key) or HostState(key)

    def update(self, key: str, change: Callable[[HostState], tuple[HostState, T]]) -> T:
        with self._lock:
            new, result = change(self.get(key))
            if new != self._states.get(key):
                self._write(new)
                self._states[key] = new
            return result

    def __iter__(self) -> Iterator[HostState]:
        return iter(list(self._states.values()))

    def _write(self, state: HostState) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(to_dict(state), ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


class RedisStates:
    """States in one Redis hash; updates are optimistic transactions (WATCH/MULTI) per host."""

    def __init__(self, client: redis.Redis, prefix: str = "rearrange:") -> None:
        self.client = client
        self.key = f"{prefix}{{sanctions}}:hosts"

    def get(self, key: str) -> HostState:
        raw = self.client.hget(self.key, key)
        return from_dict(json.loads(raw)) if raw else HostState(key)

    def update(self, key: str, change: Callable[[HostState], tuple[HostState, T]]) -> T:
        while True:
            with self.client.pipeline() as pipe:
                try:
                    pipe.watch(self.key)
                    raw = pipe.hget(self.key, key)
                    old = from_dict(json.loads(raw)) if raw else HostState(key)
                    new, result = change(old)
                    pipe.multi()
                    if new != old:
                        pipe.hset(self.key, key, json.dumps(to_dict(new), ensure_ascii=False))
                    pipe.execute()
                    return result
                except redis.WatchError:
                    continue  # another writer changed the hash: read again and retry

    def __iter__(self) -> Iterator[HostState]:
        for raw in self.client.hvals(self.key):
            yield from_dict(json.loads(raw))
