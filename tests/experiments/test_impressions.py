"""The in-memory impression sink and the hand-over both request paths use: a sink that
raises loses its impressions counted and logged, never failing the request path."""
from __future__ import annotations

import logging
from collections.abc import Sequence

from app.experiments.impressions import Impression, from_engine, hand_on


def impression(n: int) -> Impression:
    return from_engine((f"r{n}", "spam_v8", "u-1", 1.5, [("d1", "control"),
                                                         ("d2", "treatment")]))


def test_from_engine_keeps_the_served_order():
    got = impression(1)
    assert got == Impression("r1", "spam_v8", "u-1", 1.5,
                             (("d1", "control"), ("d2", "treatment")))


class Failing:
    def record(self, impressions: Sequence[Impression]) -> None:
        raise OSError("disk full")


def test_a_failing_sink_loses_them_counted_and_logged(caplog):
    dropped: list[int] = []
    with caplog.at_level(logging.ERROR, logger="rearrange.impressions"):
        hand_on(Failing(), [impression(1), impression(2)], dropped.append)
    assert dropped == [2]
    [record] = caplog.records
    assert "2 not recorded" in record.getMessage() and record.exc_info is not None
