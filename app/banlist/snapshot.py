"""A replica's local snapshot file: its banlist copy, for a cold start while Redis is down."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import orjson

from app.banlist.index import BanIndex
from app.banlist.model import Entry

log = logging.getLogger(__name__)
FORMAT = 1


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A copy at a known point of the history: sequence, stream id and epoch."""

    index: BanIndex
    seq: int
    epoch: int
    stream_id: str
    synced_at: float  # when this copy was last known to equal Redis's


def write(path: Path, snap: Snapshot, entries: list[Entry]) -> None:
    """Write atomically (temp file, fsync, rename): a crash leaves the old file or the new one."""
    body = {"format": FORMAT, "seq": snap.seq, "epoch": snap.epoch, "stream_id": snap.stream_id,
            "synced_at": snap.synced_at, "groups": {k: list(v) for k, v in
                                                    snap.index.groups.items()},
            "entries": [e.as_dict() for e in entries]}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as fh:
        fh.write(orjson.dumps(body))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read(path: Path) -> Snapshot | None:
    """The snapshot in `path`, or None when there is none or it cannot be read (logged)."""
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError) as exc:
        log.error("banlist snapshot %s unreadable, ignored: %s", path, exc)
        return None
    if data.get("format") != FORMAT:
        log.error("banlist snapshot %s has format %r, expected %d: ignored", path,
                  data.get("format"), FORMAT)
        return None
    groups = {k: tuple(v) for k, v in data["groups"].items()}
    index = BanIndex((Entry.from_dict(e) for e in data["entries"]), groups)
    return Snapshot(index, int(data["seq"]), int(data["epoch"]), str(data["stream_id"]),
                    float(data["synced_at"]))
