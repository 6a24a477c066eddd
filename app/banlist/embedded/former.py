"""Former entries read from the embedded store's log, for lookup's `former`: the graveyard
filled on first use with the newest ends of the log, read from its end (a start reads no
line for it), and the ends older than it keeps found by a search of the log's bytes.

An end (a `remove` or `expire` change) carries the entry it ended; one logged before ends
did names only the id, and is paired with the latest `add` or `edit` of that id before it.
"""
from __future__ import annotations

from typing import Any

from app.banlist.embedded.changelog import ENDS, ChangeLog
from app.banlist.graveyard import Graveyard
from app.banlist.history import ChangeFilter
from app.banlist.index import BanIndex
from app.banlist.model import Entry

Change = dict[str, Any]
Gone = tuple[Entry, Change]
_SETS = (b'"op":"add"', b'"op":"edit"')  # the lines a bare end's entry is read from
_BARE = (b'"op":"remove","id":', b'"op":"expire","id":')


def recent(changelog: ChangeLog, start: int, size: int, cap: int,
           bare: bool) -> tuple[list[Gone], bool]:
    """The newest `cap` ends logged between bytes `start` and `size`, oldest first, and
    whether that is every one of them: the log is read back from `size`, and stops once it
    has them (with the entry of every bare end among them: every end after the oldest
    returned is then returned)."""
    gone: list[Gone] = []
    waiting: dict[str, Change] = {}  # bare ends, by id: their entry is in an older line
    whole = True
    for change in changelog.search_back([*ENDS, *(_SETS if bare else ())], start, size):
        if change["op"] in ("remove", "expire"):
            if change.get("entry"):
                gone.append((Entry.from_dict(change["entry"]), change))
            else:
                waiting[change["id"]] = change
        elif (end := waiting.pop(change["entry"]["id"], None)) is not None:
            gone.append((Entry.from_dict(change["entry"]), end))
        if len(gone) >= cap and not waiting:
            whole = False
            break
    gone.sort(key=_seq)
    return gone[-cap:], whole and len(gone) <= cap


def older(changelog: ChangeLog, before: int, size: int, canonical: str, host: str,
          live: BanIndex, bare: bool) -> list[dict[str, Any]]:
    """`Graveyard.former` of the ends logged before seq `before`: the lines that name the
    host's registrable domain or an org group holding it (what a history by host searches
    for), each an entry that may have matched; the latest ended first."""
    needles = ChangeFilter(host=host).needles(live.groups) or []
    if bare:
        needles = [*needles, *_BARE]
    gone: list[Gone] = []
    held: dict[str, Change] = {}  # the entries of the adds and edits found, by id
    for change in changelog.search(needles, 0, changelog.mark_after(before, size)):
        if change["seq"] >= before:
            break
        if change["op"] in ("add", "edit"):
            held[change["entry"]["id"]] = change["entry"]
        elif change["op"] in ("remove", "expire"):
            entry = change.get("entry") or held.get(change["id"])
            if entry is not None:
                gone.append((Entry.from_dict(entry), change))
    if not gone:
        return []
    found = Graveyard(cap=len(gone))
    found.bury(gone)
    return found.former(canonical, host, live)


def _seq(gone: Gone) -> int:
    seq: int = gone[1]["seq"]
    return seq
