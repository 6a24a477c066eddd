"""Plain-data builders shared by the tests."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.phases import Phase
from tests.reference.pipeline import Context, Doc


def doc(id: str, score: float = 1.0, host: str | None = None, **fields: Any) -> Doc:
    """A reference Doc as its request path builds it, with a URL on `host` (default
    `<id>.example`); tests/sides.py's `document` is the request's own dict."""
    host = host or f"{id}.example"
    url = fields.pop("url", f"https://{host}/{id}")
    return Doc(id=id, url=url, canonical=url.replace("https://", "http://"), host=host,
               score=score, original_score=score, original_position=fields.pop("position", 1),
               **fields)


def ctx(**fields: Any) -> Context:
    """A reference Context with the given fields."""
    return Context(**fields)


def make(rule_cls: type, phase: Phase | None = None, **params: Any):
    """A reference rule built the way the config loader builds its declaration (params
    validated)."""
    return rule_cls(rule_cls.Params.model_validate(params), phase or next(iter(rule_cls.phases)))


def ids(docs: list[Doc]) -> list[str]:
    return [d.id for d in docs]


class Ticking:
    """A clock that reads 0, 1, 2, … (one per read), so a deadline passes at a known read."""

    def __init__(self, step: float = 1.0) -> None:
        self.step = step
        self.reads = 0

    def __call__(self) -> float:
        now = self.reads * self.step
        self.reads += 1
        return now


def answers(url: str, timeout: float) -> bool:
    """Whether GET `url` answers 200 within `timeout` seconds (a server starting up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return True
        except httpx.TransportError:
            time.sleep(0.1)
    return False


def until(cond: Callable[[], object], seconds: float = 10.0) -> None:
    """Wait until `cond()` is true; fail the test after `seconds`."""
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {seconds} s")
        time.sleep(0.05)
