"""What a bulk removal costs (`POST /v1/banlist/remove`), and `rearrange banlist list` at N rows.

Usage: python -m bench.bulk_remove [--entries 100000] [--keep 1000] [--no-redis] [--no-list]

- **embedded**: an embedded store with a log file holds `--entries` entries of one
  campaign (actor `campaign`) and `--keep` others; the removal of the campaign's, timed,
  with the process's peak RSS growth while it runs;
- **redis**: the same list in its own `redis-server` (AOF fsynced on every write, as
  deploy/redis/primary.conf), a writer in this process and a second replica in its own:
  the removal as the writer answers it, until the second replica serves it, the scripts
  Redis ran (SLOWLOG: in all, the longest), what Redis's memory grew by (the removals'
  records in the changelog and the history stream) and each replica's peak RSS growth;
- **list**: a `rearrange serve` seeded with the entries, and `rearrange banlist list
  --limit 0` into /dev/null, plain and with a filter, then with `--json`.
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

import orjson
import redis

from app.banlist.base import EntrySpec
from app.banlist.embedded.store import EmbeddedStore
from app.banlist.redis.store import RedisStore
from app.banlist.selection import Selection
from app.observability.metrics import Metrics
from bench.replicas import free_port

CAMPAIGN = Selection(actor="campaign")


def specs(n: int, keep: int) -> list[EntrySpec]:
    """n entries of one campaign, then `keep` others (each spec naming who banned it)."""
    return [*(EntrySpec("host", f"h{i}.camp{i % 97}.example", "campaign 7", actor="campaign")
              for i in range(n)),
            *(EntrySpec("domain", f"keep{i}.example", "court order", actor="legal")
              for i in range(keep))]


def rss_mib(field: str = "VmRSS") -> float:
    """This process's resident memory (VmHWM: its peak since the last reset_peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS (Linux ≥ 4.0)


def bench_embedded(work: Path, n: int, keep: int) -> None:
    store = EmbeddedStore(work / "embedded.jsonl")
    store.seed(specs(n, keep), "seed")
    reset_peak()
    before = rss_mib()
    t0 = time.perf_counter()
    removed = store.remove_matching(CAMPAIGN, "tns", "undo campaign 7")
    took = time.perf_counter() - t0
    print(f"embedded: removed {removed:,} of {n + keep:,} entries in {took:.2f} s "
          f"(one transaction, one index batch); peak RSS +{rss_mib('VmHWM') - before:.0f} "
          f"MiB, left {len(store):,}")
    store.close()


