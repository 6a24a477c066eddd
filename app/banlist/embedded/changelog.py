"""The embedded store's change log on disk: fsynced JSON lines, batched transactions, history.

One line per change, seq 1, 2, 3, … in order. A commit of several changes is one
transaction: each of its lines carries `txn_end` (the seq of its last change), it may be
written in several batches (one write and one fsync each), and it counts only once its last
line is on disk. At replay, a transaction cut short by a crash (it was never acknowledged)
is undone and cut off the file, like a torn last line; anything else unreadable stops the
start rather than lose entries silently. Every STRIDE-th line's offset is remembered, so
old history is read from the file with one seek instead of being kept in memory; a filtered
read (history by host, lookup's former entries) searches the file's bytes and parses only
the lines it finds, from the start or, for the newest ones first, from the end.

A replay may start at a line's offset (where a snapshot of the store left the log, with the
marks and the seq it had there): `continues` tells whether the log there is the one the
snapshot was taken of.
"""
from __future__ import annotations

import contextlib
import hashlib
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
UNDO = "undo"  # what `replay` yields last for an unfinished transaction: {"op", "ids"}
STRIDE = 1024  # one remembered offset per STRIDE lines (8 bytes each): 8 KiB per 1 M changes
CHUNK = 64 << 20  # bytes searched at a time when reading from the end
ENDS = (b'"op":"remove"', b'"op":"expire"')  # how a removal's or an expiry's line spells it

Change = dict[str, Any]


