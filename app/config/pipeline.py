"""A profile's pipeline as the config declares it: phases, steps and the rule of each step.

The loader (app/config/load.py) builds it and app/config/spec.py compiles it into the JSON the Rust
engine runs (crates/engine/src/runner.rs).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.config.step_keys import StepPolicy
from app.phases import Phase


class Rule(Protocol):
    """The rule of one configured step: which rule, in which phase, with what parameters.

    A built-in's BuiltinRule (app/rules.py) or a Python rule's adapter (app/config/plugins.py).
    """

    @property
    def name(self) -> str: ...

    @property
    def phase(self) -> Phase: ...

    @property
    def params(self) -> Any:
        """A built-in's checked params (a dict, defaults filled), a Python rule's Params."""


@dataclass(frozen=True, slots=True)
class Step:
    """A configured rule in a phase, the experiment that gates it, and per-variant rules.

    `variants` holds the rule built with a treatment variant's parameter overrides (built at
    config load); a variant not in it runs `rule`. Control, outside and holdout shadow `rule`.
    """

    # a built-in's BuiltinRule (app/rules.py) or a Python rule instance (app/config/plugins.py)
    rule: Any
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
