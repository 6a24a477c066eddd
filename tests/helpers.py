"""Plain-data builders shared by the tests."""
from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families


class Ticking:
    """A clock that reads 0, 1, 2, … (one per read), so a deadline passes at a known read."""

    def __init__(self, step: float = 1.0) -> None:
        self.step = step
        self.reads = 0

    def __call__(self) -> float:
        now = self.reads * self.step
        self.reads += 1
        return now


def answers(url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> bool:
    """Whether GET `url` answers 200 within `timeout` seconds (a server starting up); no
    as soon as `proc`, the server, has exited (a port taken, a bad config)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (proc is None or proc.poll() is None):
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


def counted(client, name: str, **labels: str) -> float:
    """The value of the series `name` with `labels` in the client's /metrics (0 when
    absent), read with prometheus_client's own parser."""
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v
                                           for k, v in labels.items()):
                return sample.value
    return 0.0
