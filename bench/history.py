"""What the banlist's history costs Redis: bytes per change of the history stream, bytes per
end of the index of ends, and what that index costs a removal and a lookup.

Usage: python -m bench.history [--changes 200000] [--domains 10] [--lookups 200]

Starts its own redis-server on a free port (no persistence), writes `--changes` changes
through the Redis store's own write path (imports of 10,000 adds, then one removal for
every tenth entry, as an appeal would), and reports `MEMORY USAGE` of the history stream
(kept for REARRANGE_BANLIST_HISTORY_DAYS), of the changelog (kept for the retention) and
of the entries hash, per change and per million changes. The history is the changelog
kept longer: its cost is what a year of changes costs, whatever the list's size.

The index of ends (app/banlist/redis/ends.py) is measured in two shapes, as the memory
Redis gives back when its sets are deleted (`used_memory` before and after: keys, sets,
expiries): every end under a domain of its own (the removals above: one small set each,
the dearest case), and the same number of ends under `--domains` domains (url bans, many
ends a set). Then, side by side in alternating rounds: a removal whose script indexes its
end against one that does not (the same script given no set), and a lookup of a URL whose
domain holds one end, then 2,000 (ends.SCAN), answered by a graveyard that holds every end
against one that holds none of them (so the index answers), with Redis's own time per
lookup through the index (`INFO commandstats`).
"""
from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis

from app.banlist import canon
from app.banlist.base import EntrySpec
from app.banlist.model import Entry
from app.banlist.redis import ends
from app.banlist.redis.store import RedisStore
from app.observability.metrics import Metrics
from bench.replicas import redis_server

MiB = 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--domains", type=int, default=10)
    parser.add_argument("--lookups", type=int, default=200)
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    work = Path(tempfile.mkdtemp(prefix="rearrange-history-"))
    server, port = redis_server(work)
    try:
        client = redis.Redis(port=port, decode_responses=True)
        store = RedisStore(f"redis://127.0.0.1:{port}/0", Metrics(), None)
        store.start()
        adds = args.changes * 10 // 11
        started = time.perf_counter()
        ids = []
        for first in range(0, adds, 10_000):  # site-N.example: a registrable domain each
            specs = [EntrySpec("host", f"site-{n}.example", "link farm (manual action)")
                     for n in range(first, min(first + 10_000, adds))]
            ids += [e.id for e, _ in store.put_import((), specs, "tns")[1]]
        for entry_id in ids[::10]:
            store.remove(entry_id, "appeals", "appeal granted")
        took = time.perf_counter() - started
        keys = store.keys
        changes = client.xlen(keys.history)
        print(f"{changes} changes written in {took:.1f} s")
        for name, key in (("history stream", keys.history), ("changelog", keys.stream),
                          ("entries hash", keys.entries)):
            used = client.memory_usage(key, samples=0) or 0
            print(f"{name:15} {used / MiB:8.1f} MiB  {used / changes:6.1f} B per change  "
                  f"{used / changes * 1e6 / 2**30:6.2f} GiB per million changes")
        own = len(ids[::10])
        grouped = _grouped_ends(store, own, args.domains)
        print("\nindex of ends, as Redis gives it back when its sets are deleted:")
        for label, pattern, count in (
                (f"{grouped} ends under {args.domains} domains", "ends:shop-*", grouped),
                (f"{own} ends, a domain each", "ends:*", own)):
            freed = _freed(client, keys.base + pattern)
            print(f"{label:34} {freed / MiB:7.1f} MiB  {freed / count:6.1f} B per end  "
                  f"{freed / count * 1e6 / 2**30:5.2f} GiB per million ends")
        _side_by_side(store, f"redis://127.0.0.1:{port}/0", args.lookups)
        store.close()
    finally:
        server.kill()
        server.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _grouped_ends(store: RedisStore, count: int, domains: int) -> int:
    """`count` url bans under `domains` domains, added and removed: their ends."""
    ids = []
    for first in range(0, count, 10_000):
        specs = [EntrySpec("url", f"https://shop-{n % domains}.example/item/{n}", "dmca")
                 for n in range(first, min(first + 10_000, count))]
        ids += [e.id for e, _ in store.put_import((), specs, "tns")[1]]
    for entry_id in ids:
        store.remove(entry_id, "appeals", "licensed")
    return len(ids)


