"""The Redis client as the stores use it: made with `decode_responses=True`, so every reply
is text. redis-py's annotations are written for either setting (`bytes | str`), and type a
pipeline's buffered command as its reply; `TextRedis` and `TextPipeline` declare the
commands called here with the replies this client gives, and `connect` is the one place
that says a client is one of them.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any, Protocol, cast

import redis
from redis.commands.core import Script

# A stream record: (id, fields).
Record = tuple[str, dict[str, str]]


class TextCommands(Protocol):
    """The commands the stores, the sanction states and the config replica call."""

    def get(self, name: str) -> str | None: ...

    def mget(self, keys: str, *args: str) -> list[str | None]: ...

    def set(self, name: str, value: str, *, nx: bool = False,
            px: int | None = None) -> bool | None: ...

    def delete(self, *names: str) -> int: ...

    def exists(self, *names: str) -> int: ...

    def expire(self, name: str, time: int) -> bool: ...

    def time(self) -> tuple[int, int]: ...

    def hget(self, name: str, key: str) -> str | None: ...

    def hgetall(self, name: str) -> dict[str, str]: ...

    def hset(self, name: str, key: str | None = None, value: str | None = None,
             mapping: Mapping[str, str] | None = None) -> int: ...

    def hscan_iter(self, name: str, match: str | None = None,
                   count: int | None = None) -> Iterator[tuple[str, str]]: ...

    def xadd(self, name: str, fields: Mapping[str, str], id: str = "*",
             maxlen: int | None = None, approximate: bool = True) -> str: ...

    def xlen(self, name: str) -> int: ...

    def xrange(self, name: str, min: str = "-", max: str = "+",
               count: int | None = None) -> list[Record]: ...

    def xrevrange(self, name: str, max: str = "+", min: str = "-",
                  count: int | None = None) -> list[Record]: ...

    def xread(self, streams: Mapping[str, str], count: int | None = None,
              block: int | None = None) -> list[tuple[str, list[Record]]]: ...

    def config_get(self, pattern: str = "*") -> dict[str, str]: ...


class TextPipeline(TextCommands, Protocol):
    """A pipeline of a text client. Watching, a command answers at once (its reply as
    typed); after `multi()` it is queued and `execute()` returns the replies."""

    def watch(self, *names: str) -> bool: ...

    def multi(self) -> None: ...

    def execute(self, raise_on_error: bool = True) -> list[Any]: ...

    def __enter__(self) -> TextPipeline: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc_value: BaseException | None,
                 traceback: TracebackType | None) -> None: ...


class TextRedis(TextCommands, Protocol):
    """A client made by `connect`."""

    def pipeline(self, transaction: bool = True) -> TextPipeline: ...

    def register_script(self, script: str) -> Script: ...

    def close(self) -> None: ...

    @property
    def connection_pool(self) -> redis.ConnectionPool: ...


def reach(client: TextRedis) -> None:
    """Take a connection from the client's pool and give it back: the pool connects it now
    (or reconnects one Redis dropped), so that an unreachable Redis is known before a
    command is sent: a write refused here was certainly never made."""
    pool = client.connection_pool
    pool.release(pool.get_connection())


def connect(url: str, **options: Any) -> TextRedis:
    """A client of the Redis at `url` whose replies are text (`options`: redis-py's)."""
    return cast(TextRedis, redis.Redis.from_url(url, decode_responses=True, **options))