def start_redis(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([shutil.which("redis-server") or "/usr/bin/redis-server",
                             "--port", str(port), "--save", "", "--appendonly", "yes",
                             "--appendfsync", "always", "--dir", str(work)],
                            stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(500):
        try:
            if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                              text=True).stdout.strip() == "PONG":
                return proc, url
        except FileNotFoundError:
            break
        time.sleep(0.02)
    proc.kill()
    raise SystemExit("redis-server did not start (is redis-cli installed?)")


def follow(url: str, version: int) -> None:
    """A second replica (its own process, as in a deployment): prints the wall time at which
    it serves `version`, and its peak RSS growth meanwhile."""
    store = RedisStore(url, Metrics(), None, block_seconds=0.5)
    store.start()
    reset_peak()
    before = rss_mib()
    print("ready", flush=True)
    while store.version < version:
        time.sleep(0.005)
    print(f"{time.time()} {rss_mib('VmHWM') - before:.0f}", flush=True)
    store.close()


def bench_redis(work: Path, n: int, keep: int) -> None:
    proc, url = start_redis(work)
    try:
        a = RedisStore(url, Metrics(), None, block_seconds=0.5)
        a.start()
        a.seed(specs(n, keep), "seed")
        client = redis.Redis.from_url(url, decode_responses=True)
        client.config_set("slowlog-log-slower-than", 10_000)
        client.config_set("slowlog-max-len", 100_000)
        client.slowlog_reset()
        memory = client.info("memory")["used_memory"]
        b = subprocess.Popen([sys.executable, "-m", "bench.bulk_remove", "--follow", url,
                              str(a.version + n)], stdout=subprocess.PIPE, text=True)
        assert b.stdout is not None and b.stdout.readline().strip() == "ready"
        reset_peak()
        before = rss_mib()
        t0, wall = time.perf_counter(), time.time()
        removed = a.remove_matching(CAMPAIGN, "tns", "undo campaign 7")
        answered = time.perf_counter() - t0
        served_at, b_rss = b.stdout.readline().split()
        b.wait(60)
        slow = [e["duration"] for e in client.slowlog_get(100_000)
                if bytes(e["command"]).upper().startswith(b"EVALSHA")]
        grown = client.info("memory")["used_memory"] - memory
        print(f"redis: removed {removed:,} of {n + keep:,} entries; answered in {answered:.2f} s, "
              f"a second replica (its own process) serving it {float(served_at) - wall:.2f} s "
              f"after the call; {len(slow)} scripts over 10 ms taking {sum(slow) / 1e6:.2f} s "
              f"of Redis in all, the longest {max(slow, default=0) / 1000:.0f} ms; Redis memory "
              f"+{grown / 2**20:.0f} MiB ({grown / max(removed, 1):.0f} B a removal); peak RSS "
              f"+{rss_mib('VmHWM') - before:.0f} MiB on the writer, +{b_rss} MiB on the other")
        a.close()
    finally:
        proc.kill()
        proc.wait()


def bench_list(work: Path, n: int, keep: int) -> None:
    seed = work / "seed.jsonl"
    seed.write_bytes(b"".join(orjson.dumps({"scope": s.scope, "value": s.value,
                                            "reason": s.reason, "actor": s.actor}) + b"\n"
                              for s in specs(n, keep)))
    config = work / "rules.yaml"
    config.write_text("profiles: {default: {pre-filter: [banlist]}}")
    port = free_port()
    env = {**os.environ, "REARRANGE_CONFIG": str(config), "REARRANGE_CONFIG_POLL_SECONDS": "0",
           "REARRANGE_BANLIST_PATH": str(work / "served.jsonl"),
           "REARRANGE_BANLIST_SEED": str(seed), "REARRANGE_ADMIN_TOKENS": "tns:t",
           "REARRANGE_DATA_PORT": str(free_port())}
    env.pop("REDIS_URL", None)
    server = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
                              env=env, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            done = subprocess.run(["curl", "-sf", f"{base}/readyz"], capture_output=True)
            if done.returncode == 0:
                break
            time.sleep(0.1)
        for extra in ((), ("--actor", "campaign", "--value-suffix", ".camp7.example"),
                      ("--json",)):
            cmd = [sys.executable, "-m", "app.cli", "banlist", "--url", base, "list",
                   "--limit", "0", *extra]
            t0 = time.perf_counter()
            with open(os.devnull, "w") as sink:
                subprocess.run(cmd, stdout=sink, stderr=subprocess.PIPE, check=True)
            print(f"list {' '.join(extra) or '(every entry)'}: "
                  f"{time.perf_counter() - t0:.2f} s")
    finally:
        server.terminate()
        server.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--keep", type=int, default=1_000)
    parser.add_argument("--no-redis", action="store_true")
    parser.add_argument("--no-list", action="store_true")
    parser.add_argument("--follow", nargs=2, metavar=("URL", "VERSION"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.follow:
        follow(args.follow[0], int(args.follow[1]))
        return 0
    work = Path(tempfile.mkdtemp(prefix="rearrange-bulk-"))
    try:
        bench_embedded(work, args.entries, args.keep)
        if not args.no_redis:
            bench_redis(work, args.entries, args.keep)
        if not args.no_list:
            bench_list(work, args.entries, args.keep)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
