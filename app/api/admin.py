"""Operator endpoints: config reload; reseed/adopt of a list or the sanction states after
Redis lost, rewound or forked it."""
from __future__ import annotations

import gc
from typing import Any, Literal

from fastapi import APIRouter, HTTPException

from app.api.deps import Actor, Service
from app.contract import ReseedIn, UnbanIn
from app.errors import ConfigError
from app.service import Rearranger

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


# What Redis holds for this replica, by the name /readyz and the metrics give each
Structure = Literal["banlist", "quarantine", "sanctions"]


def _held(service: Rearranger, structure: str) -> Any:
    """The store (or the sanction states) behind a structure name; 404 when not served."""
    held = {"banlist": service.store, "quarantine": service.quarantine,
            "sanctions": service.sanctions.states if service.sanctions else None}[structure]
    if held is None:
        raise HTTPException(404, {"field": "structure",
                                  "problem": f"this service holds no {structure}"})
    return held


@router.post("/{structure}/reseed")
def reseed(structure: Structure, body: ReseedIn, service: Service,
           actor: Actor) -> dict[str, Any]:
    """Write this replica's copy back into Redis (Redis came back empty, older or forked)."""
    return {"reseeded": _held(service, structure).reseed(actor, body.reason, body.force),
            "by": actor}


@router.post("/{structure}/adopt")
def adopt(structure: Structure, body: UnbanIn, service: Service,
          actor: Actor) -> dict[str, Any]:
    """Accept what Redis holds now on this replica, even if older than its copy."""
    return {"adopted": _held(service, structure).adopt(), "by": actor, "reason": body.reason}
