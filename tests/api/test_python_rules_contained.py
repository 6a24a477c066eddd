"""Python rules that sleep, block on a socket, spin or raise hostile text, against a live
`rearrange serve` (CONTRACT "Python rules", "Time:"): each request is answered by its
deadline as its step's on_error says, its neighbours and /healthz are not held up, the
worker recovers by itself, and SIGTERM still stops it.

Timings are loose for a loaded CI: what should take 0.1 s must take under 1.5 s, and a
request that would hang is cut off by the client (`TIMEOUT`) so the test fails, not hangs.
"""
from __future__ import annotations

import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import PLUGINS, ROOT
from tests.redis_server import ServeProcess

PROMPT = 1.5  # seconds: what should take ~0.1 s (the deadline is the default 100 ms)
TIMEOUT = 5.0  # the client's: a request that would hang fails the test instead
CONFIG = """plugins: [rr_hostile]
profiles:
  default: {trim: [depth]}
  sleepy: {pre-filter: [{sleeper: {seconds: 2}}]}
  sleepy_open: {rerank: [{sleeper: {seconds: 2}}]}
  reader: {pre-filter: [{socket_reader: {seconds: 2, timeout_ms: 30}}]}
  spin: {rerank: [spinner]}
  forger: {pre-filter: [forger]}
"""
PAGE = {"query": {"text": "q"},
        "documents": [{"id": f"d{i}", "url": f"https://h{i}.example/", "score": 3.0 - i}
                      for i in range(3)]}


def serve(tmp_path: Path, grace_ms: int) -> ServeProcess:
    config = tmp_path / "rules.yaml"
    config.write_text(CONFIG)
    return ServeProcess(ROOT, tmp_path, {
        "REARRANGE_CONFIG": str(config), "REARRANGE_BANLIST_PATH": str(tmp_path / "b.jsonl"),
        "REARRANGE_BANLIST_SEED": "", "REARRANGE_CONFIG_POLL_SECONDS": "0",
        "REARRANGE_PYTHON_RULE_GRACE_MS": str(grace_ms), "REDIS_URL": "",
        "PYTHONPATH": str(PLUGINS)})


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = serve(tmp_path_factory.mktemp("contained"), grace_ms=200)
    yield proc
    proc.stop()


def timed(client: httpx.Client, method: str, path: str, **kwargs) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    r = client.request(method, path, timeout=TIMEOUT, **kwargs)
    return time.perf_counter() - started, r


def rerank(client: httpx.Client, profile: str) -> tuple[float, httpx.Response]:
    return timed(client, "POST", "/v1/rerank", json={**PAGE, "profile": profile})


def counted(client: httpx.Client, rule: str, event: str) -> float:
    text = client.get("/metrics", timeout=TIMEOUT).text
    m = re.search(rf'rearrange_python_rule_events_total{{event="{event}",rule="{rule}"}} (\S+)',
                  text)
    return float(m[1]) if m else 0.0


def test_sleeping_and_blocked_rules_answer_by_their_deadline_and_hold_up_no_one(server):
    with httpx.Client(base_url=server.base) as client, ThreadPoolExecutor(6) as pool:
        # the server is the module's: its counters hold the tests' before this one
        before = {rule: counted(client, rule, "timeout") for rule in ("sleeper", "socket_reader")}
        sleepers = [pool.submit(rerank, client, p) for p in ("sleepy", "sleepy_open", "reader")]
        time.sleep(0.02)  # the sleepers are in: their neighbours come after
        neighbour = pool.submit(rerank, client, "default")
        health = pool.submit(timed, client, "GET", "/healthz")
        for call in [*sleepers, neighbour, health]:
            took, r = call.result()
            assert took < PROMPT, (took, r.request.url, r.text)
        closed = [sleepers[0].result()[1], sleepers[2].result()[1]]
        for rule, r in zip(("sleeper", "socket_reader"), closed, strict=True):
            assert r.status_code == 503
            assert r.json() == {"error": "rule_failed", "rule": rule, "phase": "pre-filter",
                                "problem": "timeout"}
        page = sleepers[1].result()[1].json()  # open: the page as the rule received it
        assert [d["id"] for d in page["documents"]] == ["d0", "d1", "d2"]
        assert page["skipped"] == [{"rule": "sleeper", "phase": "rerank", "reason": "error"}]
        assert neighbour.result()[1].status_code == 200
        assert counted(client, "sleeper", "timeout") - before["sleeper"] == 2
        assert counted(client, "socket_reader", "timeout") - before["socket_reader"] == 1


