"""How long a config rollback on one replica takes to be served by another, beside a ban.

Two `rearrange serve` replicas on one redis-server (started here). Each round sends a
rollback to replica a and polls replica b's /v1/rerank until its `config_version` names
it; then the same for a ban (POST to a, poll b's lookup). Times are from sending the
write to b's first answer with it, so they include a's handling and the polling.
Run from the repository root: `python -m bench.config_rollback [--rounds N]`.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import time

import httpx
import redis

from bench.replicas import ROOT, base_env, free_port, scratch_dir, start, stop, wait_ready

PAGE = {"documents": [{"id": "a", "url": "http://x.com/1", "score": 1}]}
ONE = "profiles: {default: {trim: [{depth: {k: 1}}]}}\n"
AUTH = {"Authorization": "Bearer bench"}


def _until(check) -> float:
    started = time.perf_counter()
    while not check():
        if time.perf_counter() - started > 10:
            raise SystemExit("not served within 10 s")
    return time.perf_counter() - started


def _quantiles(label: str, seconds: list[float]) -> float:
    ms = sorted(s * 1000 for s in seconds)
    p50, p99 = (ms[min(len(ms) - 1, int(q * len(ms)))] for q in (0.5, 0.99))
    print(f"{label}: n={len(ms)} p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {ms[-1]:.1f} ms")
    return p50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    work = scratch_dir("rr-config-")
    port = free_port()
    server = subprocess.Popen([shutil.which("redis-server") or "/usr/bin/redis-server",
                               "--port", str(port), "--save", "", "--appendonly", "no",
                               "--dir", str(work)], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    _until(lambda: _pings(url))
    config = work / "rules.yaml"
    config.write_bytes((ROOT / "config" / "rules.yaml").read_bytes())
    env = base_env(REDIS_URL=url, REARRANGE_CONFIG=str(config),
                   REARRANGE_ADMIN_TOKENS="bench:bench", REARRANGE_CONFIG_POLL_SECONDS="0",
                   REARRANGE_BANLIST_SNAPSHOT_PATH="")
    replicas = start(2, work, env)
    try:
        wait_ready(replicas, 120)
        a, b = (httpx.Client(base_url=r.url, timeout=10) for r in replicas)
        first = b.post("/v1/rerank", json=PAGE).json()["config_version"]
        config.write_text(ONE)
        second = a.post("/v1/admin/config/reload", headers=AUTH).json()["config_version"]
        _until(lambda: b.post("/v1/rerank", json=PAGE).json()["config_version"] == second)
        rollbacks, bans = [], []
        for i in range(args.rounds):
            want = (first, second)[i % 2]
            started = time.perf_counter()
            a.post("/v1/admin/config/rollback", headers=AUTH, json={"version": want})
            _until(lambda w=want: b.post("/v1/rerank", json=PAGE).json()["config_version"] == w)
            rollbacks.append(time.perf_counter() - started)
            host = f"h{i}.example"
            started = time.perf_counter()
            a.post("/v1/banlist/entries", headers=AUTH,
                   json={"scope": "host", "value": host, "reason": "bench"})
            _until(lambda h=host: b.get("/v1/banlist/lookup",
                                        params={"url": f"http://{h}/"}).json()["banned"])
            bans.append(time.perf_counter() - started)
        roll = _quantiles("rollback on a -> served by b", rollbacks)
        ban = _quantiles("ban on a -> banned on b", bans)
        print(f"p50 ratio rollback / ban: {roll / ban:.2f}x")
    finally:
        stop(replicas)
        server.kill()
        shutil.rmtree(work, ignore_errors=True)


def _pings(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url).ping())
    except redis.ConnectionError:
        return False


if __name__ == "__main__":
    main()
