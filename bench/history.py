"""What the banlist's history costs Redis: bytes per change of the history stream.

Usage: python -m bench.history [--changes 200000]

Starts its own redis-server on a free port (no persistence), writes `--changes` changes
through the Redis store's own write path (imports of 10,000 adds, then one removal for
every tenth entry, as an appeal would), and reports `MEMORY USAGE` of the history stream
(kept for REARRANGE_BANLIST_HISTORY_DAYS), of the changelog (kept for the retention) and
of the entries hash, per change and per million changes. The history is the changelog
kept longer: its cost is what a year of changes costs, whatever the list's size.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import redis

from app.banlist.base import EntrySpec
from app.banlist.redis.store import RedisStore
from app.observability.metrics import Metrics
from bench.replicas import redis_server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, default=200_000)
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    work = Path(tempfile.mkdtemp(prefix="rearrange-history-"))
    server, port = redis_server(work)
    try:
        client = redis.Redis(port=port)
        store = RedisStore(f"redis://127.0.0.1:{port}/0", Metrics(), None)
        store.start()
        adds = args.changes * 10 // 11
        started = time.perf_counter()
        for first in range(0, adds, 10_000):
            specs = [EntrySpec("host", f"site-{n}.example.com", "link farm (manual action)")
                     for n in range(first, min(first + 10_000, adds))]
            store.put_import((), specs, "tns")
        for entry_id in range(1, adds + 1, 10):
            store.remove(str(entry_id), "appeals", "appeal granted")
        took = time.perf_counter() - started
        keys = store.keys
        changes = client.xlen(keys.history)
        print(f"{changes} changes written in {took:.1f} s")
        for name, key in (("history stream", keys.history), ("changelog", keys.stream),
                          ("entries hash", keys.entries)):
            used = client.memory_usage(key, samples=0) or 0
            print(f"{name:15} {used / 2**20:8.1f} MiB  {used / changes:6.1f} B per change  "
                  f"{used / changes * 1e6 / 2**30:6.2f} GiB per million changes")
        store.close()
    finally:
        server.kill()
        server.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
