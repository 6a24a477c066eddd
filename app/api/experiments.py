"""Experiment operations: the running experiments and their sample-ratio check."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.api.deps import Wired
from app.api.strict import StrictRoute
from app.config.load import describe
from app.experiments.srm import document, srm

router = APIRouter(prefix="/v1/experiments", tags=["experiments"], route_class=StrictRoute)


@router.get("")
async def list_experiments(services: Wired) -> dict[str, Any]:
    """The experiments of the config in use: unit, layer, slots, salt, variant ranges, rules."""
    return describe(services.config.engine)


@router.get("/srm")
async def sample_ratio(services: Wired) -> dict[str, Any]:
    """Chi-square test of this replica's assignments (all its workers') since start against
    the weights."""
    engine = services.config.engine
    return document(srm(services.metrics.assignment_counts(), engine.designs()),
                    engine.version)
