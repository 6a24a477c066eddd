"""Seeding and restarting the embedded banlist store on a real disk (fsync is the cost).

Usage: python -m bench.seed [--entries 1000000] [--dir DIR]

Writes `--entries` generated host/domain entries (bench.pages' generator, as
bench/http.py `prepare_banlist` does), then reports:

  seed:     seconds for `EmbeddedStore(log).seed(read_file(seed_file)[1])` and the fsyncs
            it made (counted by wrapping os.fsync), and the log's size;
  restart:  in a fresh process, seconds to replay the log and the RSS that start added
            (RSS after `EmbeddedStore(log)` minus RSS before it; imports excluded);
  history:  `changes_since(0, 1000)` and `changes_since(N/2, 1000)` in that process
            (the oldest page and one from the middle of the log).

`--dir` defaults to a fresh directory under the repository's filesystem (not /dev/shm):
the point is what fsync costs on a disk.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.banlist.bulk import read_file
from app.banlist.embedded.store import EmbeddedStore
from bench.pages import write_banlist

ROOT = Path(__file__).resolve().parents[1]

RESTART = r"""
import sys, time
from pathlib import Path
def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
from app.banlist.embedded.store import EmbeddedStore
before = rss()
t = time.perf_counter()
store = EmbeddedStore(Path(sys.argv[1]))
took = time.perf_counter() - t
grown = rss() - before
n = store.version
t = time.perf_counter()
first = store.changes_since(0, 1000)
mid = store.changes_since(n // 2, 1000)
hist = time.perf_counter() - t
assert [c["seq"] for c in first] == list(range(1, min(n, 1000) + 1)), "history from 0"
assert mid and mid[0]["seq"] == n // 2 + 1, "history from the middle"
print(f"restart: {n:,} changes replayed in {took:.1f} s; RSS +{grown:.0f} MiB "
      f"({grown * 1e6 / max(n, 1):.0f} MiB per million); two 1000-change history pages "
      f"{hist * 1000:.0f} ms")
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path)
    args = parser.parse_args()
    if args.dir is not None:  # the disk to measure: made if it is not there yet
        args.dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rearrange-seed-", dir=args.dir or ROOT))
    try:
        seed = work / "seed.jsonl"
        written = write_banlist(seed, args.entries, 2024)
        specs = read_file(seed)[1]
        log = work / "banlist.jsonl"
        fsyncs = [0]
        real_fsync = os.fsync

        def counting_fsync(fd: int) -> None:
            fsyncs[0] += 1
            real_fsync(fd)

        os.fsync = counting_fsync
        started = time.perf_counter()
        added = EmbeddedStore(log).seed(specs)
        took = time.perf_counter() - started
        os.fsync = real_fsync
        print(f"seed: {added:,} of {written:,} entries in {took:.1f} s, {fsyncs[0]:,} fsyncs, "
              f"log {log.stat().st_size / 2**20:.0f} MiB", flush=True)
        subprocess.run([sys.executable, "-c", RESTART, str(log)], cwd=ROOT, check=True)
    finally:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
