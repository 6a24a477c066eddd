"""The app's background loop: what a replica does between requests, once a poll interval."""
from __future__ import annotations

import asyncio
import functools
import logging

from app.api import health
from app.api.services import Services
from app.banlist.embedded.store import EmbeddedStore
from app.banlist.index import FilterKeeper
from app.errors import ConfigError

log = logging.getLogger("rearrange")


async def housekeeping(services: Services, poll_seconds: float) -> None:
    """Hot-reload the config on file change, sweep expired bans, write an embedded store's
    snapshot when due, publish a banlist sites filter made again aside, and refresh this
    worker's gauges (another worker may answer the next scrape), once a poll interval.

    One failing step is logged and counted, and the loop goes on: a task that died here
    would silently stop both hot reload and TTL sweeps until the next restart.
    """
    if poll_seconds <= 0:
        return
    keep_filters = functools.partial(_keep_filters,
                                     {"banlist": FilterKeeper(), "quarantine": FilterKeeper()})
    while True:
        await asyncio.sleep(poll_seconds)
        for task, step in (("config", _poll_config), ("sweep", _sweep),
                           ("snapshot", _keep_snapshots), ("banlist_filter", keep_filters),
                           ("gauges", _refresh_gauges)):
            try:
                await step(services)
            except Exception:
                services.metrics.housekeeping_errors.labels(task).inc()
                log.exception("housekeeping: %s failed; retrying next poll", task)


async def _poll_config(services: Services) -> None:
    if not services.config.changed_on_disk():
        return
    try:  # in a thread: with Redis, a change is published before the poll goes on
        await asyncio.to_thread(services.config.reload)
    except ConfigError as exc:
        log.error("config reload refused, still serving %s: %s",
                  services.config.engine.version, exc)


async def _sweep(services: Services) -> None:
    expired = await asyncio.to_thread(services.store.sweep)  # Redis: a round trip
    expired += await asyncio.to_thread(services.quarantine.sweep)
    expired += await asyncio.to_thread(services.review.pending.sweep)
    if expired:
        log.info("banlist: %d entries expired", expired)


async def _keep_snapshots(services: Services) -> None:
    """Write each embedded store's snapshot when it is due (EmbeddedStore.keep_snapshot), in
    a thread: the dump of a large list takes seconds, and holds no write off meanwhile."""
    for store in (services.store, services.quarantine, services.review.pending):
        if isinstance(store, EmbeddedStore):
            await asyncio.to_thread(store.keep_snapshot)


async def _keep_filters(keepers: dict[str, FilterKeeper], services: Services) -> None:
    """Publish each banlist index's sites filter made again aside once it is made, and log
    a failure to make one (`FilterKeeper`), in a thread: publishing tells the new filter
    what the batches since its snapshot changed. Never waits for the index's writer: a
    batch holding it publishes the filter itself."""
    for name, index in services.ban_indexes():
        await asyncio.to_thread(keepers[name].poll, name, index)


async def _refresh_gauges(services: Services) -> None:
    services.metrics.refresh(health.gauges(services))
