"""What the sanctions service reports as it works, through an interface it owns.

The service calls these methods and knows nothing of who listens: the app passes its
Metrics (app/observability/metrics.py), which implement them, as the stores' events
(app/banlist/events.py).
"""
from __future__ import annotations

from typing import Protocol


class SanctionEvents(Protocol):
    """The events of the sanctions service."""

    def sanction_moved(self, from_state: str, to_state: str) -> None:
        """A host's sanction state changed (an observation or an appeal)."""

    def sanction_stale(self) -> None:
        """An observation was dropped: one at least as recent was applied before it."""

    def sanction_suppressed(self, would_be: str) -> None:
        """A pinned host scored high enough to be quarantined or banned (`would_be`): the
        pin held it clean."""
