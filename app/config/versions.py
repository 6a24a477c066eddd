"""The config in use and the ones served before it: reload, rollback, a replica's change.

Every change builds a new Engine aside and swaps one reference (a request holds the one it
started with), and is recorded as a `Version`: when, how (`start`, `file`, `reload`,
`rollback`, `replication`), by whom, and its YAML, the last `HISTORY` of them kept.

A reload serves the file only when its content is new: it differs from `file_version`,
what the file held when the config served was decided. So after a rollback, a reload of
the unchanged file (a poll seeing a touched file, `POST /v1/admin/config/reload`, a
ConfigMap re-sync) keeps the rollback, and an edit of the file replaces it.
"""
from __future__ import annotations

import gc
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from app import _engine
from app.banlist.model import iso
from app.config.events import ConfigEvents, NoConfigEvents
from app.config.load import Engine, check_rebucketing, load_bytes, load_file
from app.config.spec import with_core
from app.errors import ConfigError, NotFound

log = logging.getLogger(__name__)
HISTORY = 50  # versions kept, here and in Redis's log of changes
# how a version came to be served
How = Literal["start", "file", "reload", "rollback", "replication"]


@dataclass(frozen=True, slots=True)
class Version:
    """One config this service served: its version, when, how, by whom, and its YAML."""

    version: str
    loaded_at: float  # epoch seconds
    how: How
    by: str  # the token's actor, or `file` / `start`
    text: str  # the YAML, exactly
    file_version: str  # what the file held then (a rollback serves something else)
    origin: str | None = None  # replication: how it was loaded where the change was made

    def as_dict(self) -> dict[str, Any]:
        """The API's shape, without the YAML."""
        out = {"version": self.version, "loaded_at": iso(self.loaded_at), "how": self.how,
               "by": self.by, "file_version": self.file_version}
        if self.origin is not None:
            out["origin"] = self.origin
        return out


class Sharing(Protocol):
    """Where this replica's config changes go and other replicas' come from (Redis)."""

    def publish(self, version: Version, required: bool) -> None:
        """Send a change out; `required` (a rollback): raise if it could not be."""

    def find(self, version: str) -> Version | None:
        """A version some replica served, from the shared log."""

    def state(self) -> dict[str, Any]:
        """Whether changes are being shared now, and why not."""

    def close(self) -> None:
        """Stop following."""


