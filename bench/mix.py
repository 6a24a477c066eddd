"""The load test's page mix in process: what `make load` measures, without locust's CPU.

Usage: python -m bench.mix [--requests 4000] [--passes 3] [--rounds 2] [--banlist 100000]
                           [--against REV]

`make load` runs locust beside the replicas, and on this 2-core machine the generator,
not the replicas, bounds its throughput (its CPU line shows it). This sends the same
pages (bench/locustfile.py's, with LOAD_SEED and a user id per request as the frontend
users send them) through `Rearranger.rerank` and the response encoding in process, and
reports the median µs per request over `--passes` passes of `--requests` requests.

Each side runs in its own process, from its own tree: this checkout and, with `--against
REV`, REV checked out into a temporary worktree (as `bench.http --against` does; REV needs
`bench.pipeline.build`). The sides alternate for `--rounds` rounds, so the machine's
drift hits both; the last column is REV's time over this checkout's (above 1: this
checkout is faster, read like `bench.http`'s `vs REV`).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.http import ROOT, revision_tree

# Imports locust (which monkey-patches the interpreter): run only in a throwaway process.
DUMP = """
import random, sys
import bench.locustfile as lf
path, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
with open(path, "wb") as out:
    for _ in range(count):
        page = lf.PAGES_BUILT[rng.randrange(len(lf.PAGES_BUILT))]
        out.write(lf.request_body(page, rng.randrange(lf.USERS)) + b"\\n")
"""

# Run with the side's tree as the working directory, so `app` is that tree's.
WORKER = """
import gc, json, sys, time
from bench.pipeline import build
path, passes, entries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "rb") as f:
    bodies = f.read().splitlines()
service, _ = build(entries, 2024, 1000)
for body in bodies[:500]:
    service.rerank(body)
gc.collect()
gc.freeze()
times = []
for _ in range(passes):
    started = time.perf_counter()
    for body in bodies:
        service.rerank(body)
    times.append((time.perf_counter() - started) / len(bodies) * 1e6)
print(json.dumps(times))
"""


def dump_pages(path: Path, requests: int, seed: int = 11) -> None:
    """`requests` request bodies drawn from the locustfile's pages, one per line."""
    subprocess.run([sys.executable, "-c", DUMP, str(path), str(requests), str(seed)],
                   cwd=ROOT, check=True, capture_output=True)


def run_side(tree: Path, pages: Path, passes: int, banlist: int) -> list[float]:
    """µs per request of each pass, measured in a fresh process in `tree`."""
    out = subprocess.run([sys.executable, "-c", WORKER, str(pages), str(passes), str(banlist)],
                         cwd=tree, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--banlist", type=int, default=100_000)
    parser.add_argument("--against", metavar="REV",
                        help="also run the mix at this git revision, alternating")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rearrange-mix-") as tmp, \
            contextlib.ExitStack() as stack:
        pages = Path(tmp) / "pages.jsonl"
        dump_pages(pages, args.requests)
        sides = {"this checkout": ROOT}
        if args.against:
            sides[args.against] = stack.enter_context(
                revision_tree(args.against, Path(tmp) / "against"))
        times: dict[str, list[float]] = {name: [] for name in sides}
        for n in range(args.rounds):
            for name, tree in sides.items():
                times[name] += run_side(tree, pages, args.passes, args.banlist)
                print(f"round {n + 1}: {name} {times[name][-1]:.1f} µs per request", flush=True)
    print(f"\n{args.requests} requests of the load mix, {args.passes} passes x {args.rounds} "
          f"rounds per side, banlist {args.banlist:,} entries")
    print(f"{'side':>16} {'median µs':>10} {'min µs':>8} {'vs REV':>7}")
    ours = statistics.median(times["this checkout"])
    for name, values in times.items():
        median = statistics.median(values)
        ratio = f"{median / ours:7.2f}" if name != "this checkout" else ""
        print(f"{name:>16} {median:>10.1f} {min(values):>8.1f} {ratio:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
