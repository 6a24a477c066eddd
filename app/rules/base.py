"""What every built-in rule's declaration shares: its Params base and its constructor."""
from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from app.phases import Phase


class Params(BaseModel):
    """Base of each rule's parameters; a rule with none uses it as is."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


P = TypeVar("P", bound=BaseModel)


class BuiltinRule(Generic[P]):
    """A built-in rule as the control plane knows it: its name, the phases it may run in
    and its parameters (`Params`, of which `params` is an instance: P). What it does to a
    page is the engine's business (crates/engine/src/rules/<name>.rs); an instance is the
    rule of one configured step.
    """

    name: ClassVar[str]
    phases: ClassVar[frozenset[Phase]]
    Params: ClassVar[type[BaseModel]] = Params

    def __init__(self, params: P, phase: Phase) -> None:
        self.params = params
        self.phase = phase
