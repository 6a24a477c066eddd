"""The errors only the reference runner raises (the engine returns its failures as values)."""
from __future__ import annotations

from app.errors import RearrangeError


class RuleFailed(RearrangeError):
    """A rule whose `on_error` is `closed` failed: no page is served (the API answers 503)."""

    def __init__(self, rule: str, phase: str, problem: str) -> None:
        super().__init__(f"{rule} in {phase} failed: {problem}")
        self.rule = rule
        self.phase = phase
        self.problem = problem


class RefusedOutput(RearrangeError):  # noqa: N818 (a refusal of what a rule gave back)
    """What a Python rule returned breaks the contract; the message names the problem."""


class DeadlineExceeded(RearrangeError):
    """An optional rule found the request's deadline passed while it ran, and gave up.

    Raised from `Context.check_deadline`; the runner catches it for optional rules only
    (the page goes on unchanged and the rule is reported in `skipped`), so from any other
    rule it escapes as the bug it would be.
    """
