"""The append-only JSON-lines audit log, written off the request path."""
from __future__ import annotations

import contextlib
import errno
import logging
import os
import queue
import stat
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

BATCH_LINES = 256  # lines taken off the queue for one write(2)
NEWLINE = ord("\n")


class AuditLog:
    """A bounded queue drained by one writer thread; a full queue drops and counts, never blocks.

    Every emitted line is either written whole or counted once by `on_drop`: when the
    writer is behind (queue full), when a write fails (disk full, file size limit), or
    when it is still queued at close. The file is unbuffered (one write(2) per batch of
    whole lines), so no line waits in a buffer where a failed flush could lose it
    uncounted. A write cut short leaves a partial line; the next write (also the first
    after a restart) starts with a newline, so that fragment stays alone on its line.
    """

    def __init__(self, target: str, on_drop: Callable[[int], None], maxsize: int = 10_000,
                 report_seconds: float = 60.0) -> None:
        self.target = target
        self._on_drop = on_drop
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=maxsize)
        # "-" is fd 1 itself, not sys.stdout.buffer: its buffer would hold our lines too
        self._fh = (open(1, "wb", buffering=0, closefd=False) if target == "-"  # noqa: SIM115
                    else open(target, "ab", buffering=0))  # noqa: SIM115 (the writer closes it)
        # the file may end mid-line: a write cut short, by this process or before a restart
        self._torn = target != "-" and _ends_mid_line(target)
        self._last_failed = False
        self._closed = False
        self._report_seconds = report_seconds
        self._report_at = 0.0  # failures before this monotonic time are only tallied
        self._unreported = self._unreported_lines = 0
        self._last_error: Exception | None = None
        self._thread = threading.Thread(target=self._drain, name="audit-log", daemon=True)
        self._thread.start()

    def emit_line(self, line: bytes) -> None:
        """Queue one line already encoded (the engine writes it); counted if dropped."""
        try:
            self._queue.put_nowait(line + b"\n")
        except queue.Full:
            self._on_drop(1)

    def failing(self) -> bool:
        """True while the last write failed, or if the writer stopped before close()."""
        return self._last_failed or not (self._thread.is_alive() or self._closed)

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued within `timeout` and stop the writer; lines it could not
        write are counted as dropped (idempotent, never blocks past `timeout`)."""
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():  # else it died: whatever is queued is counted below
            deadline = time.monotonic() + timeout
            with contextlib.suppress(queue.Full):  # a stuck writer: counted below too
                self._queue.put(None, timeout=timeout)
            self._thread.join(max(0.0, deadline - time.monotonic()))
        left = self._discard_queued()
        if self._thread.is_alive():
            log.error("audit log %s: the writer did not finish within %g s; %d queued "
                      "lines dropped", self.target, timeout, left)
            # it may still be in a write: the sentinel lets it stop (and close the file) after
            with contextlib.suppress(queue.Full):
                self._queue.put_nowait(None)
        elif left:
            log.error("audit log %s: %d lines still queued at close, dropped", self.target, left)

    def _discard_queued(self) -> int:
        left = 0
        while True:
            try:
                line = self._queue.get_nowait()
            except queue.Empty:
                break
            left += line is not None
        if left:
            self._on_drop(left)
        return left

    def _drain(self) -> None:
        """Write batches until the sentinel; a failed write is counted, never fatal."""
        try:
            while True:
                batch = self._take()
                stop = batch[-1] is None
                lines = [line for line in batch if line is not None]
                if lines:
                    self._write(lines)
                if stop:
                    return
        finally:
            if self._unreported:
                self._report()
            self._fh.close()

    def _take(self) -> list[bytes | None]:
        """The next line (waiting for it) and whatever else is queued, up to the sentinel."""
        batch = [self._queue.get()]
        while batch[-1] is not None and len(batch) < BATCH_LINES:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def _write(self, lines: list[bytes]) -> None:
        prefix = b"\n" if self._torn else b""  # end the partial line a failed write left
        data = memoryview(prefix + b"".join(lines))
        done = 0
        try:
            while done < len(data):
                wrote = self._fh.write(data[done:])
                if not wrote:  # None: a non-blocking descriptor that would block
                    raise OSError(errno.EAGAIN, "the audit log accepted no bytes")
                done += wrote
        except Exception as exc:  # OSError, ValueError or a bug: a writer that died here
            # would leave the queue to fill, and every line after it lost uncounted
            if done:
                self._torn = data[done - 1] != NEWLINE
            self._failed(exc, len(lines) - data[len(prefix):done].tobytes().count(b"\n"))
            return
        self._torn = self._last_failed = False

    def _failed(self, exc: Exception, lost: int) -> None:
        self._last_failed = True
        self._last_error = exc
        self._on_drop(lost)
        self._unreported += 1
        self._unreported_lines += lost
        if time.monotonic() >= self._report_at:
            self._report()

    def _report(self) -> None:
        """The first failed write with its traceback, then a summary at most every
        `report_seconds` (and one when the writer stops): a full disk fails every write."""
        if self._report_at == 0.0:  # nothing reported yet
            log.error("audit log %s: write failed, %d lines dropped (further failures are "
                      "summarised at most every %.0f s)", self.target, self._unreported_lines,
                      self._report_seconds, exc_info=self._last_error)
        else:
            log.error("audit log %s: %d writes failed, %d lines dropped, since the last "
                      "report; last error: %s", self.target, self._unreported,
                      self._unreported_lines, self._last_error)
        self._report_at = time.monotonic() + self._report_seconds
        self._unreported = self._unreported_lines = 0


def _ends_mid_line(path: str) -> bool:
    """True when a regular file's last byte is not a newline: a write was cut short (disk
    full, file size limit) before this process started."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        return False
    try:
        with open(path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) != b"\n"
    except PermissionError:  # a write-only file: assume it ends on a line, as before
        return False
