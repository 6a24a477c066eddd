"""Editing an active entry in place (`PATCH /v1/banlist/entries/{id}`): its expiry and its
regions change, its id stays. What both stores check before they commit an edit, and the
shape of the `edit` change they log (`GET /v1/banlist/changes`), the same for both."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from app.banlist.base import EntryEdit, regions_of, require_reason
from app.banlist.index import BanIndex
from app.banlist.model import Entry, iso
from app.errors import BanlistConflict, BanlistError, BanlistNotFound

# What an edit may change, and what its change says the entry was and became.
EDITABLE = ("expires_at", "regions")


def editable(entry: Entry | None, entry_id: str, edit: EntryEdit, now: float) -> Entry:
    """The entry an edit may change: BanlistError naming `reason` when the edit gives none,
    BanlistNotFound (`id`) for an entry that is not there or no longer active (an expiry
    not yet swept included)."""
    require_reason(edit.reason, "an edit")
    if entry is None or not entry.unexpired(now):
        lapsed = "" if entry is None or entry.expires_at is None else \
            f" (it expired at {iso(entry.expires_at)})"
        raise BanlistNotFound("id", f"no active entry {entry_id!r}{lapsed}")
    return entry


def revise(entry: Entry, edit: EntryEdit, index: BanIndex, now: float) -> Entry | None:
    """The entry as `edit` leaves it; None when the edit changes nothing.

    BanlistError naming `expires_at` or `regions[n]` as the add does; BanlistConflict
    naming `regions` when the new regions would make it the same ban (scope, value,
    regions) as another active entry of `index`."""
    expires = edit.expires_at if edit.sets_expiry else entry.expires_at
    if edit.sets_expiry and expires is not None and expires <= now:
        raise BanlistError("expires_at", f"{iso(expires)} is already in the past")
    regions = entry.regions if edit.regions is None else regions_of(edit.regions)
    after = dataclasses.replace(entry, expires_at=expires, regions=regions)
    if after.as_dict() == entry.as_dict():  # as written: the same to the millisecond
        return None
    if regions != entry.regions:
        for other in index.by_value(entry.scope, entry.value):
            if other.id != entry.id and other.regions == regions and other.unexpired(now):
                where = f"in {', '.join(sorted(regions))}" if regions else "everywhere"
                raise BanlistConflict("regions", f"entry {other.id} already bans "
                                      f"{entry.scope} {entry.value} {where}: one ban, one "
                                      f"entry (remove entry {entry.id} instead, or edit entry "
                                      f"{other.id})", extra={"identical_to": other.id})
    return after


def edit_change(previous: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    """An `edit` change's own fields (beside seq, op, actor, reason and at): the entry's
    `id`, the `entry` as it is now, and `before` / `after`, the fields it changed as they
    were and as they are (entries as `Entry.as_dict` writes them)."""
    before = {k: previous.get(k) for k in EDITABLE if previous.get(k) != entry.get(k)}
    return {"id": str(entry["id"]), "entry": dict(entry), "before": before,
            "after": {k: entry.get(k) for k in before}}
