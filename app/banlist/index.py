"""The banlist index: `BanIndex` of the Rust engine (crates/engine/src/banlist/).

The stores hand it their changes (`add`, `remove`, `set_group`, or a batch with `apply` /
`add_many`); each call is published whole, so a request never sees half a batch. Requests
ask `host_verdict`, `match_url`, `match`; the admin side `explain`, `page`, `get`, …
The Python index it replaced is kept as the index's model in tests/reference/.

The index makes its sites filter again on a thread of its own once a quarter of its names
have gone (docs/banlist.md); `FilterKeeper` is the housekeeping's side of that.
"""
from __future__ import annotations

import logging
from typing import TypedDict

from app._engine import BanIndex
from app.banlist.model import Match

__all__ = ["BanIndex", "FilterKeeper", "FilterState", "Match"]

log = logging.getLogger(__name__)


class FilterState(TypedDict):
    """`BanIndex.filter_state`: the sites filter's names gone per name held, the times it
    was made again, the times that failed and why the last one did."""

    gone: float
    refreshed: int
    failures: int
    failure: str | None


class FilterKeeper:
    """Once a poll: publish a sites filter made again aside as soon as it is made (an index
    that stops changing would otherwise serve the old one until its next batch), and log
    each failure to make one with its cause, once (the index counts them; its next batch
    of changes tries again)."""

    def __init__(self) -> None:
        self._seen: tuple[int, int] = (0, 0)  # (serial of the index, failures logged)

    def poll(self, name: str, index: BanIndex) -> FilterState:
        index.publish_ready_filter()
        state = index.filter_state
        serial, logged = self._seen
        if serial != index.serial:
            logged = 0  # a new index (a resync's): its count starts again
        if state["failures"] > logged:
            log.warning("%s: the sites filter could not be made again (%d time(s)): %s; "
                        "the old filter serves on (lookups stay right, a clean site is "
                        "probed more often) and the next batch of changes tries again",
                        name, state["failures"], state["failure"])
        self._seen = (index.serial, state["failures"])
        return state
