"""The review queue of high-impact bans (app/banlist/review.py): list, approve, reject.

Plain `def` routes: each may write to Redis (in the thread pool, off the event loop)."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.api.auth import APPROVE
from app.api.deps import Approver, Reader, Wired, Writer
from app.api.openapi import WRITES, refusals
from app.api.strict import StrictRoute
from app.banlist.bodies import UnbanIn

router = APIRouter(prefix="/v1/banlist/pending", tags=["banlist"], route_class=StrictRoute)
_GONE = {404: "no such pending ban: approved, rejected, expired or never proposed"}


@router.get("")
def pending(services: Wired, _: Reader) -> dict[str, Any]:
    """The bans waiting for a second person, oldest first: each with its proposer
    (`actor`), whether it is `in_effect` (an urgent ban, banned already) and its `impact`
    now (the share of the last hour's requests whose page held what it bans)."""
    review = services.review
    return {"pending": review.listed(), "review_share": review.review_share,
            "banlist_version": services.store.version}


@router.post("/{pending_id}/approve", responses=refusals({
    **WRITES, **_GONE, 403: "the approver proposed the ban (a second person approves it), "
                            "or the token may not approve"}))
def approve(pending_id: str, body: UnbanIn, services: Wired,
            holder: Approver) -> dict[str, Any]:
    """Ban what a pending ban asks (its proposer stays the ban's actor) and take it off the
    queue; the approver and `reason` are recorded in the review list's history."""
    entry, was = services.review.approve(pending_id, holder.actor, body.reason)
    return {"entry": entry.as_dict(), "approved": was.as_dict(), "by": holder.actor,
            "banlist_version": services.store.version}


@router.post("/{pending_id}/reject", responses=refusals({
    **WRITES, **_GONE, 403: "rejecting another's pending ban without the right to approve"}))
def reject(pending_id: str, body: UnbanIn, services: Wired, holder: Writer) -> dict[str, Any]:
    """Take a pending ban off the queue; an urgent one in effect is lifted too (`lifted`).
    Its proposer may withdraw it with a write token; anyone else needs to approve."""
    was, lifted = services.review.reject(pending_id, holder.actor, body.reason,
                                         APPROVE in holder.rights)
    return {"rejected": was.as_dict(), "lifted": [e.as_dict() for e in lifted],
            "by": holder.actor, "banlist_version": services.store.version}
