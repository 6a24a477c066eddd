"""A network partition between one replica and Redis (tests/netns.py): replica P in a network
namespace of its own, replica Q in the root one, one redis-server; P's link to Redis is cut
(packets dropped, nothing answers, no RST) while Q keeps writing, then healed."""
from __future__ import annotations

import contextlib
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import redis as redispy

from app.banlist.redis.client import connect, reach
from tests.conftest import ROOT
from tests.netns import Namespace, Unavailable
from tests.redis_server import RedisServer, ServeProcess, stop_all

pytestmark = pytest.mark.redis

TOKENS = "tns:t-write"
W = {"Authorization": "Bearer t-write"}
PAGE = {"documents": [{"id": "a", "url": "http://banned.example/1", "score": 2},
                      {"id": "b", "url": "http://fine.example/1", "score": 1}]}
TIMEOUT = 1.0  # REARRANGE_REDIS_TIMEOUT_SECONDS: a reply Redis owes, waited for this long
CONNECT = 0.5  # REARRANGE_REDIS_CONNECT_TIMEOUT_SECONDS
BLOCK = 0.3  # REARRANGE_BANLIST_BLOCK_SECONDS


@pytest.fixture
def partition(tmp_path: Path):
    """(the namespace, the redis-server, Q, P): P runs inside the namespace; both follow
    the Redis at the namespace link's root-side address."""
    with contextlib.ExitStack() as stack:
        try:
            ns = stack.enter_context(Namespace())
        except Unavailable as exc:
            pytest.skip(f"no network namespace here: {exc}")
        server = RedisServer(tmp_path / "redis", appendonly=True,
                             args=("--bind", "127.0.0.1", ns.host)).start()
        stack.callback(server.kill)
        config = tmp_path / "rules.yaml"
        config.write_bytes((ROOT / "config" / "rules.yaml").read_bytes())
        started: list[ServeProcess] = []
        stack.callback(stop_all, started)

        def replica(name: str, inside: bool) -> ServeProcess:
            env = {"REDIS_URL": f"redis://{ns.host}:{server.port}/0",
                   "REARRANGE_CONFIG": str(config), "REARRANGE_ADMIN_TOKENS": TOKENS,
                   # no housekeeping: a sweep would take the connection left idle across
                   # the cut before the first write to P does (the write must meet one)
                   "REARRANGE_CONFIG_POLL_SECONDS": "0",
                   "REARRANGE_BANLIST_BLOCK_SECONDS": str(BLOCK),
                   "REARRANGE_REDIS_TIMEOUT_SECONDS": str(TIMEOUT),
                   "REARRANGE_REDIS_CONNECT_TIMEOUT_SECONDS": str(CONNECT),
                   "REARRANGE_REDIS_WAIT_MS": "500",
                   "REARRANGE_BANLIST_SNAPSHOT_PATH": str(tmp_path / f"{name}.snapshot.json"),
                   "REARRANGE_BANLIST_PATH": str(tmp_path / f"{name}.unused.jsonl")}
            proc = (ServeProcess(ROOT, tmp_path, env, host=ns.address, wrap=tuple(ns.command()))
                    if inside else ServeProcess(ROOT, tmp_path, env))
            started.append(proc)
            return proc

        with ThreadPoolExecutor(2) as pool:  # side by side: each takes seconds to start
            q, p = pool.map(replica, ("q", "p"), (False, True))
        yield ns, server, q, p


def ready(base: str) -> dict:
    r = httpx.get(f"{base}/readyz", timeout=5)
    assert r.status_code == 200  # a replica that lost Redis serves its copy: still ready
    return r.json()


def ban(base: str, value: str) -> httpx.Response:
    return httpx.post(f"{base}/v1/banlist/entries", headers=W, timeout=30,
                      json={"scope": "domain", "value": value, "reason": "spam"})


def unban(base: str, entry_id: str) -> httpx.Response:
    return httpx.request("DELETE", f"{base}/v1/banlist/entries/{entry_id}", headers=W,
                         timeout=30, json={"reason": "appeal"})


def ids(base: str) -> set[str]:
    lines = httpx.get(f"{base}/v1/banlist/export", timeout=5).content.splitlines()
    return {httpx.Response(200, content=line).json().get("id") for line in lines} - {None}


def within(cond, seconds: float) -> float:
    """Seconds until `cond()` held; fail past `seconds`."""
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > seconds:
            pytest.fail(f"not within {seconds} s")
        time.sleep(0.05)
    return time.monotonic() - start


def redis_errors(base: str) -> dict[str, float]:
    """rearrange_banlist_redis_errors_total by operation."""
    text = httpx.get(f"{base}/metrics", timeout=5).text
    return {op: float(n) for op, n in re.findall(
        r'^rearrange_banlist_redis_errors_total\{op="(\w+)"\} (\S+)$', text, re.M)}


def script_waiting(server: RedisServer, address: str) -> bool:
    """Whether a write script from `address` waits in Redis (held by CLIENT PAUSE WRITE)."""
    return any(c["addr"].startswith(f"{address}:") and c["cmd"] == "evalsha"
               and "b" in c["flags"] for c in server.client().client_list())


