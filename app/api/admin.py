"""Operator endpoints: the config (served, earlier versions, reload, rollback); reseed/adopt
of a list or the sanction states after Redis lost, rewound or forked it."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Depends, HTTPException, Query, Response

from app import _engine
from app.api import errors
from app.api.contract import ReseedIn, RollbackIn, TryIn
from app.api.deps import Actor, AdminReader, Wired, known_query
from app.api.openapi import WRITES, refusals, schema_ref
from app.api.services import Services
from app.api.strict import StrictRoute
from app.banlist.bodies import UnbanIn
from app.config.load import load_bytes
from app.config.spec import with_core
from app.config.versions import ConfigHolder
from app.errors import ConfigError, FieldError, NotFound
from app.replay.capture import recent

router = APIRouter(prefix="/v1/admin", tags=["admin"], route_class=StrictRoute)

log = logging.getLogger(__name__)


@router.get("/config")
async def config(services: Wired, _: AdminReader) -> dict[str, Any]:
    """The config served: version, when, how and by whom it was loaded, and its YAML."""
    holder = services.config
    current = holder.current
    sharing = holder.sharing
    return {**current.as_dict(), "source": current.text, "file_version": holder.file_version,
            "replication": sharing.state() if sharing is not None else None}


@router.get("/config/versions")
async def config_versions(services: Wired, _: AdminReader) -> dict[str, Any]:
    """The configs this replica served, newest (the one served) first."""
    return {"versions": [v.as_dict() for v in services.config.versions()]}


@router.get("/config/versions/{version}",
            responses=refusals({404: "neither this replica nor Redis holds that version"}))
def config_version(version: str, services: Wired, _: AdminReader) -> dict[str, Any]:
    """One earlier version with its YAML (from this replica, else Redis's shared log)."""
    held = services.config.find(version)
    if held is None:
        raise NotFound("version", f"no config version {version!r} is held")
    return {**held.as_dict(), "source": held.text}


# Plain `def`s, run in the thread pool: with Redis, a change is published before it returns.
@router.post("/config/reload", responses=refusals({
    422: "the file is invalid: `field` names the place, `serving` the version kept",
    503: "Redis is unreachable: the change could not be shared"}))
def reload_config(services: Wired, actor: Actor) -> dict[str, Any]:
    """Reload the rules file now; an invalid file is refused and the old config keeps serving.
    A file whose content is not new keeps what is served (a rollback stays)."""
    try:
        changed, version = services.config.reload("reload", actor)
    except ConfigError as exc:
        raise _refused(422, exc, services.config) from exc
    return {"config_version": version, "changed": changed, "by": actor,
            "file_version": services.config.file_version}


@router.post("/config/rollback", responses=refusals({
    404: "no such version is held", 409: "that version cannot be served (`serving` says what is)",
    503: "Redis is unreachable: the change could not be shared"}))
def rollback_config(body: RollbackIn, services: Wired, actor: Actor) -> dict[str, Any]:
    """Serve an earlier version now (with Redis: on every replica)."""
    try:
        changed, served = services.config.rollback(body.version, actor)
    except ConfigError as exc:
        raise _refused(409, exc, services.config) from exc
    return {"config_version": served.version, "changed": changed, "by": actor,
            "loaded_at": served.as_dict()["loaded_at"]}


@router.get("/captures", dependencies=[Depends(known_query)])
def captures(services: Wired, _: AdminReader,
             limit: Annotated[int, Query(ge=1, le=500)] = 50) -> dict[str, Any]:
    """The newest captured requests (REARRANGE_CAPTURE_PATH), newest first, for the
    inspector: `enabled` false and none when capture is off."""
    path = services.settings.capture_path
    if path is None:
        return {"enabled": False, "captures": []}
    return {"enabled": True, "captures": recent(Path(path), limit)}


@router.post("/config/try", responses={
    200: {"description": "the candidate's response to the request, with `explain`",
          "content": {"application/json": {"schema": schema_ref("RerankResponse")}}},
    **refusals({
        400: "the body is not JSON, or one of its objects gives a key twice (`field` names "
             "it: `request.documents[0].url`)",
        413: "a document's text or the page is over its limit (`field` under `request.`)",
        422: "the candidate is invalid (`field` is `config`, the problem names the place), "
             "or the request is (`field` is `request.` and its JSON path)"}),
    503: {"description": "a rule of the candidate whose `on_error` is `closed` failed",
          "content": {"application/json": {"schema": schema_ref("RuleFailed")}}}})
def try_config(body: TryIn, services: Wired, _: Actor) -> Response:
    """Run one request through a candidate config, not served, with the current banlist:
    the candidate's response, explained (what the inspector diffs against the served page).

    A write token. The candidate imports nothing: its `plugins:` may name only modules
    the served config loaded (another is a 422 naming `plugins[i]`). A config the service
    would refuse is a 422 naming `config` and the place; a request it would refuse, its
    4xx naming `request.<field>`."""
    try:
        # Its own metrics: a try is nobody's traffic.
        candidate = with_core(load_bytes(body.config.encode(), source="config",
                                         served=services.config.engine.plugins),
                              _engine.EngineMetrics())
    except ConfigError as exc:
        raise FieldError("config", f"{exc.place}: {exc.problem}") from None
    status, answered = services.rearranger.rerank(orjson.dumps(body.request), explain=True,
                                      candidate=candidate)
    if 400 <= status < 500:
        refused = orjson.loads(answered)
        field = "request" if refused["field"] is None else f"request.{refused['field']}"
        return Response(errors.body(status, field, refused["problem"]), status,
                        media_type="application/json")
    return Response(answered, status, media_type="application/json")


def _refused(status: int, exc: ConfigError, holder: ConfigHolder) -> HTTPException:
    return HTTPException(status, {"field": exc.place, "problem": exc.problem,
                                  "serving": holder.engine.version})


# What Redis holds for this replica, by the name /readyz and the metrics give each
Structure = Literal["banlist", "quarantine", "review", "sanctions"]


def _held(services: Services, structure: str) -> Any:
    """The store (or the sanction states) behind a structure name; 404 when not served."""
    held: Any = {"banlist": services.store, "quarantine": services.quarantine,
                 "review": services.review.pending,
                 "sanctions": services.sanctions.states}[structure]
    if held is None:
        raise HTTPException(404, {"field": "structure",
                                  "problem": f"this service holds no {structure}"})
    return held


@router.post("/{structure}/reseed", responses=refusals({
    **WRITES, 404: "this service holds no such structure",
    409: "nothing to reseed (the embedded store), or Redis holds another history: `force`"}))
def reseed(structure: Structure, body: ReseedIn, services: Wired,
           actor: Actor) -> dict[str, Any]:
    """Write this replica's copy back into Redis (Redis came back empty, older or forked)."""
    return {"reseeded": _held(services, structure).reseed(actor, body.reason, body.force),
            "by": actor}


@router.post("/{structure}/adopt", responses=refusals({
    **WRITES, 404: "this service holds no such structure",
    409: "nothing to adopt (the embedded store), or Redis holds nothing usable"}))
def adopt(structure: Structure, body: UnbanIn, services: Wired,
          actor: Actor) -> dict[str, Any]:
    """Accept what Redis holds now on this replica, even if older than its copy."""
    return {"adopted": _held(services, structure).adopt(), "by": actor, "reason": body.reason}


@router.delete("/{structure}/lost/{replica:path}", responses=refusals({
    **WRITES, 404: "no such structure here, or that replica holds no loss mark",
    409: "the embedded store, or this replica's own mark (adopt or reseed instead)"}))
def forget_loss(structure: Structure, replica: str, body: UnbanIn, services: Wired,
                actor: Actor) -> dict[str, Any]:
    """Forget the loss mark of a replica gone for good (`<structure>_missing` in /readyz
    names it): the changes it held are accepted as lost, and the fleet ready again."""
    forgotten = _held(services, structure).forget_loss(replica)
    log.warning("%s: %s forgot the loss mark of %s (%s): %s", structure, actor, replica,
                forgotten.get("why"), body.reason)
    return {"forgotten": forgotten, "by": actor, "reason": body.reason}
