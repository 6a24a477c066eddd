"""Experiment operations: the running experiments and their sample-ratio check."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.api.deps import Service
from app.experiments.srm import SRM_ALPHA, srm

router = APIRouter(prefix="/v1/experiments", tags=["experiments"])


@router.get("")
async def list_experiments(service: Service) -> dict[str, Any]:
    """The experiments of the config in use: unit, layer, slots, salt, variant ranges, rules."""
    engine = service.config.engine
    holdout = engine.holdout
    return {
        "config_version": engine.version,
        "holdout": None if holdout is None else {
            "unit": holdout.unit, "percent": holdout.upper / 100, "salt": holdout.salt or None},
        "experiments": [
            {"name": e.name, "unit": e.unit, "layer": e.layer, "salt": e.salt or None,
             "slots": [e.slots[0] / 100, e.slots[1] / 100] if e.layer else None,
             "variants": {v: list(r) for v, r in e.ranges().items()},
             "params": e.params, "rules": list(e.rules)}
            for e in engine.experiments
        ],
    }


@router.get("/srm")
async def sample_ratio(service: Service) -> dict[str, Any]:
    """Chi-square test of this replica's assignments (all its workers') since start against
    the weights."""
    engine = service.config.engine
    results = srm(service.metrics.assignment_counts(), engine.designs())
    return {"config_version": engine.version, "alpha": SRM_ALPHA,
            "flagged": [r.experiment for r in results if r.flagged],
            "experiments": [r.as_dict() for r in results]}
