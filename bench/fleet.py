"""A fleet of banlist replicas against one Redis: how fast a ban reaches all of them, and
what each change and each idle second cost Redis.

Usage: python -m bench.fleet [--followers 200] [--processes 4] [--changes 200] [--rate 5]

Starts a Redis primary and one Redis replica of it (real redis-server processes on free
ports, no persistence), then `--followers` banlist replicas (the service's RedisStore,
each with its own connection and tailing thread, as one uvicorn worker runs it), spread
over `--processes` processes, and a writer that adds `--changes` bans at `--rate` a second
with every write confirmed by the Redis replica (WAIT, as production runs). It reports:

  propagation:  per change and follower, the time from the change's commit in Redis (its
                stream id, Redis's clock) to its apply on the follower: p50, p99, max;
  write:        the writer's time per write, the WAIT for the Redis replica included;
  Redis CPU:    used_cpu_sys + used_cpu_user of the primary while the fleet only follows
                (per second) and while it is written to (per change, less the idle share).

Everything runs on this machine, the followers sharing its cores with Redis: the figures
are an upper bound of what a fleet of separate hosts would see.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench.replicas import redis_server


class Lags:
    """The StoreEvents a follower reports to: only the apply lags are kept."""

    def __init__(self) -> None:
        self.lags: list[float] = []

    def applied(self, lag_seconds: float) -> None:
        self.lags.append(lag_seconds)

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kw: None  # every other event: not measured here


def followers(url: str, n: int, seconds: float, out: str) -> None:
    """`n` replicas in this process for `seconds`; their lags to `out` (JSON)."""
    from app.banlist.redis.store import RedisStore

    events = [Lags() for _ in range(n)]
    stores = [RedisStore(url, ev, None, block_seconds=1.0) for ev in events]  # type: ignore[arg-type]
    for store in stores:
        store.start()
    time.sleep(seconds)
    for store in stores:
        store.close()
    Path(out).write_text(json.dumps([lag for ev in events for lag in ev.lags]))


def cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--followers", type=int, default=200)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--rate", type=float, default=5.0)
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    work = Path(tempfile.mkdtemp(prefix="rearrange-fleet-"))
    primary, port = redis_server(work / "primary")
    replica, _ = redis_server(work / "replica", "--replicaof", "127.0.0.1", str(port))
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis(port=port)
    for _ in range(200):  # the Redis replica synced: writes can be confirmed
        if client.info("replication").get("slave0", {}).get("state") == "online":
            break
        time.sleep(0.05)
    try:
        from app.banlist.base import EntrySpec
        from app.banlist.redis.durable import Durability
        from app.banlist.redis.store import RedisStore
        from app.observability.metrics import Metrics

        metrics = Metrics()
        writer = RedisStore(url, metrics, None, durability=Durability(metrics, replicas=1))
        writer.start()
        writer.put_import((), [EntrySpec("host", "warm.example", "r")], "tns")
        idle_s, busy_s = 10.0, args.changes / args.rate + 5
        each = -(-args.followers // args.processes)
        ctx = multiprocessing.get_context("spawn")
        outs = [str(work / f"lags-{p}.json") for p in range(args.processes)]
        procs = [ctx.Process(target=followers, args=(url, each, 8 + idle_s + busy_s, out))
                 for out in outs]
        for p in procs:
            p.start()
        time.sleep(8)  # every follower started and following
        c0 = cpu(client)
        time.sleep(idle_s)
        c1 = cpu(client)
        writes = []
        for n in range(args.changes):
            t = time.perf_counter()
            writer.put_import((), [EntrySpec("host", f"ban-{n}.example", "r")], "tns")
            writes.append(time.perf_counter() - t)
            time.sleep(max(0.0, 1 / args.rate - (time.perf_counter() - t)))
        c2 = cpu(client)
        writing_s = sum(max(w, 1 / args.rate) for w in writes)
        for p in procs:
            p.join()
        lags = [lag for out in outs for lag in json.loads(Path(out).read_text())]
        writer.close()
        idle = (c1 - c0) / idle_s
        per_change = ((c2 - c1) - idle * writing_s) / args.changes
        print(f"{each * args.processes} followers in {args.processes} processes, "
              f"{args.changes} changes at {args.rate}/s, each confirmed by a Redis replica")
        print(f"propagation (commit -> applied, {len(lags)} applies): "
              f"p50 {percentile(lags, 0.5) * 1000:.1f} ms, p99 {percentile(lags, 0.99) * 1000:.1f}"
              f" ms, max {max(lags) * 1000:.1f} ms")
        print(f"write (WAIT included): p50 {statistics.median(writes) * 1000:.1f} ms, "
              f"p99 {percentile(writes, 0.99) * 1000:.1f} ms")
        print(f"Redis CPU: {idle * 100:.1f} % of a core while the fleet only follows; "
              f"{per_change * 1000:.2f} ms a change to fan it out")
    finally:
        for proc in (replica, primary):
            proc.kill()
            proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
