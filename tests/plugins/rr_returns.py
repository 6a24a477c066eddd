"""A Python rule that returns what the test asks of it: tests/engine/test_plugin_output.py.

`ANSWER[0]` is a function of (documents, context) giving the rule's result, so a test
builds its output from the dicts the rule is handed; each call's arguments are kept in
`HANDED` for the test to read.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

ANSWER: list[Callable[[list[dict], dict], Any]] = []
HANDED: list[tuple[list[dict], dict]] = []


class Returns:
    name = "team_rule"
    phases = {"pre-filter", "rerank", "diversify", "trim", "annotate", "post-filter"}

    def __init__(self, params: dict) -> None:
        pass

    def __call__(self, documents: list[dict], context: dict) -> Any:
        HANDED.append((documents, context))
        return ANSWER[0](documents, context)


RULES = [Returns]
