"""The append-only JSON-lines audit log, written off the request path."""
from __future__ import annotations

import logging
import queue
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

import msgspec

log = logging.getLogger(__name__)


class AuditLog:
    """A bounded queue drained by one writer thread; a full queue drops and counts, never blocks."""

    def __init__(self, target: str, on_drop: Callable[[], None], maxsize: int = 10_000) -> None:
        self.target = target
        self._on_drop = on_drop
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=maxsize)
        self._encode = msgspec.json.Encoder().encode  # records are msgspec Structs
        self._fh: IO[bytes] = (sys.stdout.buffer if target == "-"
                               else open(target, "ab"))  # noqa: SIM115 (closed in close())
        self._thread = threading.Thread(target=self._drain, name="audit-log", daemon=True)
        self._thread.start()

    def emit(self, record: dict[str, Any]) -> None:
        """Queue one JSON line; drops it (counted) if the writer is behind."""
        try:
            self._queue.put_nowait(self._encode(record) + b"\n")
        except queue.Full:
            self._on_drop()

    def close(self, timeout: float = 5.0) -> None:
        """Flush what is queued and stop the writer (idempotent)."""
        if not self._thread.is_alive():
            return
        self._queue.put(None)
        self._thread.join(timeout)
        if self._fh is not sys.stdout.buffer:
            self._fh.close()

    def _drain(self) -> None:
        while True:
            line = self._queue.get()
            if line is None:
                self._fh.flush()
                return
            try:
                self._fh.write(line)
                if self._queue.empty():
                    self._fh.flush()
            except OSError:
                log.exception("audit log %s: write failed", self.target)
                self._on_drop()
