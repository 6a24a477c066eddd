"""`uvicorn app.main:app --workers 2` (worker processes: `rearrange serve --workers N` runs
threads) on a real Redis: every scrape, whichever worker answers it, is the whole
service's (N requests: every scrape says N), and so is the SRM check."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.mmap_dict import MmapedDict

from app.observability.workers import worker_pids
from tests.api.test_experiments_api import samples, value
from tests.conftest import ROOT
from tests.corpus import corpus
from tests.redis_server import RedisServer, ServeProcess

# every test here runs on a redis-server of its own, and on uvicorn's processes (no data port)
pytestmark = [pytest.mark.redis, pytest.mark.python_path("uvicorn's worker processes")]

SCRAPES = 8
BAD = 3


@pytest.fixture
def service(tmp_path: Path):
    redis = RedisServer(tmp_path / "redis").start()
    directory = tmp_path / "metrics"
    directory.mkdir()
    env = {"REDIS_URL": redis.url, "REARRANGE_CONFIG": str(ROOT / "config" / "rules.yaml"),
           "PROMETHEUS_MULTIPROC_DIR": str(directory), "REARRANGE_CONFIG_POLL_SECONDS": "0.2",
           "REARRANGE_BANLIST_SNAPSHOT_PATH": str(tmp_path / "snapshot.json"),
           "REARRANGE_BANLIST_PATH": str(tmp_path / "unused.jsonl")}
    proc = ServeProcess(ROOT, tmp_path, env, args=("--workers", "2"),
                        program=("-m", "uvicorn", "app.main:app"))
    try:
        yield proc, directory
    finally:
        proc.stop()
        redis.kill()


def scrape(base: str) -> dict:
    """One scrape on a connection of its own (so the kernel may hand it to either worker)."""
    with httpx.Client(timeout=10) as c:
        return samples(c.get(f"{base}/metrics").text)


def until(cond, timeout: float = 60.0) -> None:
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > timeout:
            pytest.fail(f"not within {timeout} s")
        time.sleep(0.05)


def served_by(directory: Path) -> dict[int, float]:
    """Rerank responses each worker counted in its own prometheus_client file."""
    out = {}
    for pid in worker_pids(directory):
        path = directory / f"counter_{pid}.db"
        out[pid] = sum(v for key, v, _, _ in MmapedDict.read_all_values_from_file(str(path))
                       if "rearrange_http_responses_total" in key and "/v1/rerank" in key)
    return out


def page(n: int) -> dict:
    return {"unit": {"user_id": f"u-{n}"}, "documents": [
        {"id": "a", "url": f"http://h{n}.example/", "score": 2.0},
        {"id": "b", "url": "http://other.example/", "score": 1.0, "spam_score": 0.5}]}


def test_every_scrape_of_two_workers_says_n_after_n_requests(service):
    proc, directory = service
    base = proc.base
    until(lambda: value(scrape(base), "rearrange_workers") == 2)
    assert not (directory / "counter_1.db").exists()  # the last run's files are wiped
    n = 0
    # New connections until both workers have served some (else this proves nothing)
    while n < 40 or min(served_by(directory).values()) == 0:
        assert n < 400, served_by(directory)
        r = httpx.post(f"{base}/v1/rerank", json=page(n), timeout=10)
        assert r.status_code == 200, r.text
        n += 1
    for _ in range(BAD):
        assert httpx.post(f"{base}/v1/rerank", json={"documents": 1}).status_code == 422
    shares = served_by(directory)
    assert len(shares) == 2 and sum(shares.values()) == n + BAD

    assignments = None
    for _ in range(SCRAPES):
        s = scrape(base)
        assert value(s, "rearrange_requests_total", profile="default", outcome="ok") == n
        assert value(s, "rearrange_request_duration_seconds_count", profile="default") == n
        assert value(s, "rearrange_http_responses_total", route="/v1/rerank", code="200") == n
        assert value(s, "rearrange_http_responses_total", route="/v1/rerank", code="422") == BAD
        split = {k: v for k, v in s.items() if k[0] == "rearrange_experiment_assignments_total"}
        assert sum(split.values()) == n
        assignments = assignments or split
        assert split == assignments
        assert value(s, "rearrange_workers") == 2
        assert value(s, "rearrange_banlist_in_sync") == 1
        assert value(s, "process_resident_memory_bytes") > 0
        assert not [k for k in s if k[0].endswith("_created")]
    srm = [httpx.get(f"{base}/v1/experiments/srm").json()["experiments"][0]["observed"]
           for _ in range(SCRAPES)]
    assert all(sum(o.values()) == n for o in srm) and all(o == srm[0] for o in srm)

    # The near_duplicates caches: each worker's own, every scrape their sum.
    texts = [t for _, t in corpus(12, seed=5)]  # 12 texts a page: the exact method
    body = {"documents": [{"id": f"d{i}", "url": f"https://h{i}.example.com/",
                           "score": 50 - i, "text": t} for i, t in enumerate(texts)]}
    before, sent = served_by(directory), 0
    while sent < 6 or any(served_by(directory)[pid] == before[pid] for pid in before):
        assert sent < 400, served_by(directory)  # both workers shingle some
        assert httpx.post(f"{base}/v1/rerank", json=body, timeout=10).status_code == 200
        sent += 1
    lookups, distinct = len(texts) * sent, len(set(texts))
    n += sent

    def shingles(s: dict) -> tuple[float, ...]:
        return tuple(value(s, f"rearrange_shingle_cache_{name}", profile="default") or 0.0
                     for name in ("hits_total", "misses_total", "entries"))

    until(lambda: sum(shingles(scrape(base))[:2]) == lookups, timeout=20)
    caches = shingles(scrape(base))
    hits, misses, entries = caches
    assert distinct < misses <= 2 * distinct  # both workers missed each text once at most
    assert entries == misses and hits == lookups - misses  # nothing evicted
    cpu = []
    for _ in range(SCRAPES):
        s = scrape(base)
        assert shingles(s) == caches
        cpu.append(value(s, "process_cpu_seconds_total"))

    # A worker killed and replaced by uvicorn: its counts stay, its gauges go.
    victim = max(shares, key=shares.get)
    os.kill(victim, signal.SIGKILL)
    until(lambda: len(worker_pids(directory)) == 3
          and value(scrape(base), "rearrange_workers") == 2)
    for _ in range(SCRAPES):
        s = scrape(base)
        assert value(s, "rearrange_requests_total", profile="default", outcome="ok") == n
        assert value(s, "rearrange_http_responses_total", route="/v1/rerank", code="200") == n
        assert shingles(s)[:2] == caches[:2] and shingles(s)[2] < entries  # its cache went
        cpu.append(value(s, "process_cpu_seconds_total"))
    assert cpu == sorted(cpu), f"process_cpu_seconds_total went down: {cpu}"
    assert not list(directory.glob(f"gauge_live*_{victim}.db"))
