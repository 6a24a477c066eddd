"""What the config holder and its Redis replica report as they work, through an interface
they own.

`ConfigHolder` (versions.py) and `ConfigReplica` (replica.py) call these methods and know
nothing of who listens: the service passes its Metrics (app/observability/metrics.py), which
implement them, as they implement the stores' `StoreEvents` (app/banlist/events.py).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class ConfigEvents(Protocol):
    """The events of the config in use: loads, swaps, and its sharing through Redis."""

    def config_loaded(self, result: str) -> None:
        """A config load (the file, the reload route, a rollback, another replica's change)
        ended: `result` changed, unchanged or refused."""

    def config_served(self, loaded_at: float) -> None:
        """Another config is served from now on, loaded at `loaded_at` (epoch seconds)."""

    def config_version_of(self, version: Callable[[], str]) -> None:
        """`version()` says which config is served whenever it is asked (at scrape time)."""

    def config_redis_error(self, op: str) -> None:
        """A Redis round trip of config sharing failed; `op` is publish or follow."""


class NoConfigEvents:
    """Nobody listens: what a holder built without the service's Metrics reports to."""

    def config_loaded(self, result: str) -> None:
        return None

    def config_served(self, loaded_at: float) -> None:
        return None

    def config_version_of(self, version: Callable[[], str]) -> None:
        return None

    def config_redis_error(self, op: str) -> None:
        return None
