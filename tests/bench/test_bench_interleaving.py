"""bench/interleaving.py's parts: the team-draft merge and the A/B sample size."""
from __future__ import annotations

import random

import pytest

from bench.interleaving import DEPTH, ab_sample_size, team_draft


def test_team_draft_takes_turns_and_shows_each_document_once():
    rng = random.Random(3)
    for _ in range(200):
        control = rng.sample(range(30), DEPTH)
        treatment = rng.sample(range(30), DEPTH)
        merged = team_draft(control, treatment, rng)
        docs = [d for d, _ in merged]
        assert len(merged) == DEPTH and len(set(docs)) == DEPTH
        for k in range(1, DEPTH + 1):  # after every pick the teams differ by one at most
            picks = [t for _, t in merged[:k]]
            assert abs(picks.count("control") - picks.count("treatment")) <= 1
        for doc, team in merged:  # a team's documents come in its own list's order
            own = control if team == "control" else treatment
            assert doc in own
        for team, own in (("control", control), ("treatment", treatment)):
            mine = [d for d, t in merged if t == team]
            assert mine == sorted(mine, key=own.index)


def test_the_ab_sample_size_is_the_textbook_one():
    # two proportions 0.10 against 0.15, alpha 0.05 two-sided, power 0.8: 686 per group
    # (Fleiss, Statistical Methods for Rates and Proportions, without continuity correction)
    assert ab_sample_size(0.10, 0.15) == pytest.approx(685.6, abs=0.5)
