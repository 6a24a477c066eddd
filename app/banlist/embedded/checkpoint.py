"""The embedded store's snapshot beside its log (`<log>.snapshot`): the index at a seq and,
in its header, where the log stood then, so that a start loads it and replays only the
lines after it instead of the whole log.

The file is snapshot.py's (the index's binary dump behind a JSON header, its content
digest checked at load); the header's `log` holds what the start needs to go on from it:

- `offset`: the byte after the snapshot's last change (the log's committed size then);
- `last`: the start and the SHA-1 of that change's line, which the log must still hold
  there (`ChangeLog.continues`: a log restored from an older copy, or another log, does not);
- `stride`, `marks`: the log's offsets of every STRIDE-th line before `offset`;
- `first_end`: the offset of the log's first removal or expiry (null: none yet), where a
  read of former entries from the end stops;
- `bare_ends`: some removal or expiry was logged without its entry.

A snapshot that cannot be read, or that its log does not continue, is left aside with a
warning saying why, and the start replays the whole log.
"""
from __future__ import annotations

import logging
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.banlist import snapshot
from app.banlist.embedded import changelog as log_module
from app.banlist.embedded.changelog import ChangeLog

log = logging.getLogger(__name__)
FORMAT = 1


@dataclass(frozen=True, slots=True)
class Position:
    """Where the log stood at a snapshot (the header's `log`, read)."""

    offset: int
    last: tuple[int, str]
    marks: array[int]
    first_end: int | None
    bare_ends: bool


def path_of(log_path: Path) -> Path:
    return log_path.with_name(log_path.name + ".snapshot")


def position(changelog: ChangeLog, bare_ends: bool) -> dict[str, Any]:
    """The header's `log` for a snapshot of the store now (its writes held off)."""
    size = changelog.size
    return {"format": FORMAT, "offset": size, "last": list(changelog.last_line(size)),
            "stride": log_module.STRIDE, "marks": changelog.marks.tolist(),
            "first_end": changelog.first_end, "bare_ends": bare_ends}


def load(path: Path, changelog: ChangeLog) -> tuple[snapshot.Snapshot, Position] | str:
    """The snapshot in `path` and where it left the log, when the log on disk continues it;
    else why not: `replay` (there is no snapshot) or `refused` (logged with the cause)."""
    if not path.exists():
        return "replay"
    snap = snapshot.read(path)  # an unreadable or torn file is logged there
    if snap is None:
        return "refused"
    at = _position(snap)
    problem: str | None = None
    if isinstance(at, str):
        problem = at
    elif (problem := changelog.continues(at.offset, snap.seq, at.last)) is None:
        return snap, at
    log.warning("banlist log %s: snapshot %s (seq %d) left aside, the whole log is replayed: "
                "%s", changelog.path, path, snap.seq, problem)
    return "refused"


def _position(snap: snapshot.Snapshot) -> Position | str:
    head = snap.log
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        return "its header says nothing of a change log (not an embedded store's snapshot)"
    try:
        start, sha1 = head["last"]
        first_end = head["first_end"]
        at = Position(int(head["offset"]), (int(start), str(sha1)), array("q", head["marks"]),
                      None if first_end is None else int(first_end), bool(head["bare_ends"]))
        stride = int(head["stride"])
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        return f"its header's log position is unreadable: {exc!r}"
    if stride != log_module.STRIDE or len(at.marks) != -(-snap.seq // stride):
        return (f"its {len(at.marks)} marks, one every {stride} lines, are not the "
                f"{-(-snap.seq // log_module.STRIDE)} this store keeps for {snap.seq} lines")
    return at
