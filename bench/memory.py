"""Resident memory of one `rearrange serve` with a large embedded banlist (sizes the pod).

Usage: python -m bench.memory [--entries 1000000] [--requests 500] [--redis]
       python -m bench.memory --part index|store [--entries 200000]

Writes `--entries` generated host/domain entries (bench.pipeline's generator, the same
banlist the benchmarks use) to a seed file, starts `rearrange serve` with the sample
config and REARRANGE_BANLIST_SEED pointing at it, and reports, in MiB:

  seeded:   RSS once /readyz answers after the first start (seed imported) and the peak;
  serving:  RSS after `--requests` 100-document rerank requests;
  replayed: RSS and peak after a restart, which replays the banlist log instead (what a
            restarted pod does with the embedded store).

`--redis` measures the production layout instead: a redis-server of its own (on a free
port, no persistence), the first replica seeding it (`seeded`), serving, then a restart
that resyncs from Redis (`resynced`); and Redis's own `used_memory` per million entries,
and per change of the stream (from 2,000 single adds written after the seed).

`--part` measures in this process, without a server, what the banlist costs per million
entries (bytes allocated while building it and still held, by tracemalloc): `index`
the BanIndex alone (what any replica must hold to match), `store` the embedded store
seeded into a log file (the index plus the recent changes it keeps in memory; older
history stays in the file).

The banlist log goes to /dev/shm when it exists, so the disk does not blur the memory
figures (`python -m bench.seed` measures the seed's fsyncs on a real disk).
"""
from __future__ import annotations

import argparse
import shutil
import time
import tracemalloc
from pathlib import Path

import httpx
import orjson
import redis

from app.banlist.base import EntrySpec
from app.banlist.bulk import read_file
from app.banlist.embedded.store import EmbeddedStore
from app.banlist.index import BanIndex
from app.banlist.model import Entry, normalize
from app.banlist.redis.store import RedisStore
from app.observability.metrics import Metrics
from bench import replicas
from bench.banlist import start_redis
from bench.pages import make_serp, write_banlist

CONFIG = replicas.ROOT / "config" / "rules.yaml"


def measure(label: str, replica: replicas.Replica, started: float) -> dict[str, float]:
    row = {"ready_s": time.monotonic() - started, "rss": replica.rss_mib(),
           "peak": replica.peak_rss_mib()}
    print(f"{label:<10}{row['ready_s']:>10.1f}{row['rss']:>10.0f}{row['peak']:>10.0f}",
          flush=True)
    return row


def part(name: str, entries: int, work: Path) -> None:
    """RSS growth per million entries of the index alone or of the whole embedded store."""
    seed = work / "seed.jsonl"
    write_banlist(seed, entries, 2024)
    specs = read_file(seed)[1]
    # Not the RSS delta: the index's arrays reuse heap the seed generation freed, so RSS
    # can grow by nothing. tracemalloc counts what the structure holds (array buffers too).
    tracemalloc.start()
    if name == "store":
        store = EmbeddedStore(work / "banlist.jsonl")
        store.seed(specs)
        count = len(store)
    else:
        index, now = BanIndex(), time.time()
        for n, spec in enumerate(specs, 1):
            index.add(Entry(str(n), spec.scope, normalize(spec.scope, spec.value), spec.reason,
                            "seed", now, None, frozenset(spec.regions)))
        count = len(index)
    held = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    print(f"{name}: {count} entries, {held:.0f} MiB allocated ({held * 1e6 / count:.0f} MiB "
          f"per million entries, {held * 2**20 / count:.0f} B per entry)")


def used_memory(url: str) -> int:
    return int(redis.Redis.from_url(url).info("memory")["used_memory"])


def redis_report(url: str, before: int, entries: int) -> None:
    """Redis's used_memory per million seeded entries, then per change of 2,000 adds."""
    seeded = used_memory(url)
    store = RedisStore(url, Metrics(), None)
    store.start()
    for i in range(2000):
        store.add(EntrySpec("host", f"change-{i}.example", "spam network"), "bench")
    changed = used_memory(url)
    store.close()
    per_entry = (seeded - before) / entries
    per_change = (changed - seeded) / 2000
    print(f"redis used_memory: {per_entry:.0f} B per seeded entry = "
          f"{per_entry * 1e6 / 2**20:.0f} MiB per million entries; {per_change:.0f} B per "
          f"further change (its entry + its stream record, kept for the retention window)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--part", choices=("index", "store"))
    parser.add_argument("--redis", action="store_true")
    args = parser.parse_args()
    work = replicas.scratch_dir("rearrange-memory-")
    if args.part:
        part(args.part, args.entries, work)
        shutil.rmtree(work)
        return 0
    seed = work / "seed.jsonl"
    written = write_banlist(seed, args.entries, 2024)
    print(f"{written} banlist entries in {seed} ({seed.stat().st_size / 2**20:.0f} MiB), "
          f"config {CONFIG.relative_to(replicas.ROOT)}")
    env = replicas.base_env(REARRANGE_CONFIG=str(CONFIG), REARRANGE_BANLIST_SEED=str(seed))
    env.pop("REDIS_URL", None)  # the embedded store, unless --redis
    redis_proc = None
    if args.redis:
        redis_proc, url = start_redis(work)
        env.update(REDIS_URL=url, REARRANGE_BANLIST_SNAPSHOT_PATH=str(work / "snapshot.json"))
        before_seed = used_memory(url)
    body = orjson.dumps(make_serp(100, 2024, "u-000004", False))
    print(f"{'':<10}{'ready s':>10}{'RSS MiB':>10}{'peak MiB':>10}")
    started = time.monotonic()
    (replica,) = replicas.start(1, work, env)
    replicas.wait_ready([replica], timeout=3600)
    seeded = measure("seeded", replica, started)
    with httpx.Client(base_url=replica.url, timeout=10) as client:
        for _ in range(args.requests):
            client.post("/v1/rerank", content=body,
                        headers={"content-type": "application/json"}).raise_for_status()
        entries = client.get("/readyz").json()["banlist_entries"]
    measure("serving", replica, started)
    replicas.stop([replica])
    started = time.monotonic()
    (replica,) = replicas.start(1, work, env)
    replicas.wait_ready([replica], timeout=3600)
    replayed = measure("resynced" if args.redis else "replayed", replica, started)
    replicas.stop([replica])
    if redis_proc is not None:
        redis_report(url, before_seed, entries)
        redis_proc.kill()
        redis_proc.wait()
    print(f"{entries} entries indexed; RSS per 1M entries above an empty service is roughly "
          f"(RSS - baseline) * 1e6 / entries: run with --entries 0 for the baseline")
    print(f"size a pod's memory limit for the larger peak: "
          f"{max(seeded['peak'], replayed['peak']):.0f} MiB per worker")
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
