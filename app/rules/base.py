"""What every built-in rule's declaration shares: its Params base and its constructor."""
from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from app.config.pipeline import Phase


class Params(BaseModel):
    """Base of each rule's parameters; a rule with none uses it as is."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class BuiltinRule:
    """A built-in rule as the control plane knows it: its name, the phases it may run in
    and its parameters. What it does to a page is the engine's business
    (crates/engine/src/rules/<name>.rs); an instance is the rule of one configured step.
    """

    name: ClassVar[str]
    phases: ClassVar[frozenset[Phase]]
    Params: ClassVar[type[BaseModel]] = Params

    def __init__(self, params: BaseModel, phase: Phase) -> None:
        self.params = params
        self.phase = phase
