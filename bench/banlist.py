"""Benchmark: the banlist as hot data. Ratios within one run; nothing here asserts a time.

  1. check: 100 URLs against an index of `--entries` entries (default 1 M), the way the
     banlist rule does it (canonicalize with host, `BanIndex.match`), against the floor of
     any check: `urllib.parse.urlsplit` + one dict probe per URL on the same URLs. Both run
     interleaved, rotated each round; the ratio of medians is the figure (goal ≤ 2×). Warm
     reads one page every round; cold a page of its own each round (none read before, and
     the floor through urlsplit's uncached function). A last pair times `match` alone on
     canonical URLs (what the banlist rule adds, since decoding a request already
     canonicalizes every URL) against one dict probe per host. From Python each `match` is
     a call into the engine; the index itself against bare hash probes is measured in
     Rust, `cargo bench --bench banlist` (crates/engine/benches/banlist.rs).
  2. memory: bytes per entry, RSS after generating the entries and building the index
     minus RSS before (after `gc.collect()`), divided by the entries; that is also the
     memory per uvicorn worker, since each worker holds its own replica. [4] gives the
     same figure for entries as a replica loads them from Redis (fresh strings per entry).
  3. propagation: `--updates` (default 1000) bans written through one RedisStore, followed
     by two other replicas in this process (each its own connection and tailing thread);
     per update, commit time (the stream id's ms, Redis's clock) to apply time on each
     replica. p50/p99 (goal p99 < 250 ms).
  4. resync: `--resync-entries` (default 1 M) entries put into Redis, then a fresh replica's
     full resync (HSCAN, parse, build aside, swap) is timed.

Redis parts start their own redis-server on a free port (`--no-redis` skips them).
Run from the repository root: `python -m bench.banlist [--entries N] [--resync-entries N]`.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import os
import random
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

import orjson
import redis

from app.banlist import canon
from app.banlist.base import EntrySpec
from app.banlist.index import BanIndex
from app.banlist.model import Entry
from app.banlist.redis.store import RedisStore
from app.observability.metrics import Metrics

SCOPES = (("domain", 0.4), ("host", 0.3), ("url", 0.2), ("prefix", 0.1))


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def trimmed_rss() -> int:
    """RSS once glibc has returned its free heap pages (what the process still holds):
    parsing a million records leaves freed pages resident, which blurs a per-entry figure
    by tens of bytes from run to run."""
    with contextlib.suppress(OSError):  # not glibc: the plain RSS
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return rss()


def make_entries(n: int, rng: random.Random) -> list[Entry]:
    """n entries over the four scopes, on n distinct generated sites (shared reason/actor)."""
    out = []
    reason, actor, none = "spam", "tns", frozenset()
    cut = [int(n * sum(w for _, w in SCOPES[:i + 1])) for i in range(len(SCOPES) - 1)] + [n]
    for i in range(n):
        site = f"s{i}-{rng.randrange(1 << 30):x}.example"
        scope = next(s for (s, _), c in zip(SCOPES, cut, strict=True) if i < c)
        value = {"domain": site, "host": "www." + site, "url": f"{site}/p/{i}.html",
                 "prefix": f"{site}/forum"}[scope]
        out.append(Entry(str(i + 1), scope, value, reason, actor, 1.7e9, None, none))
    return out


def urls_for(entries: list[Entry], rng: random.Random, n: int = 100) -> list[str]:
    """A page of URLs: a tenth hit an entry (each scope), the rest are clean sites."""
    picks = rng.sample(entries, n // 10)
    out = []
    for e in picks:
        host = e.value.split("/")[0]
        out.append({"domain": f"https://news.{host}/a/b?id=3", "host": f"http://{host}/x",
                    "url": f"http://{e.value}", "prefix": f"https://{e.value}/t/9"}[e.scope])
    while len(out) < n:
        out.append(f"https://shop{rng.randrange(10**6)}.example.com/cat/item-"
                   f"{rng.randrange(10**6)}?ref=serp")
    rng.shuffle(out)
    return out


def bench_check(n: int, rounds: int) -> tuple[BanIndex, list[str]]:
    rng = random.Random(7)
    gc.collect()
    before = trimmed_rss()
    entries = make_entries(n, rng)
    started = time.perf_counter()
    index = BanIndex(entries)
    built = time.perf_counter() - started
    del entries
    gc.collect()
    gc.freeze()
    per_entry = (trimmed_rss() - before) / n
    listed = list(index)
    urls = urls_for(listed, rng)
    # Cold pages: a page of its own for each cold round, none read before (the engine
    # keeps no per-URL cache, so a never-seen page is what a cold lookup is)
    cold_pages = [urls_for(listed, rng) for _ in range(rounds)]
    probe = {e.value: e for e in listed}  # the baseline's dict: one probe per URL
    del listed

    def ours_on(page: list[str]) -> int:
        hits, now = 0, time.time()
        for u in page:
            c, host = canon.canonicalize_with_host(u)  # what decoding a request does
            if index.match(c, host, None, now) is not None:
                hits += 1
        return hits

    def floor_on(page: list[str], split: Callable[[str], SplitResult]) -> int:
        hits = 0
        for u in page:
            if probe.get(split(u).hostname) is not None:
                hits += 1
        return hits

    prepared = [canon.canonicalize_with_host(u) for u in urls]

    def rule() -> int:  # what the banlist rule adds: decoding already canonicalized each URL
        hits, now = 0, time.time()
        for c, host in prepared:
            if index.match(c, host, None, now) is not None:
                hits += 1
        return hits

    def probes() -> int:  # the bare hash probe of each of those hosts, from Python
        hits = 0
        for _, host in prepared:
            if probe.get(host) is not None:
                hits += 1
        return hits

    # The warm pair reads the same page each round: urlsplit remembers the URLs it saw (an
    # lru_cache of 128 URLs), the engine remembers none. The cold pair reads a page none has
    # read before each round, the floor through urlsplit's uncached function.
    fns: list[tuple[str, Callable[[int], int]]] = [
        ("ours", lambda _: ours_on(urls)),
        ("floor", lambda _: floor_on(urls, urlsplit)),
        ("rule", lambda _: rule()),
        ("probes", lambda _: probes()),
        ("ours_cold", lambda r: ours_on(cold_pages[r])),
        ("floor_cold", lambda r: floor_on(cold_pages[r], urlsplit.__wrapped__)),
    ]
    times: dict[str, list[int]] = {name: [] for name, _ in fns}
    for r in range(rounds):
        k = r % len(fns)
        for name, fn in fns[k:] + fns[:k]:
            t = time.perf_counter_ns()
            fn(r)
            times[name].append(time.perf_counter_ns() - t)
    med = {k: statistics.median(v) / 1000 for k, v in times.items()}
    print(f"\n[1] check of 100 URLs against {n:,} entries ({ours_on(urls)} of them banned), "
          f"{rounds} interleaved rounds")
    print(f"    ours  (canonicalize + BanIndex.match):         median {med['ours']:8.1f} µs")
    print(f"    floor (urlsplit + one dict probe):              median {med['floor']:8.1f} µs")
    print(f"    ratio ours/floor: {med['ours'] / med['floor']:.2f}x  (goal ≤ 2x)")
    print(f"    cold (a never-seen page each round): ours {med['ours_cold']:.1f} µs, "
          f"floor {med['floor_cold']:.1f} µs, ratio {med['ours_cold'] / med['floor_cold']:.2f}x")
    print(f"    rule (BanIndex.match alone, URLs canonicalized at decode) {med['rule']:.1f} µs "
          f"vs one dict probe per host {med['probes']:.1f} µs: "
          f"{med['rule'] / med['probes']:.2f}x (each match is a call into the engine)")
    print("    the index itself against bare hash probes, in Rust: "
          "cargo bench --bench banlist -- --entries N")
    print(f"\n[2] memory: {per_entry:.0f} B per entry (RSS delta, {n:,} entries, index built "
          f"in {built:.1f} s) = {per_entry * 1e6 / 2**20:.0f} MiB per worker per million")
    return index, urls


class LagRecorder:
    """Stands in for the lag histogram: keeps every observation (commit → apply, seconds)."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def observe(self, value: float) -> None:
        self.values.append(value)


