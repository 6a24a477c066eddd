"""A simulated user population through the impression store: pages recorded as a request
path hands them over, clicks sent as feedback, the results read after every few
impressions. A known click margin is decided with its sign; an A/A comparison stays
`continue` over every peek on all but a share of the seeds within the test's alpha."""
from __future__ import annotations

import random

from app.experiments.feedback import MemoryImpressions
from app.experiments.impressions import Impression, Team
from app.experiments.results import interleaving
from app.experiments.sequential import ALPHA
from tests.experiments.test_feedback_store import Events


def run(seed: int, treatment_click: float, control_click: float, impressions: int,
        every: int) -> list[str]:
    """The decisions read every `every` impressions of one experiment: each page has 6
    documents, the teams alternating from a coin's first pick (as team-draft's rounds do);
    a user clicks each document with its team's probability."""
    rng = random.Random(seed)
    store = MemoryImpressions(3600.0, 1 << 26, Events(), clock=lambda: 0.0)
    decisions = []
    for n in range(impressions):
        first: Team = "control" if rng.random() < 0.5 else "treatment"
        second: Team = "treatment" if first == "control" else "control"
        teams = tuple((f"d{i}", first if i % 2 == 0 else second) for i in range(6))
        store.record([Impression(f"r{n}", "exp", f"u{n}", 0.0, teams)])
        clicked = [doc for doc, team in teams if rng.random() < (
            treatment_click if team == "treatment" else control_click)]
        store.feedback(f"r{n}", clicked)
        if (n + 1) % every == 0:
            counts = store.counts("exp")
            assert counts is not None
            decisions.append(interleaving("exp", counts, "replica")["decision"])
    return decisions


def test_a_known_margin_is_decided_with_its_sign():
    for seed in range(5):
        better = run(seed, 0.14, 0.10, 3000, 50)
        assert "treatment" in better and "control" not in better
        assert better[-1] == "treatment"  # once decided, the evidence only grew
        worse = run(seed, 0.10, 0.14, 3000, 50)
        assert "control" in worse and "treatment" not in worse


def test_a_a_stays_continue_over_many_peeks():
    seeds, false = 200, 0
    for seed in range(seeds):
        decisions = run(10_000 + seed, 0.12, 0.12, 1000, 10)  # read 100 times each
        false += any(d != "continue" for d in decisions)
    assert false / seeds <= ALPHA
