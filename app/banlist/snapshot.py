"""The banlist at one version, as bytes: what `GET /v1/banlist/snapshot` serves, what a
replica started with REARRANGE_BANLIST_BOOTSTRAP_URL loads, and a Redis replica's local
snapshot file.

The bytes are `BanIndex.dump`'s (crates/engine/src/banlist/dump.rs documents the format
field by field) with a JSON header in front (`Header`): the version and epoch it is at,
the changelog record it ends with (a replica follows Redis from there), when it was last
known equal to its source, its content digest (app/banlist/digest.py), and for the
embedded store's own snapshot file where its change log stands (`log`). Loading
computes the digest again from the entries read and refuses bytes whose content is not
the header's: a torn download, a truncated file, a proxy's error page.

Local snapshot files written before this format (JSON lines: a header, then an entry a
line) are still read.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from app.banlist import digest
from app.banlist.index import BanIndex
from app.banlist.model import Entry

log = logging.getLogger(__name__)
KIND = "rearrange-banlist-snapshot"
MEDIA_TYPE = "application/vnd.rearrange.banlist-snapshot"
_LINES, _WHOLE = 2, 1  # the JSON formats of older local snapshot files


class SnapshotError(ValueError):
    """Bytes that are no snapshot, or whose content is not what their header says."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A copy at a known point of the history: sequence, stream id and epoch."""

    index: BanIndex
    seq: int
    epoch: int
    stream_id: str
    synced_at: float  # when this copy was last known to equal its source's
    digest: int  # of the index's content (app/banlist/digest.py)
    # the embedded store's change log at `seq` (app/banlist/embedded/checkpoint.py)
    log: dict[str, Any] | None = None

    def header(self) -> dict[str, Any]:
        head = {"kind": KIND, "version": self.seq, "epoch": self.epoch,
                "stream_id": self.stream_id, "synced_at": self.synced_at,
                "digest": digest.hex_of(self.digest), "entries": len(self.index),
                "groups": len(self.index.groups)}
        return head if self.log is None else {**head, "log": self.log}


def encode(snap: Snapshot) -> bytes:
    """The snapshot's bytes: its header, then the index as of the moment of the call (the
    caller makes sure that is the header's version)."""
    return snap.index.dump(orjson.dumps(snap.header()))


def decode(data: bytes) -> Snapshot:
    """The snapshot in `data`; SnapshotError saying what is wrong with it."""
    try:
        index, meta, content = BanIndex.load(data)
    except ValueError as exc:
        raise SnapshotError(f"not a banlist snapshot: {exc}") from None
    try:
        head = orjson.loads(meta)
        if not isinstance(head, dict) or head.get("kind") != KIND:
            raise SnapshotError(f"not a banlist snapshot header: {bytes(meta[:80])!r}")
        snap = Snapshot(index, int(head["version"]), int(head["epoch"]),
                        str(head["stream_id"]) or "0-0",  # the embedded store's: no stream
                        float(head["synced_at"]), int(content, 16), head.get("log"))
        said = str(head["digest"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise SnapshotError(f"the snapshot's header is unreadable: {exc!r}") from None
    if said != content:
        raise SnapshotError(f"the snapshot's content is not what its header says (digest "
                            f"{content}, header {said}): torn or altered")
    return snap


def write(path: Path, data: bytes) -> None:
    """Write atomically (temp file, fsync, rename): a crash leaves the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # after a failure only: a renamed file is gone from here


def read(path: Path) -> Snapshot | None:
    """The snapshot in `path`, or None when there is none or it cannot be read (logged)."""
    try:
        with path.open("rb") as fh:
            first = fh.read(1)
            fh.seek(0)
            if first == b"{":
                return _read_lines(fh, path)
            return decode(fh.read())
    except FileNotFoundError:
        return None
    except (OSError, SnapshotError) as exc:
        log.error("banlist snapshot %s unreadable, ignored: %s", path, exc)
        return None


def _read_lines(fh: IO[bytes], path: Path) -> Snapshot | None:
    """A local snapshot file of the JSON formats (a header, then an entry a line)."""
    try:
        head = orjson.loads(fh.readline())
        if not isinstance(head, dict) or head.get("format") not in (_LINES, _WHOLE):
            got = head.get("format") if isinstance(head, dict) else None
            log.error("banlist snapshot %s has format %r: ignored", path, got)
            return None
        groups = {k: tuple(v) for k, v in head["groups"].items()}
        rows = head["entries"] if head["format"] == _WHOLE else _lines(fh)
        content = digest.Digest.of((), groups)

        def entries() -> Iterator[Entry]:
            for row in rows:
                entry = Entry.from_dict(row)
                content.toggle(digest.of_entry(entry))
                yield entry

        index = BanIndex(entries(), groups)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        log.error("banlist snapshot %s unreadable, ignored: %s", path, exc)
        return None
    if head.get("digest") not in (None, content.hex):
        log.error("banlist snapshot %s holds other content than its header says (digest "
                  "%s, header %s): ignored", path, content.hex, head["digest"])
        return None
    return Snapshot(index, int(head["seq"]), int(head["epoch"]), str(head["stream_id"]),
                    float(head["synced_at"]), content.value)


def _lines(fh: IO[bytes]) -> Iterator[dict[str, Any]]:
    for line in fh:
        if not line.endswith(b"\n"):  # the write is fsynced before the rename: never torn
            raise ValueError("the last entry line is incomplete")
        yield orjson.loads(line)
