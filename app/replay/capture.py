"""Request capture: a sample of whole /v1/rerank bodies to JSON lines, for `rearrange replay`.

The request path only draws the sample and queues the body's bytes; a writer thread
encodes each line, writes it and rotates the file. A full queue, a body over the size cap,
a body that is not JSON or a failed write drops the line: counted in
`rearrange_capture_dropped_total{reason}` and logged once per reason. Only the body is
kept: no header (so no `Authorization` token and no QA override) is ever written, and a
request whose variants were forced by the QA header is not sampled at all.
"""
from __future__ import annotations

import logging
import os
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger(__name__)

FORMAT = 1  # the `capture` field of every line: bump on an incompatible change


@dataclass(frozen=True, slots=True)
class CaptureSettings:
    """Where and how much to capture (Settings.capture_*)."""

    path: Path
    rate: float = 0.01  # the share of requests captured
    max_body_bytes: int = 1 << 20  # a larger body is dropped (too_large)
    max_file_bytes: int = 64 << 20  # rotate the file before it would pass this
    keep: int = 4  # rotated files kept beside it: FILE.1 (newest) .. FILE.keep
    queue: int = 1000  # bodies waiting for the writer; past it they are dropped


def recent(pattern: Path, limit: int, block: int = 1 << 16) -> list[dict[str, Any]]:
    """The newest `limit` captured lines of every worker's current file (`{pid}` in the
    path matches any), newest first; read from each file's end, not the whole file. A line
    that is not a capture (cut by a crash) is skipped."""
    files = sorted(pattern.parent.glob(pattern.name.replace("{pid}", "*")))
    lines: list[dict[str, Any]] = []
    for path in files:
        try:
            with path.open("rb") as f:
                end = f.seek(0, os.SEEK_END)
                at, tail = end, b""
                while at > 0 and tail.count(b"\n") <= limit:
                    at = max(0, at - block)
                    f.seek(at)
                    tail = f.read(min(block, end - at)) + tail
                    end = at
        except OSError as exc:
            log.warning("capture %s: cannot read it for the inspector: %s", path,
                        exc.strerror or exc)
            continue
        for raw in tail.splitlines()[-limit:]:
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(line, dict) and line.get("capture") == FORMAT:
                lines.append(line)
    lines.sort(key=lambda line: line.get("ts", 0), reverse=True)
    return lines[:limit]


def capture_settings(settings: Any) -> CaptureSettings:
    """The capture's part of the service's Settings (its path set)."""
    return CaptureSettings(settings.capture_path, settings.capture_rate,
                           settings.capture_max_body_bytes, settings.capture_max_file_bytes,
                           settings.capture_keep, settings.capture_queue)


Item = tuple[float, int, str, int, bytes]  # ts, status, config_version, banlist_version, body


class Capture:
    """A sampled, bounded, off-path writer of captured requests."""

    def __init__(self, settings: CaptureSettings, on_drop: Callable[[str], None],
                 on_write: Callable[[], None] = lambda: None,
                 draw: Callable[[], float] = random.random) -> None:
        self.settings = settings
        self.path = Path(str(settings.path).replace("{pid}", str(os.getpid())))
        self._on_drop = on_drop
        self._on_write = on_write
        self._draw = draw
        self._queue: queue.Queue[Item | None] = queue.Queue(maxsize=settings.queue)
        self._logged: set[str] = set()
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._size = self.path.stat().st_size if self.path.exists() else 0
        self._thread = threading.Thread(target=self._drain, name="capture", daemon=True)
        self._thread.start()

    def offer(self, body: bytes | bytearray, status: int, config_version: str,
              banlist_version: int) -> None:
        """Called per request after the engine answered: queue the body if it is drawn."""
        if self._draw() >= self.settings.rate:
            return
        self.keep(body, status, config_version, banlist_version, time.time())

    def keep(self, body: bytes | bytearray, status: int, config_version: str,
             banlist_version: int, at: float) -> None:
        """Queue a body already drawn (the data port's listener draws at `settings.rate`
        itself, so that only the kept bodies cross to Python), answered at `at`."""
        if len(body) > self.settings.max_body_bytes:
            self._drop("too_large", f"a body of {len(body)} bytes is over the cap of "
                       f"{self.settings.max_body_bytes}")
            return
        try:
            self._queue.put_nowait((at, status, config_version, banlist_version, bytes(body)))
        except queue.Full:
            self._drop("queue_full", f"the writer is {self.settings.queue} bodies behind")

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (within `timeout`) and stop the writer."""
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            self._drop("queue_full", "the writer did not take the last bodies at close")
            return
        self._thread.join(timeout)

    def _drop(self, reason: str, why: str) -> None:
        self._on_drop(reason)
        with self._lock:
            first = reason not in self._logged
            self._logged.add(reason)
        if first:  # once per reason and process: the metric counts the rest
            log.warning("capture %s: dropping a request (%s): %s; further drops are only "
                        "counted in rearrange_capture_dropped_total{reason=%r}",
                        self.path, reason, why, reason)

    def _drain(self) -> None:
        while (item := self._queue.get()) is not None:
            line = self._line(item)
            if line is not None:
                self._write(line)

    def _line(self, item: Item) -> bytes | None:
        ts, status, config_version, banlist_version, body = item
        try:
            request = orjson.loads(body)  # re-encoded: a pretty-printed body is one line too
        except orjson.JSONDecodeError as exc:
            self._drop("not_json", f"orjson cannot read it: {exc}")
            return None
        return orjson.dumps({"capture": FORMAT, "ts": ts, "status": status,
                             "config_version": config_version,
                             "banlist_version": banlist_version, "request": request}) + b"\n"

    def _write(self, line: bytes) -> None:
        try:
            if self._size and self._size + len(line) > self.settings.max_file_bytes:
                self._rotate()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as exc:
            self._drop("write_failed", f"{exc.strerror or exc}")
            return
        self._size += len(line)
        self._on_write()

    def _rotate(self) -> None:
        """FILE → FILE.1 → … → FILE.keep; the oldest goes."""
        keep = self.settings.keep
        if keep == 0:
            self.path.unlink(missing_ok=True)
        else:
            for n in range(keep, 0, -1):
                older = self.path.with_name(f"{self.path.name}.{n}")
                newer = self.path if n == 1 else self.path.with_name(f"{self.path.name}.{n - 1}")
                if newer.exists():
                    newer.replace(older)
        self._size = 0
