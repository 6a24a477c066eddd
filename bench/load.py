"""`make load`: the staging load test (bench/locustfile.py) against local replicas.

Usage: python -m bench.load [--replicas 2] [--seconds 60] [--users 16] [--soak]
       SOAK=1 make load        # 10 minutes, and memory must stay flat

Starts `--replicas` `rearrange serve` processes on free ports (embedded banlist seeded
with `--banlist` generated entries; with REDIS_URL in the environment they all use that
Redis instead), runs locust headless for a bounded time with the users spread over the
replicas, and prints throughput, latency percentiles and errors per request kind, the CPU
the load generator and the replicas used, and each replica's RSS at start, after warm-up
and at the end. It fails (exit 1) on any error, on a replica that does not shut down
cleanly, and in soak mode when a replica's RSS grew after warm-up by more than
max(--rss-growth-mib, --rss-growth-pct % of its warm RSS).

Locust generates load in one Python process: it needs CPU too, so on a small machine the
figures are bounded by the generator and the replicas sharing cores (the CPU line shows
how much each used). Compare runs on the same machine only.
"""
from __future__ import annotations

import argparse
import csv
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from bench import replicas
from bench.pages import write_banlist

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
CONFIG = replicas.ROOT / "config" / "rules.yaml"
SOAK_SECONDS = 600
# uvicorn finishes in-flight requests on SIGTERM, then re-raises the signal: -15 is clean.
CLEAN_EXIT = (0, -signal.SIGTERM)


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process so far (seconds)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu(replica: replicas.Replica) -> float:
    return sum(cpu_seconds(p) for p in replicas._tree(replica.proc.pid))


class RssSampler(threading.Thread):
    """Samples every replica's RSS every `every` seconds while the load runs."""

    def __init__(self, fleet: list[replicas.Replica], every: float) -> None:
        super().__init__(daemon=True)
        self.fleet, self.every = fleet, every
        self.samples: list[tuple[float, list[float]]] = []
        self.done = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        while not self.done.wait(self.every):
            self.samples.append((time.monotonic() - started, [r.rss_mib() for r in self.fleet]))

    def at(self, seconds: float) -> list[float]:
        """The first sample at or after `seconds` (the last one if the run was shorter)."""
        for t, values in self.samples:
            if t >= seconds:
                return values
        return self.samples[-1][1] if self.samples else [0.0] * len(self.fleet)

    def peak(self) -> list[float]:
        return [max(s[1][i] for s in self.samples) if self.samples else 0.0
                for i in range(len(self.fleet))]


def memory_growth(warm: float, end: float, limit_mib: float, limit_pct: float) -> str | None:
    """Why a replica's memory is not flat (None when it is): growth after warm-up over
    max(limit_mib, limit_pct % of the warm RSS)."""
    allowed = max(limit_mib, warm * limit_pct / 100)
    if end - warm > allowed:
        return f"RSS grew {end - warm:.0f} MiB after warm-up (allowed {allowed:.0f} MiB)"
    return None


def counter_sum(metrics_text: str, name: str) -> float:
    """Sum of every labelled sample of one counter in Prometheus text."""
    total = 0.0
    for line in metrics_text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def read_stats(prefix: Path) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    stats_file = prefix.with_name(prefix.name + "_stats.csv")
    failures_file = prefix.with_name(prefix.name + "_failures.csv")
    if not stats_file.exists():
        raise SystemExit(f"locust wrote no {stats_file.name}")
    with stats_file.open() as fh:
        stats = list(csv.DictReader(fh))
    failures = []
    if failures_file.exists():
        with failures_file.open() as fh:
            failures = list(csv.DictReader(fh))
    return stats, failures


