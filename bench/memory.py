"""Resident memory of one `rearrange serve` with a large embedded banlist (sizes the pod).

Usage: python -m bench.memory [--entries 1000000] [--requests 500]
       python -m bench.memory --part index|store [--entries 200000]

Writes `--entries` generated host/domain entries (bench.pipeline's generator, the same
banlist the benchmarks use) to a seed file, starts `rearrange serve` with the sample
config and REARRANGE_BANLIST_SEED pointing at it, and reports, in MiB:

  seeded:   RSS once /readyz answers after the first start (seed imported) and the peak;
  serving:  RSS after `--requests` 100-document rerank requests;
  replayed: RSS and peak after a restart, which replays the banlist log instead (what a
            restarted pod does with the embedded store).

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

from app.banlist.index import BanIndex
from app.banlist.model import Entry, normalize
from app.banlist.store import EmbeddedStore, read_specs
from bench import replicas
from bench.pipeline import make_serp, write_banlist

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
    specs = read_specs(seed)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--part", choices=("index", "store"))
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
    env.pop("REDIS_URL", None)  # the embedded store is what this measures
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
    replayed = measure("replayed", replica, started)
    replicas.stop([replica])
    print(f"{entries} entries indexed; RSS per 1M entries above an empty service is roughly "
          f"(RSS - baseline) * 1e6 / entries: run with --entries 0 for the baseline")
    print(f"size a pod's memory limit for the larger peak: "
          f"{max(seeded['peak'], replayed['peak']):.0f} MiB per worker")
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
