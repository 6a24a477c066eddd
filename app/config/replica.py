"""Config changes through Redis: every replica serves the last change any of them made.

One stream, `<prefix>{config}:versions`, holds the last `HISTORY` changes, each with its
YAML: a replica publishes its own (a file change, a reload, a rollback), and a thread
tails the stream (`XREAD BLOCK`, as the banlist's does) and serves each newer one. The
stream's last record is the config the service serves; a replica started later serves it
too, unless its file holds content the service has not read from a file yet
(`file_version` differs), which is then the newest change and is published.

Redis unreachable: the replica keeps serving its config and makes file changes locally;
the failure is counted and logged once. Back in touch, it joins again: it publishes a
change Redis did not get (or all of it, if Redis came back empty), or serves the newer one
another replica made meanwhile; the file's content wins only if it is new to the service.
"""
from __future__ import annotations

import logging
import os
import socket
from typing import Any, TypeGuard, get_args

import redis

from app.banlist.redis.client import TextRedis, reach
from app.banlist.redis.follower import Follower
from app.config.events import ConfigEvents
from app.config.versions import HISTORY, ConfigHolder, How, Version
from app.errors import ConfigError, Unavailable

log = logging.getLogger(__name__)


def _pos(stream_id: str) -> tuple[int, int]:
    ms, _, n = stream_id.partition("-")
    return int(ms), int(n or 0)


def _fields(v: Version, replica: str) -> dict[str, str]:
    return {"version": v.version, "at": repr(v.loaded_at), "how": v.origin or v.how,
            "by": v.by, "file_version": v.file_version, "text": v.text, "replica": replica}


def _record(f: dict[str, str]) -> Version:
    how = f["how"]
    if not _is_how(how):  # written by a replica of another release: say what it was
        raise ValueError(f"unknown change kind {how!r}")
    return Version(f["version"], float(f["at"]), how, f["by"], f["text"], f["file_version"])


def _is_how(how: str) -> TypeGuard[How]:
    return how in get_args(How)