def start_redis(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = shutil.which("redis-server") or "/usr/bin/redis-server"
    proc = subprocess.Popen([exe, "--port", str(port), "--save", "", "--appendonly", "no",
                             "--dir", str(directory)], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(500):
        try:
            if redis.Redis.from_url(url).ping():
                return proc, url
        except redis.ConnectionError:
            time.sleep(0.01)
    raise RuntimeError("redis-server did not start")


def bench_propagation(url: str, updates: int, tmp: Path) -> None:
    writer = RedisStore(url, Metrics(), None)
    replicas, recorders = [], []
    for name in ("b", "c"):
        metrics, rec = Metrics(), LagRecorder()
        metrics.banlist_lag = rec  # type: ignore[assignment]
        store = RedisStore(url, metrics, tmp / f"{name}.json")
        replicas.append(store)
        recorders.append(rec)
    for store in (writer, *replicas):
        store.start()
    writer.add(EntrySpec("host", "warmup.example", "r"), "bench")
    time.sleep(0.5)
    for rec in recorders:
        rec.values.clear()
    started = time.perf_counter()
    for i in range(updates):
        writer.add(EntrySpec("host", f"p{i}.example", "r"), "bench")
        time.sleep(0.002)  # ~300-400 updates/s: a busy T&S day is far below that
    deadline = time.monotonic() + 30
    while any(s.version < writer.version for s in replicas) and time.monotonic() < deadline:
        time.sleep(0.01)
    spent = time.perf_counter() - started
    print(f"\n[3] propagation of {updates} updates to two replicas ({spent:.1f} s), "
          "commit (Redis stream id, ms) to apply:")
    for name, rec in zip("bc", recorders, strict=True):
        ms = sorted(v * 1000 for v in rec.values)
        p50, p99 = (ms[min(len(ms) - 1, int(q * len(ms)))] for q in (0.5, 0.99))
        print(f"    replica {name}: n={len(ms)} p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
              f"max {ms[-1]:.1f} ms  (goal p99 < 250 ms)")
    for store in (writer, *replicas):
        store.close()


def bench_resync(url: str, n: int) -> None:
    client = redis.Redis.from_url(url, decode_responses=True)
    client.flushall()
    keys = RedisStore(url, Metrics(), None).keys
    rng = random.Random(11)
    started = time.perf_counter()
    pipe = client.pipeline(transaction=False)
    for i, e in enumerate(make_entries(n, rng)):
        payload = e.as_dict()
        pipe.hset(keys.entries, payload.pop("id"), orjson.dumps(payload).decode())
        if i % 10_000 == 9_999:
            pipe.execute()
    pipe.set(keys.seq, n).set(keys.epoch, 1).xadd(keys.stream, {
        "seq": n, "epoch": 1, "op": "remove", "key": "0", "payload": "", "actor": "bench",
        "reason": "r"})
    pipe.execute()
    filled = time.perf_counter() - started
    store = RedisStore(url, Metrics(), None)
    gc.collect()
    before = trimmed_rss()
    started = time.perf_counter()
    store.replica.resync("bench")
    took = time.perf_counter() - started
    gc.collect()
    raw = (rss() - before) / n
    held = (trimmed_rss() - before) / n
    print(f"\n[4] full resync of {n:,} entries from Redis: {took:.1f} s "
          f"({took / n * 1e6:.1f} µs per entry; Redis filled in {filled:.1f} s); "
          f"replica holds {len(store):,}, {held:.0f} B per entry as loaded from Redis "
          f"= {held * 1e6 / 2**20:.0f} MiB per worker per million ({raw:.0f} B before the "
          "allocator returned its free pages)")
    # A live resync (a gap in the changelog): the old copy serves while the new one is
    # built beside it, so this is the replica's peak. RSS sampled every 10 ms.
    start_rss, peak, done = rss(), [rss()], threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            peak.append(rss())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    store.replica.resync("bench")
    done.set()
    sampler.join()
    print(f"    a second, live resync: RSS {start_rss / 2**20:.0f} MiB before, peak "
          f"{max(peak) / 2**20:.0f} MiB (+{(max(peak) - start_rss) / n:.0f} B per entry while "
          "both copies exist)")
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--updates", type=int, default=1000)
    parser.add_argument("--resync-entries", type=int, default=1_000_000)
    parser.add_argument("--no-redis", action="store_true")
    args = parser.parse_args()
    index, _ = bench_check(args.entries, args.rounds)
    del index
    gc.unfreeze()
    gc.collect()
    if args.no_redis:
        return
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_redis(Path(tmp))
        try:
            bench_propagation(url, args.updates, Path(tmp))
            bench_resync(url, args.resync_entries)
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
