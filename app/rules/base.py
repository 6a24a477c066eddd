"""What every rule's Params model shares: unknown keys refused, values checked strictly."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Params(BaseModel):
    """Base of each rule's parameters; a rule with none uses it as is."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
