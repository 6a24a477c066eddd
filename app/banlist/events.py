"""What the stores report as they work, through an interface they own.

A Redis-backed store (the banlist's, the quarantine list's, the sanction states), its
replica, the eviction-policy check and the embedded store's start call these methods and
know nothing of who listens:
the service passes its Metrics (app/observability/metrics.py), which implement them.
"""
from __future__ import annotations

from typing import Protocol


class StoreEvents(Protocol):
    """The events of the stores and their replicas."""

    def redis_error(self, op: str) -> None:
        """A Redis round trip failed; `op` is what it was for (replicate, write, history,
        reseed, sanctions, reading)."""

    def refused(self, structure: str, cause: str) -> None:
        """What Redis holds of `structure` (banlist, quarantine, sanctions) was refused:
        `cause` lost (Redis empty), backward (older or another history) or fork."""

    def resynced(self, cause: str) -> None:
        """A replica loaded Redis's whole copy (cause: start, gap, epoch, reseed, seed,
        adopt)."""

    def applied(self, lag_seconds: float) -> None:
        """A replica applied a change `lag_seconds` after Redis committed it."""

    def bootstrapped(self, structure: str, result: str, seconds: float) -> None:
        """A replica's first copy from a bootstrap snapshot: `loaded` (after `seconds`) or
        `failed` (it loads Redis's copy instead)."""

    def recovered(self, structure: str, result: str, changes: int) -> None:
        """Redis lost `changes` changes a replica held: `reapplied` (written again), or
        `operator` (they cannot be told exactly: left to a reseed, the fleet not ready)."""

    def durability(self, structure: str, result: str, seconds: float) -> None:
        """A write to Redis was acknowledged: confirmed by its replicas (WAIT) after
        `seconds`, not_durable (none in time), or alone (the primary has no replica)."""

    def embedded_start(self, structure: str, result: str) -> None:
        """An embedded store started: from its `snapshot` and the log after it, or from the
        whole log, there being no snapshot (`replay`) or one that its log did not continue
        or that could not be read (`refused`, logged with why)."""

    def policy_checked(self, result: str) -> None:
        """Redis's maxmemory-policy was read: noeviction, evicting, or unknown (refused)."""

