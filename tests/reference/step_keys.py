"""The reserved step keys as the reference model applies them (the engine's runner gates
steps itself; app/config/step_keys.py only validates them into a StepPolicy)."""
from __future__ import annotations

from app.config.step_keys import StepPolicy


def runs_at(policy: StepPolicy, now: float) -> bool:
    """Enabled, and `now` in [valid_from, valid_until)."""
    return (policy.enabled and (policy.valid_from is None or now >= policy.valid_from)
            and (policy.valid_until is None or now < policy.valid_until))
