"""Benchmark: what pins, hides and boosts by query cost one engine call, as ratios.

One generated 100-document page (30 hosts; every document has `verified` and `tier`
attributes, a tenth are `premium`) goes through the engine with a base profile (host
crowding, depth) and with the base plus one query rule at a time: a hide by attribute and
domain whose condition holds, a boost by attribute, one pin that moves a document from
95th to 1st, and twenty pins whose conditions do not hold. The calls are interleaved (the
order rotates every round); the table gives each median in µs and divided by the base's.
Machines are shared and noisy: compare the ratios of one run. Nothing here asserts a time.

Run from the repository root: `python -m bench.query_rules [--iterations 2000]`.
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

import orjson
import yaml

from app._engine import EngineMetrics
from app.config.load import load_bytes
from app.config.spec import with_core

NOW = 1_900_000_000.0
BASE: dict[str, Any] = {"diversify": [{"host_crowding": {"max_per_host": 2}}],
                        "trim": [{"depth": {"k": 10}}]}
HIDE = {"query_hide": {"when": {"query_contains": ["cheap"]},
                       "match": {"attributes": {"tier": "premium"}, "domains": ["h3.example"]}}}
BOOST = {"query_boost": {"match": {"attributes": {"verified": True}}, "by": 2.5}}
PIN = {"query_pin": {"when": {"query_words": ["sofa"], "regions": ["RU"]},
                     "pin": [{"url": "https://h5.example/p95", "position": 1}]}}
MISSES = [{"query_pin": {"when": {"query_is": [f"campaign {k}"]},
                         "pin": [{"url": f"https://h1.example/p{k}", "position": 2}]}}
          for k in range(20)]
PROFILES: dict[str, dict[str, Any]] = {
    "base": BASE,
    "hide by attribute": {**BASE, "pre-filter": [HIDE]},
    "boost by attribute": {**BASE, "rerank": [BOOST]},
    "one pin, 95th to 1st": {**BASE, "diversify": [PIN, *BASE["diversify"]]},
    "20 pins, no match": {**BASE, "diversify": [*MISSES, *BASE["diversify"]]},
}


def body(n: int = 100) -> bytes:
    docs = [{"id": f"d{i}", "url": f"https://h{i % 30}.example/p{i}", "score": 100.0 - i,
             "attributes": {"verified": i % 7 == 0,
                            "tier": "premium" if i % 10 == 0 else "standard"}}
            for i in range(n)]
    return orjson.dumps({"query": {"text": "Cheap sofa delivery", "region": "RU"},
                         "documents": docs})


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.query_rules")
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args(argv)
    page = body()
    cores = {name: with_core(load_bytes(yaml.safe_dump({"profiles": {"default": p}}).encode()),
                             EngineMetrics()).core for name, p in PROFILES.items()}
    names = list(cores)
    times: dict[str, list[int]] = {name: [] for name in names}
    for r in range(args.warmup + args.iterations):
        for name in names[r % len(names):] + names[:r % len(names)]:
            started = time.perf_counter_ns()
            status, *_ = cores[name].rerank(page, now=NOW)
            took = time.perf_counter_ns() - started
            if status != 200:
                raise SystemExit(f"{name}: status {status}")
            if r >= args.warmup:
                times[name].append(took)
    base = statistics.median(times["base"])
    print(f"{'profile':<24} {'median µs':>10} {'x base':>7}")
    for name in names:
        median = statistics.median(times[name])
        print(f"{name:<24} {median / 1000:>10.1f} {median / base:>7.2f}")


if __name__ == "__main__":
    main()
