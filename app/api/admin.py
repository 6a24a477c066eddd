"""Operator endpoints: config reload, banlist reseed/adopt after Redis lost or rewound it."""
from __future__ import annotations

import gc
from typing import Any

from fastapi import APIRouter, HTTPException

from app.api.deps import Actor, Service, Store
from app.contract import ReseedIn, UnbanIn
from app.errors import ConfigError

router = APIRouter(prefix="/v1/admin", tags=["admin"])


@router.post("/config/reload")
async def reload_config(service: Service, actor: Actor) -> dict[str, Any]:
    """Reload the rules file now; an invalid file is refused and the old config keeps serving."""
    try:
        changed, version = service.config.reload()
    except ConfigError as exc:
        service.metrics.config_reloads.labels("refused").inc()
        raise HTTPException(422, {"field": exc.place, "problem": exc.problem,
                                  "serving": service.config.engine.version}) from exc
    service.metrics.config_reloads.labels("changed" if changed else "unchanged").inc()
    if changed:
        service.metrics.config_info.set_to_current_time()
        gc.freeze()  # the new Engine lives until the next reload: keep it out of collections
    return {"config_version": version, "changed": changed, "by": actor}


@router.post("/banlist/reseed")
def reseed_banlist(body: ReseedIn, store: Store, actor: Actor) -> dict[str, Any]:
    """Write this replica's banlist back into Redis (Redis came back empty or older)."""
    return {"reseeded": store.reseed(actor, body.reason, body.force), "by": actor}


@router.post("/banlist/adopt")
def adopt_banlist(body: UnbanIn, store: Store, actor: Actor) -> dict[str, Any]:
    """Accept what Redis holds now on this replica, even if older than its copy."""
    return {"adopted": store.adopt(), "by": actor, "reason": body.reason}