class ConfigReplica(Follower):
    """Shares this replica's config changes through Redis and serves the others'
    (follower.py runs the rounds)."""

    round_op = "follow"

    def __init__(self, client: TextRedis, prefix: str, holder: ConfigHolder,
                 events: ConfigEvents, block_seconds: float) -> None:
        super().__init__(client, "config", block_seconds, events.config_redis_error)
        self.holder, self.events = holder, events
        self.key = f"{prefix}{{config}}:versions"
        self.replica = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self.last_id = "0-0"  # the stream record of the config served here
        self.unpublished = True  # the config served here is a change Redis has not got
        self.joined = False  # in step with the stream since the last failure

    def start(self) -> None:
        """Join the stream (or serve the file until Redis answers), then follow it."""
        self.holder.sharing = self
        self.follow()

    def close(self) -> None:
        self.halt()

    # ---- Sharing, called under the holder's lock -------------------------------------------
    def publish(self, version: Version, required: bool) -> None:
        try:
            reach(self.client)  # a partition found here leaves no doubt: nothing was sent
        except redis.RedisError as exc:
            self.failed(exc, "publish")
            if required:
                raise Unavailable("redis", f"Redis unreachable ({exc}): the change was not "
                                  "published, and is not served here") from exc
            self.unpublished = True
            return
        try:
            self._xadd(version)
        except redis.RedisError as exc:
            self.failed(exc, "publish")
            if required:
                raise Unavailable("redis", f"Redis did not confirm the change ({exc}): it "
                                  "is not served here; if Redis recorded it anyway, every "
                                  "replica, this one included, serves it within a second "
                                  "(GET /v1/admin/config says what is served)") from exc
            self.unpublished = True

    def find(self, version: str) -> Version | None:
        for _, f in self.client.xrevrange(self.key, count=HISTORY):
            if f.get("version") == version:
                return _record(f)
        return None

    def state(self) -> dict[str, Any]:
        return {"store": "redis", "key": self.key, "connected": self.connected,
                "in_step": self.joined and not self.unpublished, "problem": self.problem}

    # ---- following (follower.py) -----------------------------------------------------------
    def round(self, block: bool) -> None:
        """Check that Redis is the primary; get in step if not yet (or since a failure);
        then serve the newest record past the one served here."""
        self.primary(self.client.execute_command("ROLE"))
        if not self.joined:
            self._join()
            if not block:
                return
        got = self.client.xread({self.key: self.last_id}, count=HISTORY,
                                block=self.block_ms if block else None)
        if got:
            with self.holder.lock:
                newer = [r for r in got[0][1] if _pos(r[0]) > _pos(self.last_id)]
                if newer:
                    self._serve(*newer[-1])
        self.reached()

    def lost_contact(self) -> None:
        self.joined = False  # back in touch, it joins again: Redis may have lost changes

    def _join(self) -> None:
        """Get in step with the stream: serve what is newer, or put back what it lacks.

        Redis lost changes (back empty, or rewound): a replica with a change Redis never
        got publishes it; the others put the config they serve back only while nobody else
        has (else they serve that one), so an older config never wins that race.
        """
        with self.holder.lock:  # no publish in between: it would move `last_id`
            for _ in range(3):
                newest = self.client.xrevrange(self.key, count=1)
                seen = newest[0][0] if newest else None
                current = self.holder.current
                if seen is not None and _pos(seen) > _pos(self.last_id):
                    if self.unpublished and current.file_version != newest[0][1].get(
                            "file_version"):
                        self._xadd(current)  # the file here holds what the service has not read
                    else:
                        self._serve(*newest[0])
                elif seen == self.last_id or self.unpublished:
                    if self.unpublished:
                        self._xadd(current)
                elif not self._restore(current, seen):
                    continue  # another replica put its config back first: serve that
                self.joined = True
                break
        self.reached()

    def _restore(self, current: Version, seen: str | None) -> bool:
        """Put the config served here back into a stream that lost it, unless the stream
        moved on since it was read as `seen` (False)."""
        with self.client.pipeline() as pipe:
            pipe.watch(self.key)
            newest = pipe.xrevrange(self.key, count=1)
            if (newest[0][0] if newest else None) != seen:
                return False
            pipe.multi()
            pipe.xadd(self.key, _fields(current, self.replica), maxlen=HISTORY)
            try:
                (self.last_id,) = pipe.execute()
            except redis.WatchError:
                return False
        log.warning("config: Redis lost the config changes; put back the one served here "
                    "(%s)", current.version)
        return True

    def _serve(self, stream_id: str, f: dict[str, str]) -> None:
        """Serve the stream's record (under the holder's lock); one that does not build here
        is refused, logged and counted, and the config in use stays."""
        self.last_id, self.unpublished = stream_id, False
        try:
            record = _record(f)
            self.holder.adopt(record)
        except (KeyError, ValueError) as exc:
            log.error("config: unreadable record %s in %s, ignored: %r", stream_id, self.key,
                      exc)
            self.events.config_loaded("refused")
        except ConfigError as exc:
            log.error("config: refusing version %s (%s by %s on %s), still serving %s: %s",
                      record.version, record.how, record.by, f.get("replica"),
                      self.holder.engine.version, exc)

    def _xadd(self, version: Version) -> None:
        self.last_id = self.client.xadd(self.key, _fields(version, self.replica), maxlen=HISTORY)
        self.unpublished = False

    def failed(self, exc: redis.RedisError, op: str = "follow") -> None:
        if self.connected or self.problem is None:
            log.warning("config: Redis unreachable, serving config %s and making file "
                        "changes here only: %s", self.holder.engine.version, exc)
            # logged here, with what is served: the follower's own line would repeat it
            self.connected, self.problem = False, f"Redis unreachable: {exc}"
        super().failed(exc, op)
