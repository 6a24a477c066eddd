"""Operator endpoints: config reload."""
from __future__ import annotations

import gc
from typing import Any

from fastapi import APIRouter, HTTPException

from app.api.deps import Actor, Service
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
