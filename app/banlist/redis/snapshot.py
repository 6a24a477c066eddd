"""A replica's local snapshot file: its banlist copy, for a cold start while Redis is down.

JSON lines: a header (format, sequence, stream id, epoch, groups, the content digest),
then one entry per line. The digest is computed again as the file is read, and a file whose
content does not match its header's is refused (a torn or edited file) rather than served.
Both directions stream, one entry at a time: a million entries written as one JSON
document once cost ~1 GiB of transient objects per write (`python -m bench.memory
--redis`), several times the index itself. Format 1 (one JSON document) is still read.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from app.banlist import digest
from app.banlist.index import BanIndex
from app.banlist.model import Entry

log = logging.getLogger(__name__)
FORMAT = 2
_WHOLE = 1  # the old single-document format


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A copy at a known point of the history: sequence, stream id and epoch."""

    index: BanIndex
    seq: int
    epoch: int
    stream_id: str
    synced_at: float  # when this copy was last known to equal Redis's
    digest: int  # of the index's content (app/banlist/digest.py)


def write(path: Path, snap: Snapshot, entries: Iterable[Entry]) -> None:
    """Write atomically (temp file, fsync, rename): a crash leaves the old file or the new one.

    `entries` is iterated once, as it is written (BanIndex.frozen gives the copy as of
    the moment `snap` was taken, while the replica goes on applying changes).
    """
    head = {"format": FORMAT, "seq": snap.seq, "epoch": snap.epoch,
            "stream_id": snap.stream_id, "synced_at": snap.synced_at,
            "digest": digest.hex_of(snap.digest),
            "groups": {k: list(v) for k, v in snap.index.groups.items()}}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb", buffering=1 << 20) as fh:
            fh.write(orjson.dumps(head) + b"\n")
            for entry in entries:
                fh.write(orjson.dumps(entry.as_dict()) + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # after a failure only: a renamed file is gone from here


def read(path: Path) -> Snapshot | None:
    """The snapshot in `path`, or None when there is none or it cannot be read (logged)."""
    try:
        with path.open("rb") as fh:
            head = orjson.loads(fh.readline())
            if not isinstance(head, dict) or head.get("format") not in (FORMAT, _WHOLE):
                got = head.get("format") if isinstance(head, dict) else None
                log.error("banlist snapshot %s has format %r, expected %d: ignored", path,
                          got, FORMAT)
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
        if head.get("digest") not in (None, content.hex):  # none: written before digests
            log.error("banlist snapshot %s holds other content than its header says (digest "
                      "%s, header %s): ignored", path, content.hex, head["digest"])
            return None
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        log.error("banlist snapshot %s unreadable, ignored: %s", path, exc)
        return None
    return Snapshot(index, int(head["seq"]), int(head["epoch"]), str(head["stream_id"]),
                    float(head["synced_at"]), content.value)


def _lines(fh: IO[bytes]) -> Iterator[dict[str, Any]]:
    for line in fh:
        if not line.endswith(b"\n"):  # the write is fsynced before the rename: never torn
            raise ValueError("the last entry line is incomplete")
        yield orjson.loads(line)