class ConfigHolder:
    """The Engine in use and the history of versions; every change swaps one reference.

    The engines built here all count into `engine_metrics` (app._engine.EngineMetrics, a
    new one by default), so a change keeps the counters; loads and swaps are reported to
    `events` (the service's Metrics). Changes take `lock`: a reload, a rollback and a
    replica's change come from different threads.

    `follow(served)` calls `served` with the Engine in use now and after every swap (the
    native listener serves what this holds).
    """

    _followers: tuple[Callable[[Engine], None], ...] = ()
    _preparers: tuple[Callable[[Engine], None], ...] = ()

    def __init__(self, path: Path, events: ConfigEvents | None = None,
                 engine_metrics: Any = None, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.events: ConfigEvents = events if events is not None else NoConfigEvents()
        self.engine_metrics = (engine_metrics if engine_metrics is not None
                               else _engine.EngineMetrics())
        self.clock = clock
        self.lock = threading.RLock()
        self.sharing: Sharing | None = None  # set by ConfigReplica.start
        self.history: deque[Version] = deque(maxlen=HISTORY)
        self._stamp = self._file_stamp()
        engine = load_file(path)
        self.file_version = engine.version
        self._swap(self._build(engine),
                   Version(engine.version, clock(), "start", "start", engine.text,
                           engine.version))
        self.events.config_version_of(lambda: self.engine.version)  # at scrape time

    @property
    def current(self) -> Version:
        """The version served now."""
        return self.history[0]

    def versions(self) -> list[Version]:
        """The versions served, newest first (a copy: another thread may add one)."""
        return list(self.history)  # one C call under the GIL, not a Python loop over it

    def reload(self, how: How = "file", by: str = "file") -> tuple[bool, str]:
        """Read the file again; (changed, version served). A file whose content is not new
        changes nothing; ConfigError (invalid, or re-bucketing a running experiment) leaves
        the config in use, and is counted as refused."""
        with self.lock:
            self._stamp = self._file_stamp()  # a refused file is reported once, not every poll
            try:
                engine = load_file(self.path)
                changed = engine.version not in (self.file_version, self.engine.version)
                if changed:
                    check_rebucketing(self.engine, engine)
                    built = self._build(engine)
            except ConfigError:
                self._count("refused")
                raise
            if changed:
                self._swap(built, Version(engine.version, self.clock(), how, by, engine.text,
                                          engine.version))
            self.file_version = engine.version
            self._count("changed" if changed else "unchanged")
            if changed and self.sharing is not None:
                self.sharing.publish(self.current, required=False)
            return changed, self.engine.version

    def rollback(self, version: str, by: str) -> tuple[bool, Version]:
        """Serve an earlier version now; (changed, the version served).

        FieldError 404 for a version neither this replica nor the shared log holds;
        ConfigError when it no longer builds or would re-bucket a running experiment.
        With sharing, the change is published before it is served here: a rollback Redis
        did not take is served nowhere.
        """
        with self.lock:
            if version == self.engine.version:
                self._count("unchanged")
                return False, self.current
            held = self.find(version)
            if held is None:
                raise NotFound("version", f"no config version {version!r} is held (GET "
                               "/v1/admin/config/versions lists them)")
            try:
                engine = self._load(held)
                check_rebucketing(self.engine, engine)
                built = self._build(engine)
            except ConfigError:
                self._count("refused")
                raise
            record = Version(version, self.clock(), "rollback", by, held.text,
                             self.file_version)
            if self.sharing is not None:
                self.sharing.publish(record, required=True)
            self._swap(built, record)
            self._count("changed")
            return True, record

    def adopt(self, record: Version) -> bool:
        """Serve a change another replica made (True if it changed what is served here).

        Not checked for re-bucketing: the replica that made it checked it against the same
        config. ConfigError (it does not build here) leaves the config in use.
        """
        with self.lock:
            if record.version == self.engine.version:
                self.file_version = record.file_version
                return False
            try:
                built = self._build(self._load(record))
            except ConfigError:
                self._count("refused")
                raise
            self._swap(built, replace(record, loaded_at=self.clock(), how="replication",
                                      origin=record.origin or record.how))
            self.file_version = record.file_version
            self._count("changed")
            return True

    def find(self, version: str) -> Version | None:
        """The newest record of `version` here, else in the shared log."""
        for held in self.versions():
            if held.version == version:
                return held
        return self.sharing.find(version) if self.sharing is not None else None

    def changed_on_disk(self) -> bool:
        """True when the file's mtime, size or inode moved (a ConfigMap swaps a symlink)."""
        return self._file_stamp() != self._stamp

    def close(self) -> None:
        if self.sharing is not None:
            self.sharing.close()

    def _load(self, record: Version) -> Engine:
        engine = load_bytes(record.text.encode(), source=f"version {record.version}")
        if engine.version != record.version:  # a damaged record in the shared log
            raise ConfigError("version", f"the YAML held for {record.version} is "
                              f"version {engine.version}")
        return engine

    def _build(self, engine: Engine) -> Engine:
        return with_core(engine, self.engine_metrics)

    def follow(self, served: Callable[[Engine], None]) -> None:
        """Call `served` with the Engine in use, now and after each swap."""
        with self.lock:
            self._followers = (*self._followers, served)
            served(self.engine)

    def prepare_with(self, prepare: Callable[[Engine], None]) -> None:
        """Call `prepare` with the Engine in use now, and with each new one before it is
        served (its Python rules' processes started, say)."""
        with self.lock:
            self._preparers = (*self._preparers, prepare)
            prepare(self.engine)

    def _swap(self, engine: Engine, record: Version) -> None:
        for prepare in self._preparers:
            prepare(engine)
        self.engine = engine  # one reference: a request sees the old config or the new one
        for served in self._followers:
            served(engine)
        self.history.appendleft(record)
        self.events.config_served(record.loaded_at)
        gc.freeze()  # the new Engine lives until the next change: keep it out of collections
        log.info("config: now serving %s (%s by %s)", record.version, record.how, record.by)

    def _count(self, result: str) -> None:
        self.events.config_loaded(result)

    def _file_stamp(self) -> tuple[float, int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime, st.st_size, st.st_ino)
