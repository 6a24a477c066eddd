"""Team-draft attribution: the clicks on one interleaved page, credited to the teams.

Each clicked document's click goes to the team whose page it came from (the impression's
`teams`). Treatment wins the impression if its team got more clicks, control if it did,
a tie if both got the same number (more than none); a page without clicks has no outcome.
Skips are checked like clicks and change nothing: the outcome is the clicks'.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from app.errors import FieldError
from app.experiments.impressions import Impression

Outcome = Literal["control", "treatment", "tie"]
OUTCOMES: tuple[Outcome, ...] = ("control", "treatment", "tie")


def attribute(impression: Impression, clicks: Sequence[str],
              skips: Sequence[str] = ()) -> Outcome | None:
    """The impression's outcome from the documents clicked; FieldError naming the first
    id (`clicks[2]`, `skips[0]`) that was not served on the page, or that is both clicked
    and skipped. A document clicked twice counts once (the clicks are a set)."""
    team_of = dict(impression.teams)
    for i, doc in enumerate(clicks):
        if doc not in team_of:
            raise FieldError(f"clicks[{i}]", f"{doc!r} was not on the page served under "
                             "this request_id")
    clicked = set(clicks)
    for i, doc in enumerate(skips):
        if doc not in team_of:
            raise FieldError(f"skips[{i}]", f"{doc!r} was not on the page served under "
                             "this request_id")
        if doc in clicked:
            raise FieldError(f"skips[{i}]", f"{doc!r} is also among the clicks")
    treatment = sum(team_of[doc] == "treatment" for doc in clicked)
    control = len(clicked) - treatment
    if treatment > control:
        return "treatment"
    if control > treatment:
        return "control"
    return "tie" if clicked else None


@dataclass(slots=True)
class Counts:
    """One experiment's tallies: impressions served, and the outcomes of their feedback
    (each impression's latest feedback only)."""

    impressions: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    feedback: int = 0  # feedback calls taken, replacements included

    def change(self, previous: Outcome | None, outcome: Outcome | None) -> None:
        """An impression's outcome replaced (None: it had none, or has none now)."""
        if previous is not None and self.outcomes[previous] > 0:
            self.outcomes[previous] -= 1
        if outcome is not None:
            self.outcomes[outcome] += 1
        self.feedback += 1


@dataclass(frozen=True, slots=True)
class Taken:
    """A feedback taken: the impression's outcome now and the one it replaced."""

    request_id: str
    experiment: str
    outcome: Outcome | None
    replaced: Outcome | None
