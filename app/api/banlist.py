"""The banlist admin API of the CONTRACT: add, remove, look up, list, change history."""
from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Query

from app.api.deps import Actor, Store
from app.banlist import canon
from app.banlist.store import EntrySpec
from app.contract import BanIn, UnbanIn
from app.errors import FieldError

router = APIRouter(prefix="/v1/banlist", tags=["banlist"])


@router.post("/entries", status_code=201)
async def add_entry(body: BanIn, store: Store, actor: Actor) -> dict[str, Any]:
    """Ban a URL, prefix, host or domain; returns the entry and the new banlist version."""
    spec = EntrySpec(body.scope, body.value, body.reason, tuple(body.regions),
                     body.expiry(time.time()))
    entry = store.add(spec, actor)
    return {"entry": entry.as_dict(), "banlist_version": store.version}


@router.delete("/entries/{entry_id}")
async def remove_entry(entry_id: str, body: UnbanIn, store: Store,
                       actor: Actor) -> dict[str, Any]:
    """Lift an entry (an appeal); the removal is logged with actor and reason."""
    entry = store.remove(entry_id, actor, body.reason)
    return {"removed": entry.as_dict(), "banlist_version": store.version}


@router.get("/lookup")
async def lookup(store: Store, url: Annotated[str, Query(min_length=1)],
                 region: str | None = None) -> dict[str, Any]:
    """Which entries match a URL, through which expression, and whether each applies."""
    try:
        canonical = canon.canonicalize(url)
    except canon.InvalidURL as exc:
        raise FieldError("url", f"not a valid URL: {exc}") from None
    host = canon.split(canonical)[0]
    now = time.time()
    region = region.upper() if region else None
    matches = []
    for m in store.index.explain(canonical, host):
        item = m.as_dict()
        item["applies"] = m.entry.active(region, now)
        matches.append(item)
    return {"url": url, "canonical": canonical, "region": region,
            "banned": any(m["applies"] for m in matches), "matches": matches,
            "banlist_version": store.version}


@router.get("/entries")
async def list_entries(store: Store, after: str | None = None,
                       limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
    """Active entries in id order, paged: pass `next` back as `after`."""
    entries = sorted(store.active(), key=lambda e: int(e.id))
    if after is not None:
        if not after.isdigit():
            raise FieldError("after", "must be an entry id from a previous page")
        entries = [e for e in entries if int(e.id) > int(after)]
    page = entries[:limit]
    more = len(entries) > limit
    return {"entries": [e.as_dict() for e in page],
            "next": page[-1].id if more and page else None,
            "total": len(store.active()), "banlist_version": store.version}


@router.get("/changes")
async def changes(store: Store, since: Annotated[int, Query(ge=0)] = 0,
                  limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
    """The change log after sequence `since`: who changed what, when and why."""
    return {"changes": store.changes_since(since, limit), "banlist_version": store.version}
