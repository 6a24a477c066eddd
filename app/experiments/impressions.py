"""Interleaved pages as served: what a request path hands the feedback store.

A request whose unit is in an interleaved experiment (CONTRACT.md, "Interleaving") is
served a team-draft merge of two profiles' pages. Both request paths (the FastAPI
`/v1/rerank` and the native data port) hand each such page to an `ImpressionSink` after
answering, so that `POST /v1/feedback` can later credit a click to the team whose page
the document came from.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, cast

Team = Literal["control", "treatment"]
log = logging.getLogger("rearrange.impressions")


@dataclass(frozen=True, slots=True)
class Impression:
    """One interleaved page: its request, experiment and unit, when it was answered
    (epoch seconds), and each served document's team in served order."""

    request_id: str
    experiment: str
    unit: str
    at: float
    teams: tuple[tuple[str, Team], ...]


class ImpressionSink(Protocol):
    """Takes served impressions; never blocks a request path for long (a store batches)."""

    def record(self, impressions: Sequence[Impression]) -> None: ...


def from_engine(raw: tuple[str, str, str, float, list[tuple[str, str]]]) -> Impression:
    """An impression as the engine gives it (`Engine.rerank`, `DataPlane.drain`)."""
    request_id, experiment, unit, at, teams = raw
    return Impression(request_id, experiment, unit, at,
                      tuple((doc, cast("Team", team)) for doc, team in teams))


def hand_on(sink: ImpressionSink, impressions: Sequence[Impression],
            dropped: Callable[[int], None]) -> None:
    """`sink.record(impressions)`; a sink that raises loses them: `dropped(n)` counts them
    and the failure is logged with its cause, and the request path goes on."""
    try:
        sink.record(impressions)
    except Exception:  # noqa: BLE001 (counted and logged; a request is never failed by it)
        dropped(len(impressions))
        log.exception("impressions: %d not recorded, the sink failed", len(impressions))