def test_a_replica_cut_off_from_redis_serves_refuses_writes_and_catches_up(partition):
    ns, server, q, p = partition
    assert ban(q.base, "before.example").status_code == 201
    made = ban(p.base, "banned.example")
    assert made.status_code == 201
    within(lambda: ready(p.base)["banlist_version"] == 2 == ready(q.base)["banlist_version"], 5)
    errors = redis_errors(p.base)

    latencies: list[float] = []
    pages: list[tuple[int, list[str]]] = []
    stop = threading.Event()

    def rerank() -> None:
        with httpx.Client(base_url=p.base, timeout=10) as c:
            while not stop.is_set():
                start = time.monotonic()
                r = c.post("/v1/rerank", json=PAGE)
                latencies.append(time.monotonic() - start)
                pages.append((r.status_code, [d["id"] for d in r.json()["documents"]]))
                time.sleep(0.02)

    inflight: list[httpx.Response] = []
    writer = threading.Thread(target=lambda: inflight.append(ban(p.base, "inflight.example")))
    thread = threading.Thread(target=rerank)
    thread.start()
    try:
        # A write to P in flight through the cut: its script held in Redis (CLIENT PAUSE
        # WRITE lets PING and reads through) until the link is cut, then run, its answer
        # dropped on the way back
        with server.client() as admin:
            admin.execute_command("CLIENT", "PAUSE", "10000", "WRITE")
            writer.start()
            within(lambda: script_waiting(server, ns.address), 5)
            # one more connection in P's pool, idle across the cut: the next write meets it
            assert httpx.get(f"{p.base}/v1/banlist/changes", timeout=5).status_code == 200
            ns.cut(server.port)
            cut_at = time.monotonic()
            admin.execute_command("CLIENT", "UNPAUSE")
        # writes to P are refused within the socket timeout, never sent into the void: a
        # removal PINGs on the connection it would be sent on (the one idle across the
        # cut), an add reads the changelog first (its catch-up), then does the same
        for write, waits in ((lambda: unban(p.base, made.json()["entry"]["id"]), 1),
                             (lambda: ban(p.base, "through-p.example"), 2)):
            start = time.monotonic()
            r = write()
            took = time.monotonic() - start
            assert r.status_code == 503, r.text
            assert "the change was not made" in r.json()["problem"], r.text
            assert "write_id" not in r.json() and took < waits * TIMEOUT + 1.5
        # Q reaches Redis: its writes are made
        written = [ban(q.base, f"cut{i}.example").json()["entry"]["id"] for i in range(3)]
        # P notices within its socket timeout: not in sync, a problem naming Redis
        within(lambda: "Redis unreachable" in (ready(p.base)["banlist_problem"] or ""),
               max(0.0, cut_at + TIMEOUT + BLOCK + 1.5 - time.monotonic()))
        state = ready(p.base)
        assert not state["banlist_in_sync"] and state["banlist_version"] == 2
        within(lambda: ready(p.base)["banlist_staleness_seconds"]
               > state["banlist_staleness_seconds"], 5.0)  # and it grows
        now = redis_errors(p.base)
        assert all(now.get(op, 0) > errors.get(op, 0) for op in ("replicate", "write"))
        assert ns.dropped() > 0  # the cut dropped packets: nothing was refused
    finally:
        ns.heal()
        healed = time.monotonic()
        stop.set()
        thread.join()
        if writer.is_alive():
            writer.join()
    # P catches up by itself: every ban written through Q, the same digest, in sync
    within(lambda: set(written) <= ids(p.base) and ready(p.base)["banlist_in_sync"], 5)
    caught_up = time.monotonic() - healed
    assert ready(p.base)["banlist_digest"] == ready(q.base)["banlist_digest"]
    # the write in flight committed: P answered so once Redis told it (the answer lost, it
    # asks), or, Redis silent past its tries, a 503 whose write id tells it now
    r = inflight[0]
    if r.status_code == 503:
        assert r.json()["outcome"] == "unknown", r.text
        state = httpx.get(f"{p.base}/v1/banlist/writes/{r.json()['write_id']}", headers=W)
        assert state.json()["committed"] is True
    else:
        assert r.status_code == 201, r.text
    assert "inflight.example" in httpx.get(f"{q.base}/v1/banlist/export").text
    print(f"cut {healed - cut_at:.1f} s; caught up {caught_up:.2f} s after; in flight "
          f"{r.status_code}; rerank {len(pages)}, slowest {max(latencies) * 1000:.0f} ms")
    assert pages and all(page == (200, ["b"]) for page in pages)
    assert max(latencies) < TIMEOUT  # none waited on Redis


@pytest.mark.python_path("sends no /v1/rerank: a write through a cut connection")
def test_a_connection_idle_while_redis_went_silent_fails_before_a_write_is_sent(redis_server):
    """`reach` PINGs the connection a write is about to take: one that sat idle in the pool
    while Redis went silent (stopped here: the kernel keeps the connection, nothing answers,
    as across a partition) fails within the socket timeout, the write not sent."""
    client = connect(redis_server.url, socket_timeout=0.5, socket_connect_timeout=0.5)
    client.get("warm")  # a connection, idle in the pool
    redis_server.pause()
    try:
        start = time.monotonic()
        with pytest.raises(redispy.TimeoutError):
            reach(client)
        assert time.monotonic() - start < 2
    finally:
        redis_server.resume()
    reach(client)  # Redis answers again: so does the pool
    client.close()
