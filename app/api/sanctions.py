"""The sanctions API: the anti-spam score feed, a host's state and history, appeals."""
from __future__ import annotations

from typing import Annotated, Any

import redis
from fastapi import APIRouter, Body, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.api.deps import Actor, Reader
from app.api.openapi import WRITES, refusals
from app.api.strict import StrictRoute
from app.banlist.model import normalize
from app.errors import BanlistError, FieldError, Interrupted, Unavailable
from app.sanctions.service import Sanctions

router = APIRouter(prefix="/v1/sanctions", tags=["sanctions"], route_class=StrictRoute)
MAX_BATCH = 10_000


async def sanctions(request: Request) -> Sanctions:
    found: Sanctions = request.app.state.services.sanctions  # app_of put them there
    return found


Service = Annotated[Sanctions, Depends(sanctions)]


class ScoresIn(BaseModel):
    """A batch from the anti-spam pipeline; items are checked one by one, not as a whole."""

    model_config = ConfigDict(extra="forbid")

    observations: list[Any] = Field(min_length=1, max_length=MAX_BATCH)


class AppealIn(BaseModel):
    """Clear a host: why, and for how long it stays pinned clean."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    reason: str = Field(min_length=1, max_length=1000)
    pin_seconds: float | None = Field(
        default=None, gt=0, le=10 * 365 * 86400,
        description="how long the host stays pinned clean; absent: the service's appeal "
                    "immunity (REARRANGE_SANCTIONS_APPEAL_PIN_DAYS, 90 days by default)")
    permanent: StrictBool = Field(
        default=False, description="pinned clean for good (not with pin_seconds)")
    force: StrictBool = Field(
        default=False, description="clear a host the sanctions never observed (refused "
                                   "otherwise, as a likely typo)")


# Plain `def` handlers: they fsync or talk to Redis, so FastAPI runs them in its thread
# pool instead of stalling every rerank on the event loop (a 2,000-item feed took 1.5 s).
@router.post("/scores", responses=refusals({
    **WRITES, 503: "Redis (or the local file) failed partway: the body says what was committed"}))
def feed(body: ScoresIn, service: Service, actor: Actor) -> dict[str, Any]:
    """Apply spam scores `{host or domain, spam_score, observed_at}`; bad items are refused.

    `suppressed` lists the items an appeal's pin held back: a pinned host that scored high
    enough to be quarantined or banned (`would_be`), `why`, and `until` when (ISO 8601;
    null: for good). They are counted in rearrange_sanction_suppressed_observations_total.

    A store failing partway answers its error (503 for Redis) with the same fields, which
    say item by item what was committed (`not_applied`, `pending`)."""
    try:
        return service.feed(body.observations, actor)
    except Interrupted as exc:
        raise _failed(exc) from exc


@router.get("/{host}", responses=refusals({503: "Redis is unreachable"}))
def host_state(host: str, service: Service, _: Reader) -> dict[str, Any]:
    """A host's (or domain's) sanction state, pin and every transition with actor and reason;
    `suppressed`, the sanction its pin holds back on its last score; `parents`, its parent
    domains' states that are not clean (`covers_subdomains`: scored as a domain); and
    `inherited`, the ban and quarantine entries covering it through a parent domain or an
    org group."""
    return service.describe(_key(host))


@router.post("/{host}/clear", responses=refusals({
    **WRITES, 409: "the host was never observed (`field`: host; send `force` to clear it "
                   "anyway), or " + WRITES[409],
    422: "a blank reason, a bad pin_seconds, or both pin_seconds and permanent: `field` "
         "names it"}))
def appeal(host: str, service: Service, actor: Actor,
                 body: Annotated[AppealIn, Body()]) -> dict[str, Any]:
    """An appeal: lift the ban or quarantine and pin the host clean (audited with the actor)
    for `pin_seconds`, the service's appeal immunity (90 days by default) or, `permanent`,
    for good. A host never observed is refused (409) unless `force`."""
    if body.permanent and body.pin_seconds is not None:
        raise FieldError("body.permanent", "give pin_seconds or permanent, not both")
    try:
        return service.appeal(_key(host), actor, body.reason, body.pin_seconds,
                              permanent=body.permanent, force=body.force)
    except Interrupted as exc:
        raise _failed(exc) from exc


def _failed(exc: Interrupted) -> FieldError:
    """The store's own error (its class, field and a write id) with what was committed."""
    cause = exc.cause
    if isinstance(cause, FieldError):
        return type(cause)(cause.field, exc.problem, {**cause.extra, **exc.result})
    field = "redis" if isinstance(cause, redis.RedisError) else "storage"
    return Unavailable(field, exc.problem, exc.result)


def _key(host: str) -> str:
    try:
        return normalize("host", host)
    except BanlistError as exc:
        raise BanlistError("host", exc.problem) from None