class ChangeLog:
    """Appends transactions of changes with one fsync per batch; reads history back by seq."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = 0  # bytes of committed transactions: what readers may read
        self.marks = array("q")  # marks[k]: offset of the line of seq k * STRIDE + 1
        self.first_end: int | None = None  # offset of the first removal or expiry logged
        self.broken: str | None = None  # a failed write that could not be undone
        self.seq = 0  # the last committed change's, once `replay` has been read through

    def replay(self, repair: bool = True, start: tuple[int, int] = (0, 0)) -> Iterator[Change]:
        """Every committed change in order, read as it is asked for; `seq` is the last one's
        once every one was.

        `start`: the offset of a line and the seq before it, to replay only what follows
        (`continues` checked it; `marks` and `first_end` already hold what precedes it).
        A torn last line and an unfinished last transaction (a crash mid-commit) are cut
        off the file (left in it, without `repair`: a read-only store never writes); the
        unfinished transaction's adds and removals, already yielded, are followed by
        `{"op": UNDO, "ids": [the adds' ids], "entries": [the removed entries]}` to take
        them out, and put them back, again.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        offset, seq = start
        self.seq = seq
        if not self.path.exists():
            return
        cut: int | None = None
        txn_at, txn_end, txn_removes = -1, 0, 0
        txn_ids: list[str] = []
        with self.path.open("rb") as fh:
            fh.seek(offset)
            for n, line in enumerate(fh, seq + 1):  # line n holds seq n
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
                    if change["op"] not in ("add", "remove"):
                        raise BanlistError("banlist_path", f"{self.path}:{n}: a "
                                           f"{change['op']!r} inside a transaction")
                    if change["op"] == "add":
                        txn_ids.append(change["entry"]["id"])
                    else:
                        txn_removes += 1
                if (change["seq"] - 1) % STRIDE == 0:
                    self.marks.append(offset)
                if self.first_end is None and change["op"] in ("remove", "expire"):
                    self.first_end = offset
                yield change
                seq, offset = change["seq"], offset + len(line)
                if seq == txn_end:
                    txn_at, txn_ids, txn_removes = -1, [], 0
        if txn_at >= 0:
            done = len(txn_ids) + txn_removes
            log.warning("banlist log %s: dropping an unfinished transaction of %d changes "
                        "(seq %d to %d of %d; a crash mid-commit, never acknowledged)",
                        self.path, done, seq - done + 1, seq, txn_end)
            # a removal's line carries its entry: read back (not held meanwhile: a bulk
            # removal may hold a million), to be put back
            back = [c["entry"] for c in self.scan(txn_at, offset)
                    if c["op"] == "remove"] if txn_removes else []
            yield {"op": UNDO, "ids": txn_ids, "entries": back}
            seq -= done
            cut = txn_at
            while self.marks and self.marks[-1] >= cut:
                self.marks.pop()
        if cut is not None:
            if repair:
                self._truncate(cut)
            offset = cut
        self.size, self.seq = offset, seq

    def continues(self, offset: int, seq: int, last: tuple[int, str]) -> str | None:
        """None when this log, as it is on disk, holds at byte `offset` the end of the line
        of seq `seq`, whose start and SHA-1 are `last`, followed by the line of seq + 1 or
        by nothing; else what differs (a log restored from an older copy, another log)."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return f"the log {self.path} is gone"
        if size < offset:
            return (f"the log ends at byte {size}, before byte {offset} where the snapshot "
                    "left it (a log restored from an older copy?)")
        at, sha1 = last
        line = following = b""
        if 0 <= at < offset:
            with self.path.open("rb") as fh:
                fh.seek(at)
                line = fh.read(offset - at)
                following = fh.readline()
        if hashlib.sha1(line).hexdigest() != sha1:
            return (f"the line before byte {offset} is not the snapshot's last change (seq "
                    f"{seq}): the log was rewritten or replaced")
        if following.endswith(b"\n"):
            try:
                got = orjson.loads(following).get("seq")
            except (orjson.JSONDecodeError, AttributeError):
                got = None
            if got != seq + 1:
                return f"the line at byte {offset} holds seq {got!r}, not {seq + 1}"
        return None

    def last_line(self, size: int) -> tuple[int, str]:
        """The start and the SHA-1 of the line that ends at byte `size` (a line's end)."""
        with self.path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            at = mm.rfind(b"\n", 0, size - 1) + 1
            return at, hashlib.sha1(mm[at:size]).hexdigest()

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
        first_end = self.first_end
        offset = start
        try:
            with self.path.open("ab") as fh:
                def write(batch: list[Change]) -> None:
                    nonlocal offset
                    lines = []
                    for change in batch:
                        if (change["seq"] - 1) % STRIDE == 0:
                            self.marks.append(offset)
                        if self.first_end is None and change["op"] in ("remove", "expire"):
                            self.first_end = offset
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
            self.first_end = first_end
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
            for begin, end in sorted(_lines_with(mm, needles, start, size)):
                yield _change(mm[begin:end])

    def search_back(self, needles: list[bytes], start: int, size: int) -> Iterator[Change]:
        """`search`'s changes newest first: the file is searched CHUNK bytes at a time from
        `size` back, so a reader that stops early reads only the end of the log."""
        if size <= start:
            return
        with self.path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            end = size
            while end > start:
                low = max(start, end - CHUNK)
                if low > start:  # back to a line's start (`end` is one's end)
                    low = max(start, mm.rfind(b"\n", start, low) + 1)
                for begin, stop in sorted(_lines_with(mm, needles, low, end), reverse=True):
                    yield _change(mm[begin:stop])
                end = low

    def mark_after(self, seq: int, size: int) -> int:
        """The offset of a remembered line at or after the line of `seq`, or `size`: every
        line before the line of `seq` lies before it."""
        k = -(-(seq - 1) // STRIDE)
        return self.marks[k] if k < len(self.marks) else size

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


def _lines_with(mm: mmap.mmap, needles: list[bytes], start: int, size: int
                ) -> set[tuple[int, int]]:
    """(start, end) of each line between `start` and `size` that holds one of `needles`."""
    found: set[tuple[int, int]] = set()
    for needle in needles:
        at = mm.find(needle, start, size)
        while at >= 0:
            newline = mm.rfind(b"\n", start, at)
            end = mm.find(b"\n", at, size)
            end = size if end < 0 else end
            found.add((start if newline < 0 else newline + 1, end))
            at = mm.find(needle, end, size)
    return found


def _change(line: bytes) -> Change:
    change: Change = orjson.loads(line)
    change.pop(TXN, None)
    return change


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
