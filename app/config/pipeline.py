"""A profile's pipeline as the config declares it: phases, steps and the rule of each step.

The loader (app/config/load.py) builds it and app/config/spec.py compiles it into the JSON the Rust
engine runs (crates/engine/src/runner.rs). The Python runner it replaced is the reference
model, tests/reference/pipeline.py.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol, get_args

from app.config.step_keys import StepPolicy


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


class Rule(Protocol):
    """The rule of one configured step: which rule, in which phase, with what parameters.

    A built-in rule's class (app/rules/) or a Python rule's adapter (app/config/plugins.py).
    """

    @property
    def name(self) -> str: ...

    phase: Phase
    params: Any  # the validated Params (a pydantic model), or a Python rule's plain dict


@dataclass(frozen=True, slots=True)
class Step:
    """A configured rule in a phase, the experiment that gates it, and per-variant rules.

    `variants` holds the rule built with a treatment variant's parameter overrides (built at
    config load); a variant not in it runs `rule`. Control, outside and holdout shadow `rule`.
    """

    rule: Any  # a Rule; the reference model puts its own runnable rules here (tests/reference)
    experiment: str | None = None
    variants: Mapping[str, Any] = field(default_factory=dict)
    policy: StepPolicy = StepPolicy()  # reserved keys: on_error, enabled, validity window


class Pipeline:
    """An immutable, ordered list of steps per phase for one profile."""

    __slots__ = ("profile", "phases")

    def __init__(self, profile: str, phases: Sequence[tuple[Phase, Sequence[Step]]]) -> None:
        self.profile = profile
        self.phases = tuple((phase, tuple(steps)) for phase, steps in phases)

    def rules(self) -> list[tuple[Phase, Step]]:
        """Every (phase, step) in run order."""
        return [(phase, step) for phase, steps in self.phases for step in steps]