def test_a_spinning_rule_is_answered_by_its_deadline_then_interrupted(server):
    with httpx.Client(base_url=server.base) as client:
        interrupted = counted(client, "spinner", "interrupted")  # by the module's tests before
        abandoned = counted(client, "spinner", "abandoned")
        # the rule threads are free (the tests before may have left sleepers on them): the
        # spinner runs, rather than waiting in the queue past its time and never running
        deadline = time.monotonic() + 30
        while client.get("/readyz", timeout=TIMEOUT).json()["python_rules"]["busy"]:
            assert time.monotonic() < deadline, "the rule threads never came free"
            time.sleep(0.05)
        took, r = rerank(client, "spin")
        assert took < PROMPT and r.status_code == 200, (took, r.text)
        assert r.json()["skipped"] == [{"rule": "spinner", "phase": "rerank", "reason": "error"}]
        # it spins on (its grace is 200 ms): the worker still answers everyone
        for method, path, profile in (("GET", "/healthz", None), ("GET", "/metrics", None),
                                      ("POST", "/v1/rerank", "default")):
            body = {"json": {**PAGE, "profile": profile}} if profile else {}
            took, r = timed(client, method, path, **body)
            assert took < PROMPT and r.status_code == 200, (path, took)
        deadline = time.monotonic() + TIMEOUT
        while counted(client, "spinner", "interrupted") < interrupted + 1:
            assert time.monotonic() < deadline, "the spinner was never interrupted"
            time.sleep(0.05)
        assert counted(client, "spinner", "abandoned") == abandoned  # stopped, not given up
        ready = client.get("/readyz", timeout=TIMEOUT).json()
        assert ready["ready"] and not ready["python_rules"]["at_cap"]
        took, r = rerank(client, "default")
        assert took < PROMPT and r.status_code == 200
    assert "python rule spinner still ran 200 ms after its timeout: interrupted" in \
        server.log.read_text()


def test_what_a_rule_raises_is_escaped_in_the_body_and_the_log(server):
    with httpx.Client(base_url=server.base) as client:
        _, r = rerank(client, "forger")
    assert r.status_code == 503
    assert r.json()["problem"] == "raised ValueError: bad\\nINFO:     rearrange: forged line" \
                                  "\\x1b[2J"
    deadline = time.monotonic() + TIMEOUT
    while "rule forger in pre-filter" not in (log := server.log.read_text()):
        assert time.monotonic() < deadline, "the failure was never logged"
        time.sleep(0.05)
    assert not [line for line in log.splitlines() if "forged line" in line
                and not line.startswith("  | ") and "\\n" not in line], log[-2000:]


def test_sigterm_stops_the_server_while_a_rule_spins(tmp_path):
    proc = serve(tmp_path, grace_ms=30_000)  # the spinner is neither interrupted nor abandoned
    try:
        with httpx.Client(base_url=proc.base) as client:
            # A spinner that has not started by the request's 100 ms deadline is dropped
            # from the queue unrun (on a loaded CI host it was, once): ask again until one
            # runs, so that SIGTERM meets a rule thread that is busy.
            deadline = time.monotonic() + 30
            while True:
                took, r = rerank(client, "spin")
                assert took < PROMPT and r.status_code == 200
                if client.get("/readyz", timeout=TIMEOUT).json()["python_rules"]["busy"]:
                    break
                assert time.monotonic() < deadline, "no spinner ever started"
        proc.proc.send_signal(signal.SIGTERM)
        try:
            proc.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail("SIGTERM did not stop the server while a rule spun")
    finally:
        proc.stop()
