"""The Redis client as the stores use it: made with `decode_responses=True`, so every reply
is text, from a plain `redis://` URL or from a Sentinel-managed one (`redis+sentinel://`,
CONTRACT.md), whose client asks the Sentinels for the primary on every (re)connect and so
follows a failover by itself (redis-py's Sentinel).

redis-py's annotations are written for either setting (`bytes | str`), and type a
pipeline's buffered command as its reply; `TextRedis` and `TextPipeline` declare the
commands called here with the replies this client gives, and `connect` is the one place
that says a client is one of them.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, cast
from urllib.parse import parse_qsl, unquote, urlsplit

import redis
from redis.commands.core import Script
from redis.sentinel import Sentinel, SentinelConnectionPool

# A stream record: (id, fields).
Record = tuple[str, dict[str, str]]


class TextCommands(Protocol):
    """The commands the stores, the sanction states and the config replica call."""

    def get(self, name: str) -> str | None: ...

    def incr(self, name: str) -> int: ...

    def hdel(self, name: str, *keys: str) -> int: ...

    def execute_command(self, *args: Any) -> Any: ...

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

    def rpush(self, name: str, *values: str) -> int: ...

    def lrange(self, name: str, start: int, end: int) -> list[str]: ...

    def llen(self, name: str) -> int: ...

    def xadd(self, name: str, fields: Mapping[str, str], id: str = "*",
             maxlen: int | None = None, approximate: bool = True) -> str: ...

    def xlen(self, name: str) -> int: ...

    def xrange(self, name: str, min: str = "-", max: str = "+",
               count: int | None = None) -> list[Record]: ...

    def xrevrange(self, name: str, max: str = "+", min: str = "-",
                  count: int | None = None) -> list[Record]: ...

    def xread(self, streams: Mapping[str, str], count: int | None = None,
              block: int | None = None) -> list[tuple[str, list[Record]]]: ...

    def zrevrangebyscore(self, name: str, max: float | str, min: float | str,
                         start: int | None = None, num: int | None = None,
                         withscores: bool = False) -> list[Any]: ...

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


# What a blocking command (XREAD BLOCK, WAIT) leaves of the socket timeout for its reply
# to come back: Settings refuses a block or a wait closer to the timeout than this
REPLY_MARGIN = 0.5


def reach(client: TextRedis) -> None:
    """PING Redis on a connection of the client's pool and give it back, so that an
    unreachable Redis is known before a write is sent: a write refused here was certainly
    never made.

    Taking a connection is not enough: the pool connects a new one or reconnects one Redis
    closed, but a connection idle in the pool across a network partition looks open (no
    RST ever came), and a write sent on it goes into the void, its outcome unknown. The
    PING fails on it within the socket timeout instead. The write then gets the same
    connection back: the pool hands out the one returned last."""
    pool = client.connection_pool
    connection = pool.get_connection()
    try:
        connection.send_command("PING")
        connection.read_response()  # an error drops the connection (redis-py does)
    finally:
        pool.release(connection)


SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_PORT = 26379
SENTINEL_OPTIONS = ("sentinel_username", "sentinel_password")  # what the query may set


@dataclass(frozen=True)
class SentinelURL:
    """`redis+sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…]/SERVICE[/DB]`, read.

    USER and PASSWORD are the data nodes' (the primary's and its replicas'); Sentinels
    that need a password of their own take `?sentinel_password=…` (and
    `sentinel_username`), since most deployments leave the Sentinels open on a private
    network and an AUTH that a Sentinel does not expect is refused."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None

    @classmethod
    def parse(cls, url: str) -> SentinelURL:
        """The URL's parts; ValueError saying what is wrong with it."""
        parts = urlsplit(url)
        if parts.scheme != SENTINEL_SCHEME:
            raise ValueError(f"not a {SENTINEL_SCHEME}:// URL")
        auth, at, hosts = parts.netloc.rpartition("@")
        user, _, password = auth.partition(":") if at else ("", "", "")
        sentinels = tuple(_host_port(h) for h in hosts.split(","))
        path = [p for p in parts.path.split("/") if p]
        if not path:
            raise ValueError("names no service: redis+sentinel://HOST:PORT[,…]/SERVICE[/DB]")
        if len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
            raise ValueError(f"path {parts.path!r} is not /SERVICE or /SERVICE/DB (a number)")
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        unknown = sorted(set(query) - set(SENTINEL_OPTIONS))
        if unknown:
            raise ValueError(f"unknown option {unknown[0]!r} (known: "
                             f"{', '.join(SENTINEL_OPTIONS)})")
        return cls(sentinels, unquote(path[0]), int(path[1]) if len(path) == 2 else 0,
                   unquote(user) or None, unquote(password) or None,
                   query.get("sentinel_username") or None,
                   query.get("sentinel_password") or None)


