"""The embedded store's change log on disk: fsynced JSON lines, batched transactions, history.

One line per change, seq 1, 2, 3, … in order. A commit of several changes is one
transaction: each of its lines carries `txn_end` (the seq of its last change), it may be
written in several batches (one write and one fsync each), and it counts only once its last
line is on disk. At replay, a transaction cut short by a crash (it was never acknowledged)
is undone and cut off the file, like a torn last line; anything else unreadable stops the
start rather than lose entries silently. Every STRIDE-th line's offset is remembered, so
old history is read from the file with one seek instead of being kept in memory; a filtered
read (history by host, lookup's former entries) searches the file's bytes and parses only
the lines it finds.
"""
from __future__ import annotations

import contextlib
import logging
import mmap
import os
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from app.errors import BanlistError, BanlistUnavailable

log = logging.getLogger(__name__)
TXN = "txn_end"  # on every line of a transaction of several changes: the seq of its last
STRIDE = 1024  # one remembered offset per STRIDE lines (8 bytes each): 8 KiB per 1 M changes

Change = dict[str, Any]


class ChangeLog:
    """Appends transactions of changes with one fsync per batch; reads history back by seq."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = 0  # bytes of committed transactions: what readers may read
        self.marks = array("q")  # marks[k]: offset of the line of seq k * STRIDE + 1
        self.broken: str | None = None  # a failed write that could not be undone

    def replay(self, apply: Callable[[Change], None],
               undo: Callable[[list[str]], None], repair: bool = True) -> int:
        """Apply every committed change in order; returns the last seq.

        A torn last line and an unfinished last transaction (a crash mid-commit) are cut
        off the file (left in it, without `repair`: a read-only store never writes);
        `undo` gets the ids of the unfinished transaction's adds, already applied, to take
        them out again.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            return 0
        seq = offset = 0
        cut: int | None = None
        txn_at, txn_end = -1, 0
        txn_ids: list[str] = []
        with self.path.open("rb") as fh:
            for n, line in enumerate(fh, 1):
                if not line.endswith(b"\n"):  # only the last line can lack it
                    log.warning("banlist log %s: dropping a torn last line", self.path)
                    cut = offset
                    break
                change = self._parse(line, n, seq)
                end = change.pop(TXN, None)
                if txn_at >= 0 and end != txn_end:
                    raise BanlistError("banlist_path", f"{self.path}:{n}: an unfinished "
                                       f"transaction (to seq {txn_end}) is followed by "
                                       "other changes")
                if txn_at < 0 and end is not None and end > change["seq"]:
                    txn_at, txn_end, txn_ids = offset, end, []
                if txn_at >= 0:
                    if change["op"] != "add":
                        raise BanlistError("banlist_path", f"{self.path}:{n}: a "
                                           f"{change['op']!r} inside a transaction")
                    txn_ids.append(change["entry"]["id"])
                if (change["seq"] - 1) % STRIDE == 0:
                    self.marks.append(offset)
                apply(change)
                seq, offset = change["seq"], offset + len(line)
                if seq == txn_end:
                    txn_at, txn_ids = -1, []
        if txn_at >= 0:
            log.warning("banlist log %s: dropping an unfinished transaction of %d changes "
                        "(seq %d to %d of %d; a crash mid-commit, never acknowledged)",
                        self.path, len(txn_ids), seq - len(txn_ids) + 1, seq, txn_end)
            undo(txn_ids)
            seq -= len(txn_ids)
            cut = txn_at
            while self.marks and self.marks[-1] >= cut:
                self.marks.pop()
        if cut is not None:
            if repair:
                self._truncate(cut)
            offset = cut
        self.size = offset
        return seq

    def _parse(self, line: bytes, n: int, last: int) -> Change:
        try:
            change = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise BanlistError("banlist_path", f"{self.path}:{n} is not valid JSON") from None
        if not isinstance(change, dict) or change.get("seq") != last + 1:
            got = change.get("seq") if isinstance(change, dict) else None
            raise BanlistError("banlist_path", f"{self.path}:{n}: seq {got!r} where "
                               f"{last + 1} was due (the log is out of order)")
        return change

    @contextlib.contextmanager
    def transaction(self, first: int, end: int, standalone: bool = False
                    ) -> Iterator[Callable[[list[Change]], None]]:
        """A writer of batches (one write + fsync each) of the changes `first`..`end`.

        `standalone` changes carry no transaction mark: each stands on its own at replay
        (expiries, which a crash may leave partly logged without harm).

        Nothing counts until the block ends without an exception; on one, the file is cut
        back to where the transaction began (if even that fails, every later write is
        refused until a restart, whose replay drops the unfinished transaction).
        """
        if self.broken:
            raise BanlistUnavailable("banlist", self.broken)
        start, marks, created = self.size, len(self.marks), not self.path.exists()
        offset = start
        try:
            with self.path.open("ab") as fh:
                def write(batch: list[Change]) -> None:
                    nonlocal offset
                    lines = []
                    for change in batch:
                        if (change["seq"] - 1) % STRIDE == 0:
                            self.marks.append(offset)
                        # a group definition stands alone: replay can undo an unfinished
                        # transaction's adds, not a definition (the index keeps every group
                        # it was told of). A crash mid-import thus keeps the import's groups;
                        # the import sent again finds them held, which is a no-op.
                        marked = first < end and not standalone and change["op"] != "group"
                        line = orjson.dumps({**change, TXN: end} if marked else change)
                        lines.append(line + b"\n")
                        offset += len(line) + 1
                    fh.write(b"".join(lines))
                    fh.flush()
                    os.fsync(fh.fileno())

                yield write
            if created:  # the new file's name must survive a crash too
                _fsync_dir(self.path.parent)
        except BaseException as exc:
            del self.marks[marks:]
            self._undo(start, exc)
            if isinstance(exc, OSError):
                raise BanlistUnavailable("banlist", f"the change log {self.path} could not be "
                                         f"written, nothing was changed: {exc}") from exc
            raise
        self.size = offset

    def _undo(self, size: int, cause: BaseException) -> None:
        try:
            self._truncate(size)
        except OSError as exc:
            self.broken = (f"the change log {self.path} could not be cut back after a failed "
                           f"write ({cause!r}, then {exc}); writes are refused until a "
                           "restart, whose replay drops the unfinished transaction")
            log.error("banlist: %s", self.broken)

    def _truncate(self, size: int) -> None:
        with self.path.open("r+b") as fh:
            fh.truncate(size)
            fh.flush()
            os.fsync(fh.fileno())

    def read(self, after: int, limit: int, size: int) -> list[Change]:
        """Up to `limit` changes with seq > `after`, from the first `size` bytes of the log."""
        k = max(after, 0) // STRIDE
        if k >= len(self.marks):
            return []
        out: list[Change] = []
        offset = self.marks[k]
        with self.path.open("rb") as fh:
            fh.seek(offset)
            for line in fh:
                offset += len(line)
                if offset > size:  # past what was committed when the caller looked
                    break
                change = orjson.loads(line)
                if change["seq"] > after:
                    change.pop(TXN, None)
                    out.append(change)
                    if len(out) == limit:
                        break
        return out


    def search(self, needles: list[bytes], start: int, size: int) -> Iterator[Change]:
        """Changes, in log order, whose line between byte `start` (a line's start) and `size`
        holds one of `needles`: a byte search of the file, JSON only for the lines found."""
        if size <= start:
            return
        with self.path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            found: set[tuple[int, int]] = set()
            for needle in needles:
                at = mm.find(needle, start, size)
                while at >= 0:
                    newline = mm.rfind(b"\n", start, at)
                    end = mm.find(b"\n", at, size)
                    end = size if end < 0 else end
                    found.add((start if newline < 0 else newline + 1, end))
                    at = mm.find(needle, end, size)
            for begin, end in sorted(found):
                change = orjson.loads(mm[begin:end])
                change.pop(TXN, None)
                yield change

    def scan(self, start: int, size: int) -> Iterator[Change]:
        """Every change from byte `start` (a line's start) up to `size`, in log order."""
        with self.path.open("rb") as fh:
            fh.seek(start)
            offset = start
            for line in fh:
                offset += len(line)
                if offset > size:
                    break
                change = orjson.loads(line)
                change.pop(TXN, None)
                yield change

    def offset_before(self, at: str, size: int) -> int:
        """The offset of a remembered line logged before `at` (ISO 8601 UTC, as `at` of a
        change), as late as the marks allow: where a read of the changes from `at` starts."""
        lo, hi = 0, len(self.marks)  # marks[:lo] were logged before `at`
        with self.path.open("rb") as fh:
            while lo < hi:
                mid = (lo + hi) // 2
                fh.seek(self.marks[mid])
                line = fh.readline()
                if self.marks[mid] + len(line) <= size and orjson.loads(line)["at"] < at:
                    lo = mid + 1
                else:
                    hi = mid
        return self.marks[lo - 1] if lo else 0


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