def print_stats(stats: list[dict[str, str]], seconds: float) -> int:
    """The locust table, one row per request kind; returns the failure count."""
    head = (f"{'request':<38}{'count':>8}{'fail':>6}{'req/s':>8}{'p50':>6}{'p90':>6}"
            f"{'p99':>6}{'p99.9':>7}{'max':>7}  (ms)")
    print(head)
    print("-" * len(head))
    total_failures = 0
    for row in stats:
        name = row["Name"] if row["Type"] else "all requests"
        count, failures = int(row["Request Count"]), int(row["Failure Count"])
        if not row["Type"]:
            total_failures = failures
            print("-" * len(head))
        print(f"{name[:37]:<38}{count:>8}{failures:>6}{count / seconds:>8.1f}"
              f"{row['50%']:>6}{row['90%']:>6}{row['99%']:>6}{row['99.9%']:>7}"
              f"{float(row['Max Response Time']):>7.0f}")
    return total_failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1,
                        help="uvicorn workers per replica (more than 1 needs REDIS_URL)")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--soak", action="store_true",
                        help=f"{SOAK_SECONDS // 60} minutes and the flat-memory check "
                        "(also SOAK=1)")
    parser.add_argument("--users", type=int, default=16,
                        help="simulated frontends (+1 T&S writer); modest on a 2-core machine")
    parser.add_argument("--spawn-rate", type=float, default=8)
    parser.add_argument("--banlist", type=int, default=100_000,
                        help="generated entries seeded into each embedded store")
    parser.add_argument("--rss-growth-mib", type=float, default=32)
    parser.add_argument("--rss-growth-pct", type=float, default=5)
    args = parser.parse_args()
    if args.workers > 1 and not os.environ.get("REDIS_URL"):
        parser.error("--workers above 1 needs REDIS_URL: with the embedded banlist each worker "
                     "would keep its own copy while the T&S writer changes one of them")
    soak = args.soak or os.environ.get("SOAK", "") not in ("", "0")
    seconds = SOAK_SECONDS if soak else args.seconds
    warm_at = min(60.0, seconds * 0.2)  # caches and pools fill first: memory is judged after

    work = replicas.scratch_dir("rearrange-load-")
    seed = work / "banlist-seed.jsonl"
    entries = write_banlist(seed, args.banlist, 2024)
    token = secrets.token_hex(16)
    env = replicas.base_env(REARRANGE_CONFIG=str(CONFIG), REARRANGE_BANLIST_SEED=str(seed),
                            REARRANGE_ADMIN_TOKENS=f"loadtest:{token}",
                            REARRANGE_CONFIG_POLL_SECONDS="1",
                            # the T&S writer bans hosts the load's own pages serve: with the
                            # review on, every ban would wait for a second person
                            REARRANGE_BAN_REVIEW_SHARE="1")
    store = f"Redis at {env['REDIS_URL']}" if env.get("REDIS_URL") else \
        f"embedded, {entries} entries each"
    print(f"starting {args.replicas} replica(s) x {args.workers} worker(s); banlist: {store}",
          flush=True)
    fleet = replicas.start(args.replicas, work, env, workers=args.workers)
    try:
        replicas.wait_ready(fleet, timeout=600)
        rss_start = [r.rss_mib() for r in fleet]
        cpu_start = [tree_cpu(r) for r in fleet]
        mode = "soak" if soak else "run"
        print(f"ready: {', '.join(r.url for r in fleet)}; {mode} of {seconds}s with "
              f"{args.users} frontend users + 1 T&S writer", flush=True)
        prefix = work / "locust"
        sampler = RssSampler(fleet, every=5.0)
        sampler.start()
        started = time.monotonic()
        before = os.times()
        locust = subprocess.run(
            [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
             "--host", fleet[0].url, "-u", str(args.users + 1), "-r", str(args.spawn_rate),
             "-t", f"{seconds}s", "--stop-timeout", "5", "--csv", str(prefix),
             "--only-summary", "--loglevel", "WARNING"],
            cwd=replicas.ROOT, capture_output=True, text=True,
            env={**env, "REARRANGE_TARGETS": ",".join(r.url for r in fleet),
                 "REARRANGE_WRITE_TOKEN": token})
        elapsed = time.monotonic() - started
        after = os.times()
        sampler.done.set()
        sampler.join()
        rss_end = [r.rss_mib() for r in fleet]
        cpu_used = [tree_cpu(r) - c for r, c in zip(fleet, cpu_start, strict=True)]
        versions = []
        skipped = 0.0
        for r in fleet:
            try:
                versions.append(httpx.get(f"{r.url}/readyz", timeout=2).json()["banlist_version"])
                skipped += counter_sum(httpx.get(f"{r.url}/metrics", timeout=2).text,
                                       "rearrange_rule_skipped_total")
            except (httpx.HTTPError, ValueError, KeyError):
                versions.append(None)
    finally:
        codes = replicas.stop(fleet)
    if locust.returncode not in (0, 1):  # 1 = the run had failures; the table says which
        print(locust.stdout[-3000:], locust.stderr[-3000:], sep="\n")
        raise SystemExit(f"locust exited with {locust.returncode}")
    stats, failures = read_stats(prefix)
    run_seconds = min(elapsed, seconds)
    print()
    failed = print_stats(stats, run_seconds)
    for f in failures:
        print(f"  error x{f['Occurrences']}: {f['Method']} {f['Name']}: {f['Error'][:300]}")
    reranks = sum(int(row["Request Count"]) for row in stats
                  if row["Type"] and row["Name"].startswith("/v1/rerank"))
    print(f"optional rules skipped past REARRANGE_DEADLINE_MS: {skipped:.0f} "
          f"({100 * skipped / max(reranks, 1):.2f} % of {reranks} reranks)")
    locust_cpu = (after.children_user + after.children_system
                  - before.children_user - before.children_system)
    print(f"\nCPU over {elapsed:.0f}s: locust {locust_cpu / elapsed:.2f} cores, replicas "
          + ", ".join(f"{c / elapsed:.2f}" for c in cpu_used)
          + f" cores (machine: {os.cpu_count()} cores)")
    warm, peak = sampler.at(warm_at), sampler.peak()
    print(f"{'replica':<26}{'RSS start':>10}{'warm':>8}{'peak':>8}{'end':>8}  MiB"
          f"   banlist_version  exit")
    problems = []
    for i, r in enumerate(fleet):
        print(f"{r.url:<26}{rss_start[i]:>10.0f}{warm[i]:>8.0f}{peak[i]:>8.0f}"
              f"{rss_end[i]:>8.0f}{versions[i]!s:>18}{codes[i]!s:>6}")
        if soak:
            problem = memory_growth(warm[i], rss_end[i], args.rss_growth_mib,
                                    args.rss_growth_pct)
            if problem:
                problems.append(f"{r.url}: {problem}")
        if codes[i] not in CLEAN_EXIT:
            problems.append(f"{r.url}: exited with {codes[i]} on SIGTERM:\n{r.tail(1500)}")
    if failed:
        problems.append(f"{failed} request(s) failed")
    if soak:
        print(f"flat-memory check: end - warm (at {warm_at:.0f}s) <= max({args.rss_growth_mib:.0f}"
              f" MiB, {args.rss_growth_pct:.0f}% of warm)")
    shutil.rmtree(work, ignore_errors=True)
    if problems:
        print("\nFAILED:\n  " + "\n  ".join(problems))
        return 1
    print(f"\nOK: 0 errors{', flat memory' if soak else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