def _host_port(text: str) -> tuple[str, int]:
    """One `HOST[:PORT]` of the Sentinels' list (an IPv6 host in brackets)."""
    if not text:
        raise ValueError("an empty Sentinel address in the list")
    host, port = text, str(SENTINEL_PORT)
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"Sentinel address {text!r} is not [HOST]:PORT")
            port = rest[1:]
    elif ":" in text:
        host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"Sentinel address {text!r} is not HOST:PORT (a port 1 to 65535)")
    return host, int(port)


def check_url(url: str) -> None:
    """ValueError when `url` is neither a Redis URL redis-py reads nor a Sentinel one."""
    if url.startswith(f"{SENTINEL_SCHEME}:"):
        SentinelURL.parse(url)
    else:
        redis.ConnectionPool.from_url(url)  # parses only: nothing is connected yet


def connect(url: str, **options: Any) -> TextRedis:
    """A client of the Redis at `url` whose replies are text (`options`: redis-py's).

    A `redis+sentinel://` URL gives a client of the service's current primary: each new
    connection asks the Sentinels where it is, and a connection to a primary since
    demoted is dropped on its first refused write (redis-py's SentinelManagedConnection),
    or by `Role.check` on the next replication round, whichever comes first."""
    if not url.startswith(f"{SENTINEL_SCHEME}:"):
        return cast(TextRedis, redis.Redis.from_url(url, decode_responses=True, **options))
    target = SentinelURL.parse(url)
    timeouts = {k: v for k, v in options.items() if k.startswith("socket_")}
    manager = Sentinel(list(target.sentinels), sentinel_kwargs={
        **timeouts, "username": target.sentinel_username,
        "password": target.sentinel_password})
    return cast(TextRedis, manager.master_for(
        target.service, db=target.db, username=target.username, password=target.password,
        decode_responses=True, **options))


def sentinel_pool(client: TextRedis) -> SentinelConnectionPool | None:
    """The client's Sentinel-managed pool (None: a plain URL's client)."""
    pool = client.connection_pool
    return pool if isinstance(pool, SentinelConnectionPool) else None


def where(client: TextRedis) -> str:
    """The address this client's commands go to, for logs: `host:port`, and the
    service's name with Sentinel."""
    pool = client.connection_pool
    if isinstance(pool, SentinelConnectionPool):
        address = pool.master_address
        at = f"{address[0]}:{address[1]}" if address else "not found yet"
        return f"the primary of {pool.service_name} ({at})"
    kwargs = pool.connection_kwargs
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"


def check_primary(client: TextRedis, role: list[Any]) -> None:
    """ConnectionError when the Redis that answered ROLE is not a primary: one demoted by a
    failover while a plain URL still names it, or a Sentinel-managed connection that has
    not noticed yet (its pool is dropped, so the next connection asks the Sentinels)."""
    if role and role[0] == "master":
        return
    pool = sentinel_pool(client)
    if pool is not None:
        pool.disconnect()
    upstream = f"{role[1]}:{role[2]}" if len(role) > 2 and role[0] == "slave" else "unknown"
    raise redis.ConnectionError(
        f"{where(client)} is a {role[0] if role else 'Redis of no role'} (its primary: "
        f"{upstream}), not the primary: writes there are refused and it may lag. Point "
        "REDIS_URL at the primary, or name the Sentinels (redis+sentinel://…) to follow "
        "every failover")
