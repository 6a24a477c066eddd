"""Bulk actions on the banlist: lift every active entry a filter takes, after a dry run that
counts them and shows some (docs/banlist.md, "Undo a campaign"); and the same filter as
query parameters of `GET /v1/banlist/entries` (`selection_query`)."""
from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, StrictBool
from pydantic import Field as PField

from app.api.deps import Actor, Store
from app.api.openapi import WRITES, refusals
from app.api.strict import StrictRoute
from app.banlist.base import MAX_REASON
from app.banlist.model import Scope
from app.banlist.selection import FIELDS, MAX_TEXT, Selection
from app.errors import FieldError

router = APIRouter(prefix="/v1/banlist", tags=["banlist"], route_class=StrictRoute)
SAMPLE = 20  # entries a dry run shows
_TIME = ("ISO 8601 with an offset (2025-03-01T12:00:00Z), or a date (midnight UTC)")
_ABOUT = {
    "actor": "made by this actor (exactly)",
    "reason_contains": "its reason holds these words, in any case",
    "scope": "of this scope (url, prefix, host, domain, org)",
    "value_suffix": "its value, as the entries list writes it, ends with this "
                    "(`.camp.example`: every host under it)",
    "created_before": f"created before this time (exclusive): {_TIME}",
    "created_after": f"created at or after this time: {_TIME}",
    "expires_before": f"expires before this time (a permanent entry never does): {_TIME}",
}


def _text(field: str) -> Any:
    return PField(None, min_length=1, max_length=MAX_TEXT, description=_ABOUT[field])


class FilterIn(BaseModel):
    """Which active entries to take: every field given must hold; at least one is needed."""

    model_config = ConfigDict(extra="forbid")

    actor: str | None = _text("actor")
    reason_contains: str | None = _text("reason_contains")
    scope: Scope | None = PField(None, description=_ABOUT["scope"])
    value_suffix: str | None = _text("value_suffix")
    created_before: str | None = _text("created_before")
    created_after: str | None = _text("created_after")
    expires_before: str | None = _text("expires_before")


class BulkRemoveIn(BaseModel):
    """POST /v1/banlist/remove: the filter, why, and whether only to count."""

    model_config = ConfigDict(extra="forbid")

    filter: FilterIn
    reason: str = PField(min_length=1, max_length=MAX_REASON)
    dry_run: StrictBool = False


@router.post("/remove", responses=refusals({
    **WRITES, 422: "an empty filter (`field`: filter: it would take every entry), a bad "
                   "filter field or a blank reason: `field` names it"}))
def remove_matching(body: BulkRemoveIn, store: Store, actor: Actor) -> dict[str, Any]:
    """Lift every active entry the filter takes, as one batch: each removal in the history
    with the actor and the reason, the version moving once (every replica goes from the
    list before to the list after, never in between). Answers `{removed, filter,
    banlist_version}`.

    With `dry_run: true` nothing changes: `{matched, sample, filter, banlist_version}`,
    `sample` being the first 20 entries taken, in id order. An empty filter is refused:
    it would lift the whole list."""
    now = time.time()
    selection = Selection.of(body.filter.model_dump(), now, "filter")
    if selection.empty():
        raise FieldError("filter", f"empty: it would take every active entry; give at least "
                         f"one of {', '.join(FIELDS)} (nothing was removed)")
    if body.dry_run:
        store.refresh()  # count what a real run would take now (a replica may lag)
        sample, _, matched = selection.page(store.index, None, SAMPLE, time.time())
        return {"dry_run": True, "matched": matched, "sample": [e.as_dict() for e in sample],
                "filter": selection.as_dict(), "banlist_version": store.version}
    removed = store.remove_matching(selection, actor, body.reason)
    return {"removed": removed, "filter": selection.as_dict(),
            "banlist_version": store.version}


def _query(field: str, length: int = MAX_TEXT) -> Any:
    return Query(max_length=length, description=_ABOUT[field])


async def selection_query(
        actor: Annotated[str | None, _query("actor")] = None,
        reason_contains: Annotated[str | None, _query("reason_contains")] = None,
        scope: Annotated[Scope | None, Query(description=_ABOUT["scope"])] = None,
        value_suffix: Annotated[str | None, _query("value_suffix")] = None,
        created_before: Annotated[str | None, _query("created_before", 64)] = None,
        created_after: Annotated[str | None, _query("created_after", 64)] = None,
        expires_before: Annotated[str | None, _query("expires_before", 64)] = None,
) -> Selection:
    """The filter of a listing's query parameters (`field`: `query.<name>` when refused)."""
    given = {"actor": actor, "reason_contains": reason_contains, "scope": scope,
             "value_suffix": value_suffix, "created_before": created_before,
             "created_after": created_after, "expires_before": expires_before}
    return Selection.of(given, time.time(), "query")


SelectionQuery = Annotated[Selection, Depends(selection_query)]
