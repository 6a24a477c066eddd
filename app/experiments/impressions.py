"""Interleaved pages as served: what a request path hands the feedback store.

A request whose unit is in an interleaved experiment (CONTRACT.md, "Interleaving") is
served a team-draft merge of two profiles' pages. Both request paths (the FastAPI
`/v1/rerank` and the native data port) hand each such page to an `ImpressionSink` after
answering, so that `POST /v1/feedback` can later credit a click to the team whose page
the document came from.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

Team = Literal["control", "treatment"]


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
