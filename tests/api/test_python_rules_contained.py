"""Python rules that sleep, block on a socket, spin or raise hostile text, against a live
`rearrange serve` (CONTRACT "Python rules", "Time:"): each request is answered by its
deadline as its step's on_error says, its neighbours and /healthz are not held up, the
rule's process is killed and replaced so the service recovers by itself however many
there are, and SIGTERM stops it and its rule processes.

Timings are loose for a loaded CI: what should take 0.1 s must take under 1.5 s, and a
request that would hang is cut off by the client (`TIMEOUT`) so the test fails, not hangs.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from app.api.serving import GRACE_SECONDS
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
  stuck: {pre-filter: [{sleeper: {seconds: 600}}]}
  polite: {pre-filter: [{talker: {timeout_ms: 1000}}]}
  hog: {pre-filter: [hog]}
"""
PAGE = {"query": {"text": "q"},
        "documents": [{"id": f"d{i}", "url": f"https://h{i}.example/", "score": 3.0 - i}
                      for i in range(3)]}


def serve(tmp_path: Path, **env: str) -> ServeProcess:
    config = tmp_path / "rules.yaml"
    config.write_text(CONFIG)
    return ServeProcess(ROOT, tmp_path, {
        "REARRANGE_CONFIG": str(config), "REARRANGE_BANLIST_PATH": str(tmp_path / "b.jsonl"),
        "REARRANGE_BANLIST_SEED": "", "REARRANGE_CONFIG_POLL_SECONDS": "0", "REDIS_URL": "",
        "PYTHONPATH": str(PLUGINS), **env})


def children(pid: int) -> list[int]:
    """The children of `pid` (none once it has ended)."""
    out = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return []
    for task in tasks:
        try:
            out += [int(child) for child in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):  # the thread ended meanwhile
            continue
    return out


def stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command; None once it has ended."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if fields[0] == "Z" else fields


def rule_processes(pid: int) -> dict[int, float]:
    """The rule processes of the server `pid` (forked by its zygote, one of its children):
    their CPU seconds, by pid."""
    out = {}
    for zygote in children(pid):
        try:
            if b"app.engine.rule_worker" not in Path(f"/proc/{zygote}/cmdline").read_bytes():
                continue
        except (FileNotFoundError, ProcessLookupError):
            continue
        for child in children(zygote):
            if (fields := stat(child)) is not None:
                out[child] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = serve(tmp_path_factory.mktemp("contained"))
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


def test_a_spinning_rule_is_answered_by_its_deadline_and_its_process_killed(server):
    with httpx.Client(base_url=server.base) as client:
        killed = counted(client, "spinner", "killed")  # by the module's tests before
        took, r = rerank(client, "spin")
        assert took < PROMPT and r.status_code == 200, (took, r.text)
        assert r.json()["skipped"] == [{"rule": "spinner", "phase": "rerank", "reason": "error"}]
        for method, path, profile in (("GET", "/healthz", None), ("GET", "/metrics", None),
                                      ("POST", "/v1/rerank", "default")):
            body = {"json": {**PAGE, "profile": profile}} if profile else {}
            took, r = timed(client, method, path, **body)
            assert took < PROMPT and r.status_code == 200, (path, took)
        assert counted(client, "spinner", "killed") == killed + 1
        # nothing spins on: the rule processes are back to the limit and idle, none of them
        # burning CPU
        deadline = time.monotonic() + TIMEOUT
        while (rules := client.get("/readyz", timeout=TIMEOUT).json()["python_rules"]) != {
                "processes": 4, "busy": 0, "starting": 0, "queued": 0, "limit": 4}:
            assert time.monotonic() < deadline, rules
            time.sleep(0.05)
        while len(first := rule_processes(server.proc.pid)) != 4:  # the killed one is gone
            assert time.monotonic() < deadline, first
            time.sleep(0.05)
        time.sleep(0.5)
        later = rule_processes(server.proc.pid)
        assert set(first) == set(later)
        assert sum(later.values()) - sum(first.values()) < 0.2, (first, later)


def test_rules_stuck_for_good_cost_nothing_once_answered(server):
    """More stuck calls than rule processes (and than the abandoned threads the executor
    once gave up before it needed a restart): each is killed at its request's deadline,
    and afterwards a Python rule that answers runs as usual, without a restart."""
    with httpx.Client(base_url=server.base) as client, ThreadPoolExecutor(8) as pool:
        before = {event: counted(client, "sleeper", event) for event in ("timeout", "killed")}
        stuck = list(pool.map(lambda _: rerank(client, "stuck"), range(24)))
        for took, r in stuck:
            assert took < PROMPT and r.status_code == 503, (took, r.text)
            assert r.json()["problem"] == "timeout"
        deadline = time.monotonic() + 10
        while True:  # the killed processes' successors start in the background
            took, r = rerank(client, "polite")
            assert took < PROMPT, took
            if r.status_code == 200:
                break
            assert time.monotonic() < deadline, r.text
        records = r.json()["documents"]
        assert r.json().get("skipped") is None and len(records) == 3
        # each call timed out: the ones that ran were killed, the others (their processes
        # still starting) waited in vain and never ran
        assert counted(client, "sleeper", "timeout") == before["timeout"] + 24
        assert counted(client, "sleeper", "killed") >= before["killed"] + 4
        assert client.get("/readyz", timeout=TIMEOUT).json()["ready"]


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


@pytest.mark.parametrize(("stop", "profile"), [(signal.SIGTERM, "stuck"),
                                               (signal.SIGKILL, "hog")], ids=["term", "kill"])
def test_no_rule_process_outlives_the_server_even_while_a_rule_runs(tmp_path, stop, profile):
    # no deadline and a long rule time: the rule still runs when the signal comes. TERM
    # drains (the request is in flight until the drain's end); KILL ends the server with a
    # rule holding the GIL in C, where no thread of its process can run: the kernel ends
    # the zygote with the server and the rule processes with the zygote
    proc = serve(tmp_path, REARRANGE_DEADLINE_MS="0", REARRANGE_PYTHON_RULE_TIMEOUT_MS="60000",
                 REARRANGE_DRAIN_SECONDS="0")
    try:
        with httpx.Client(base_url=proc.base) as client, ThreadPoolExecutor(1) as pool:
            pool.submit(rerank, client, profile)  # runs for good, or until it is killed
            deadline = time.monotonic() + 30
            while not client.get("/readyz", timeout=TIMEOUT).json()["python_rules"]["busy"]:
                assert time.monotonic() < deadline, "the rule never started"
                time.sleep(0.05)
            zygotes = children(proc.proc.pid)
            forked = rule_processes(proc.proc.pid)
            assert len(forked) == 4 and zygotes
            proc.proc.send_signal(stop)
            try:
                proc.proc.wait(GRACE_SECONDS + TIMEOUT)
            except subprocess.TimeoutExpired:
                pytest.fail("the server did not stop while a rule ran")
        deadline = time.monotonic() + TIMEOUT
        while left := [p for p in [*forked, *zygotes] if stat(p) is not None]:
            assert time.monotonic() < deadline, f"rule processes outlived the server: {left}"
            time.sleep(0.05)
    finally:
        proc.stop()
