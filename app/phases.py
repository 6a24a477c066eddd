"""The pipeline's vocabulary that every layer shares: the six phases and the age modes.

The config's pipeline (app/config/pipeline.py), the rule catalog (app/rules.py), the
request and response bodies (app/api/contract.py) and the failure policy
(app/config/step_keys.py) all take them from here.
"""
from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args


class Phase(StrEnum):
    """The six phases, in the order they run."""

    PRE_FILTER = "pre-filter"
    RERANK = "rerank"
    DIVERSIFY = "diversify"
    TRIM = "trim"
    ANNOTATE = "annotate"
    POST_FILTER = "post-filter"

    # A Phase equals its value ("rerank"), so it must hash like it too: then a Phase and
    # its name are one dict key (Enum hashes by the member's name, "RERANK", by default).
    __hash__ = str.__hash__


PHASES: tuple[Phase, ...] = tuple(Phase)

# A request's age mode (`query.age_mode`), strictest first: `safe_search` filters by it,
# `empty_result_fallback` relaxes it one step at a time down to its `min_age_mode`.
AgeMode = Literal["strict", "moderate", "off"]
AGE_MODES: tuple[AgeMode, ...] = get_args(AgeMode)