def _freed(client: redis.Redis, pattern: str) -> int:
    """The `used_memory` deleting the keys matching `pattern` gives back."""
    names = list(client.scan_iter(match=pattern, count=10_000))
    before = int(client.info("memory")["used_memory"])
    for start in range(0, len(names), 10_000):
        client.delete(*names[start:start + 10_000])
    return before - int(client.info("memory")["used_memory"])


def _side_by_side(store: RedisStore, url: str, lookups: int) -> None:
    """A removal with and without its index write; a lookup answered by a graveyard that
    holds every end and by the index; alternating rounds, medians and their ratio."""
    scan = ends.SCAN
    indexed, bare = [], []
    for n, entry in enumerate(_added(store, "cost", scan)):  # even ones indexed, odd not
        args = ["remove", entry.id, "", "appeals", "licensed", ""]
        named = [ends.name_of(entry.scope, entry.value)] if n % 2 == 0 else []
        took = _timed(functools.partial(store._run, args, ends=named))
        (indexed if n % 2 == 0 else bare).append(took)
    _ratio("a removal (script, catch-up)", "indexing its end", indexed, "not", bare)
    for entry in _added(store, "one", 1) + _added(store, "big", scan):  # the newest ends
        store.remove(entry.id, "appeals", "licensed")
    whole = RedisStore(url, Metrics(), None)  # reads every end into its graveyard
    small = RedisStore(url, Metrics(), None)
    small.graveyard.cap = 1  # holds the newest end: the index answers the rest
    for count, name in ((1, "one"), (scan, "big")):
        canonical = canon.canonicalize(f"https://{name}.example/item/{count // 2}")
        host = canon.split(canonical)[0]
        started = time.perf_counter()
        assert len(whole.former(canonical, host)) == 1 and whole._whole
        assert len(small.former(canonical, host)) == 1 and not small._whole
        if count == 1:
            print(f"\n(a graveyard of {len(whole.graveyard)} ends filled in "
                  f"{time.perf_counter() - started:.1f} s)")
        by_graveyard, by_index = [], []
        for _ in range(lookups):
            by_graveyard.append(_timed(lambda: whole.former(canonical, host)))  # noqa: B023
            by_index.append(_timed(lambda: small.former(canonical, host)))  # noqa: B023
        _ratio(f"a lookup, {count} end(s) under its domain", "the index answering",
               by_index, "the graveyard", by_graveyard)
        before = _redis_usec(store)
        for _ in range(20):
            small.former(canonical, host)
        print(f"  Redis's time per lookup through the index: "
              f"{(_redis_usec(store) - before) / 20 / 1000:.2f} ms")
    whole.close()
    small.close()


def _redis_usec(store: RedisStore) -> int:
    """Redis's own time in its commands so far (INFO commandstats), µs."""
    stats = store.client.execute_command("INFO", "commandstats")
    return sum(int(v["usec"]) for v in stats.values())


def _added(store: RedisStore, name: str, count: int) -> list[Entry]:
    specs = [EntrySpec("url", f"https://{name}.example/item/{n}", "dmca") for n in range(count)]
    return [e for e, _ in store.put_import((), specs, "tns")[1]]


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _ratio(what: str, a: str, xs: list[float], b: str, ys: list[float]) -> None:
    mx, my = statistics.median(xs), statistics.median(ys)
    print(f"\n{what}: {a} {mx * 1e3:.2f} ms, {b} {my * 1e3:.2f} ms (median of {len(xs)}): "
          f"{mx / my:.2f}x")


if __name__ == "__main__":
    raise SystemExit(main())
