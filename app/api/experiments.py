"""Experiment operations: the running experiments, their sample-ratio check, and each
one's results (an interleaved experiment's always-valid test, an A/B one's exposures)."""
from __future__ import annotations

from typing import Any

import redis
from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from app.api.deps import Wired
from app.api.openapi import refusals
from app.api.services import Services
from app.api.strict import StrictRoute
from app.config.load import describe
from app.errors import NotFound
from app.experiments import results as experiment_results
from app.experiments.attribution import Counts
from app.experiments.feedback import MemoryImpressions
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


@router.get("/{name}/results", responses=refusals({
    404: "no experiment of that name in the config in use, and no interleaving tallies "
         "kept for one", 503: "Redis is unreachable (an interleaved experiment's tallies "
                              "are there)"}))
async def results(name: str, services: Wired) -> dict[str, Any]:
    """An interleaved experiment's wins, ties and always-valid decision (the fleet's with
    Redis); an A/B experiment's exposures and triggered exposures per variant (this
    replica's)."""
    return await run_in_threadpool(read_results, services, name)


def read_results(services: Services, name: str) -> dict[str, Any]:
    """The results document of experiment `name` (it may read Redis: off the event loop)."""
    engine = services.config.engine
    design = next((e for e in engine.experiments if e.name == name), None)
    # an experiment with tallies is an interleaved one, whatever the config says of it now
    interleaved = design is not None and design.interleave is not None
    store = services.impressions
    scope = "replica" if isinstance(store, MemoryImpressions) else "fleet"
    try:
        counts = store.counts(name)
    except redis.RedisError:
        if design is None or interleaved:
            raise  # 503: the tallies are in Redis
        counts = None  # an A/B experiment's exposures are this replica's: answered
    if counts is not None or interleaved or design is None:
        if counts is None and design is None:
            raise NotFound("name", f"no experiment {name!r} in the config in use, and no "
                           "interleaving tallies kept for one")
        doc = experiment_results.interleaving(name, counts or Counts(), scope)
    else:
        exposures = experiment_results.exposure_counts(services.metrics.registry.collect())
        doc = experiment_results.ab(name, design.ranges(), exposures)
    return {**doc, "in_config": design is not None, "config_version": engine.version}
