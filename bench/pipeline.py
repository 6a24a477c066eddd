"""Benchmark: one result page through a profile (`--profile`), in process, as ratios to orjson.

What is measured, per page size (`--sizes`, default 100 documents):

  (a) `orjson.loads(body)`: the yardstick, about the least work any service does per body;
  (b) `json.dumps(json.loads(body))`: the standard library reading and writing the same
      body, what a pure-Python service spends on JSON alone before any rule;
  (c) `Rearranger.rerank(body)`: the one call into the engine (decode, route, experiments,
      the pipeline, metrics, the response bytes and the audit line), i.e. the whole request
      minus HTTP. Issue 14's goal: (c) <= 1.5x (a) at 100 documents, in rounds of the two.

The time of each rule comes from the engine's own rearrange_rule_duration_seconds.

The functions run interleaved: every round calls each of them once, in an order rotated by
one each round, so a noisy neighbour or a frequency change hits all of them alike. Two sets
of rounds run per size, one after the other: (a) and (c) alone, which gives the goal's
ratio, then (a), (b) and (c). (b)'s Python between the engine's calls evicts the engine's
code and tables from the caches; that costs the engine (a large body of code) more and
orjson (a small one) next to nothing, so (c)/(a) is reported from both sets, and (b) is
compared with the (c) of its own rounds. Each call is timed with
`perf_counter_ns`; the tables give the median, p99 and mean in µs and each of them divided
by the median of (a) of the same rounds. Machines are shared and noisy, so only those ratios,
taken within one run, are comparable between runs and machines; the µs are context.
Nothing here asserts a time.

The page is generated from a seed: documents on ~30 hosts (a few crowded, so host_crowding
acts), scores descending, spam and adult scores mostly low with a few in the grey zone and a
few over the ban thresholds, some young domains, some ads, a few URLs that the banlist
matches, and `unit.user_id` chosen so the `antispam_v7` experiment assigns the treatment.
Texts are left out unless `--text` is given (then near_duplicates has work). The service is
built with `build_services` and an in-memory banlist seeded with `--banlist` generated
host/domain entries; how long seeding took is reported, but it is not part of any ratio.

Run from the repository root:
`python -m bench.pipeline [--sizes 20,100,500] [--text] [--profile commercial]`.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from app.api.services import build_services
from app.config.settings import Settings
from app.engine.service import Rearranger
from bench.pages import MATCHING_BANS, make_serp, write_banlist

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "rules.yaml"
PROFILE = "default"
EXPERIMENT_VARIANT = "treatment"  # so spam_demotion is applied, not shadowed

def ceiling_config(sample: Path = CONFIG) -> str:
    """The --ceiling config (here and in bench.http): the sample's experiments and its default
    profile's depth cut, no other rule, so the response is as large as the full profile's and
    every cost of a request but the rules (routing, bucketing, exposures, metrics) remains."""
    config = yaml.safe_load(sample.read_text())
    depth = [r for r in config["profiles"]["default"]["trim"]
             if r == "depth" or isinstance(r, dict) and "depth" in r]
    ceiling = {"profiles": {"default": {"trim": depth}}}
    if "experiments" in config:
        ceiling["experiments"] = config["experiments"]
    return "# bench.http --ceiling: the sample config with no rule but depth\n" + yaml.safe_dump(
        ceiling, sort_keys=False)


def build(banlist_entries: int, seed: int, max_documents: int,
          config: Path = CONFIG) -> tuple[Rearranger, dict]:
    """The service as `rearrange run` builds it: in-memory banlist (no log file), no audit log."""
    with tempfile.TemporaryDirectory(prefix="rearrange-bench-") as tmp:
        seed_file = Path(tmp) / "banlist.jsonl"
        started = time.perf_counter()
        written = write_banlist(seed_file, banlist_entries, seed)
        wrote = time.perf_counter() - started
        settings = Settings(
            config=config, banlist_seed=seed_file, audit_log=None, redis_url=None,
            admin_tokens="", max_documents=max(1000, max_documents),
        ).model_copy(update={"banlist_path": None})  # the Path field refuses None; copy skips it
        started = time.perf_counter()
        service = build_services(settings).rearranger
        built = time.perf_counter() - started
    return service, {"entries_written": written, "entries_indexed": len(service.store),
                     "write_seconds": wrote, "build_services_seconds": built}


def pick_user(service: Rearranger, variant: str) -> tuple[str, dict[str, str]]:
    """The first `u-NNNNNN` user id that every experiment puts in `variant` (or any variant)."""
    experiments = service.config.engine.experiments
    for i in range(100_000):
        user = f"u-{i:06d}"
        got = {e.name: a[0] for e in experiments if (a := e.assign({"user_id": user}))}
        if all(v == variant for v in got.values()):
            return user, got
    return "u-000000", {}


# --- measuring -----------------------------------------------------------------------------


@dataclass(slots=True)
class Measured:
    """A function under test; `after` sees each result outside the timed region."""

    label: str
    fn: Callable[[], Any]
    after: Callable[[Any], None] | None = None
    samples: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Stats:
    median_us: float
    p99_us: float
    mean_us: float

    @classmethod
    def of(cls, samples_ns: Sequence[int]) -> Stats:
        ordered = sorted(samples_ns)
        p99 = ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]  # nearest rank
        return cls(_median(ordered) / 1e3, p99 / 1e3, sum(ordered) / len(ordered) / 1e3)


def _median(ordered: Sequence[float]) -> float:
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def run_interleaved(measured: Sequence[Measured], iterations: int, warmup: int) -> None:
    """Each round calls every function once, the order rotated by one per round."""
    clock = time.perf_counter_ns
    for _ in range(warmup):
        for m in measured:
            m.fn()
    count = len(measured)
    for r in range(iterations):
        for k in range(count):
            m = measured[(r + k) % count]
            started = clock()
            result = m.fn()
            m.samples.append(clock() - started)
            if m.after is not None:
                m.after(result)


# --- one size ------------------------------------------------------------------------------


def bench_size(service: Rearranger, n: int, args: argparse.Namespace,
               user_id: str) -> dict[str, Any]:
    """Measure (a)-(c) for a page of n documents; returns the figures."""
    page = make_serp(n, args.seed, user_id, args.text)
    if args.profile is not None:
        page["profile"] = args.profile  # forced, as bench.http forces it
    body = orjson.dumps(page)

    def stdlib() -> str:  # the standard library's read and write of the same body
        return json.dumps(json.loads(body))

    status, encoded = service.rerank(body)
    if status != 200:
        raise SystemExit(f"the page was refused ({status}): {encoded[:300]!r}")
    durations = "rearrange_rule_duration_seconds"
    rule_times_before = _rule_times(service, durations)
    def loads() -> Any:
        return orjson.loads(body)

    def engine() -> tuple[int, bytes]:
        return service.rerank(body)

    alone = [Measured("(a) orjson.loads(body)", loads),
             Measured("(c) service.rerank(body)", engine)]
    with_python = [Measured("(a) orjson.loads(body)", loads),
                   Measured("(b) json loads + dumps", stdlib),
                   Measured("(c) service.rerank(body)", engine)]
    gc.collect()
    gc.freeze()
    run_interleaved(alone, args.iterations, args.warmup)
    run_interleaved(with_python, args.iterations, args.warmup)
    rules = _rule_share(rule_times_before, _rule_times(service, durations))
    return figures(n, body, encoded, orjson.loads(encoded), alone, with_python, rules)


def _rule_times(service: Rearranger, name: str) -> dict[tuple[str, ...], tuple[int, float]]:
    """(rule, phase, mode) → (calls, seconds) from the engine's own histogram."""
    series = service.config.engine_metrics.snapshot()["histograms"].get(name, ())
    return {tuple(labels): (sum(counts), total) for labels, counts, total in series}


def _rule_share(before: dict[tuple[str, ...], tuple[int, float]],
                after: dict[tuple[str, ...], tuple[int, float]]) -> list[dict[str, Any]]:
    """Each rule's mean time per call over the run, and its share of all rule time."""
    spent = {k: (calls - before.get(k, (0, 0.0))[0], seconds - before.get(k, (0, 0.0))[1])
             for k, (calls, seconds) in after.items()}
    total = sum(seconds for _, seconds in spent.values()) or 1.0
    return [{"rule": rule, "phase": phase, "mode": mode,
             "mean_us": seconds / calls * 1e6 if calls else 0.0, "share": seconds / total}
            for (rule, phase, mode), (calls, seconds) in spent.items() if calls]


def figures(n: int, body: bytes, encoded: bytes, response: dict[str, Any],
            alone: Sequence[Measured], with_python: Sequence[Measured],
            rules: list[dict[str, Any]]) -> dict[str, Any]:
    """Stats and ratios of one size, as plain data (printed, and written by --json):
    `measurements` from the rounds of (a) and (c), `with_python_path` from those of all
    three, each divided by the median of its own (a)."""
    measurements = _ratios(alone)
    return {
        "documents": n, "body_bytes": len(body), "response_bytes": len(encoded),
        "profile": response["profile"], "orjson_median_us": measurements[0]["median_us"],
        "response": {"documents": len(response["documents"]), "removed": len(response["removed"]),
                     "audit_records": len(response["audit"]),
                     "experiments": response["experiments"]},
        "measurements": measurements,
        "with_python_path": _ratios(with_python),
        "rules": rules,
    }


def _ratios(measured: Sequence[Measured]) -> list[dict[str, Any]]:
    """Each function's stats, and each divided by the median of the first, (a)."""
    stats = [(m.label, Stats.of(m.samples)) for m in measured]
    base = stats[0][1].median_us
    return [{"label": label, "median_us": s.median_us, "p99_us": s.p99_us, "mean_us": s.mean_us,
             "median_ratio": s.median_us / base, "p99_ratio": s.p99_us / base,
             "mean_ratio": s.mean_us / base}
            for label, s in stats]


# --- output --------------------------------------------------------------------------------


def print_size(fig: dict[str, Any], iterations: int) -> None:
    r = fig["response"]
    variants = ", ".join(f"{e['experiment']}={e['variant']}" for e in r["experiments"]) or "none"
    print(f"\n== {fig['documents']} documents, profile {fig['profile']}: body "
          f"{fig['body_bytes'] / 1024:.1f} KiB, response {fig['response_bytes'] / 1024:.1f} KiB "
          f"({r['documents']} kept, {r['removed']} removed, {r['audit_records']} audit records; "
          f"{variants}) ==")
    print(f"{iterations} calls each, interleaved; x = divided by the median of (a) of the same "
          "rounds")
    print(f"{'measured':<30}{'median µs':>11}{'p99 µs':>10}{'mean µs':>10}"
          f"{'median x':>10}{'p99 x':>8}{'mean x':>8}")
    for title, rounds in (("rounds of (a) and (c)", fig["measurements"]),
                          ("rounds of (a), (b) and (c)", fig["with_python_path"])):
        print(f"  {title}")
        for m in rounds:
            print(f"{m['label']:<30}{m['median_us']:>11.1f}{m['p99_us']:>10.1f}"
                  f"{m['mean_us']:>10.1f}{m['median_ratio']:>10.2f}{m['p99_ratio']:>8.2f}"
                  f"{m['mean_ratio']:>8.2f}")
    print(f"\n{'rule (the engine, rearrange_rule_duration_seconds)':<52}{'phase':<13}"
          f"{'mode':<9}{'mean µs':>9}{'share':>8}")
    for rule in fig["rules"]:
        print(f"{rule['rule']:<52}{rule['phase']:<13}{rule['mode']:<9}"
              f"{rule['mean_us']:>9.2f}{rule['share']:>8.1%}")


def print_summary(all_figs: Sequence[dict[str, Any]]) -> None:
    print("\n== summary: (c) the engine's request and (b) the stdlib's JSON, by page size ==")
    print("(c) x from the rounds of (a) and (c); '(b) between' and (b)/(c) from those of all three")
    print(f"{'documents':>9}{'body KiB':>10}{'(c) median x':>14}{'(c) p99 x':>11}"
          f"{'(c) µs/doc':>12}{'(b) between':>13}{'(b)/(c)':>9}{'orjson µs/doc':>15}")
    for fig in all_figs:
        n = fig["documents"]
        c = {m["label"][:3]: m for m in fig["measurements"]}["(c)"]
        with_b = {m["label"][:3]: m for m in fig["with_python_path"]}
        b, c_b = with_b["(b)"], with_b["(c)"]
        print(f"{n:>9}{fig['body_bytes'] / 1024:>10.1f}{c['median_ratio']:>14.2f}"
              f"{c['p99_ratio']:>11.2f}{c['median_us'] / n:>12.2f}{c_b['median_ratio']:>13.2f}"
              f"{b['median_us'] / c_b['median_us']:>9.2f}{fig['orjson_median_us'] / n:>15.3f}")


def environment() -> dict[str, Any]:
    return {"python": sys.version.split()[0], "implementation": platform.python_implementation(),
            "platform": platform.platform(), "processor": _processor(),
            "cpu_count": os.cpu_count(), "commit": _git_commit(),
            "orjson": orjson.__version__}


def _processor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str:
    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--", "app", "config")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{commit} (app/ or config/ modified)" if dirty else commit


def print_header(env: dict[str, Any], seeding: dict[str, Any], user: str,
                 args: argparse.Namespace) -> None:
    print("Rearrange pipeline benchmark (python -m bench.pipeline)")
    print(f"python {env['python']} ({env['implementation']}), orjson {env['orjson']}")
    print(f"machine {env['processor']}, {env['cpu_count']} CPUs, {env['platform']}")
    print(f"commit {env['commit']}")
    if args.ceiling:
        print("config: the ceiling (the sample's experiments and depth cut, no other rule)")
    print(f"banlist: {seeding['entries_indexed']:,} entries indexed ({args.banlist:,} generated "
          f"host/domain + {len(MATCHING_BANS)} matching the page); file written in "
          f"{seeding['write_seconds']:.2f} s, build_services (read, validate, index, load config) "
          f"{seeding['build_services_seconds']:.2f} s; not part of any ratio")
    print(f"page seed {args.seed}, texts {'on' if args.text else 'off'}, unit.user_id {user}; "
          f"{args.warmup} warm-up calls each, gc.collect() + gc.freeze() after setup")


# --- main ----------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.pipeline",
                                     description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="100",
                        type=lambda s: [int(x) for x in s.split(",") if x.strip()],
                        help="documents per page, comma-separated (default 100)")
    parser.add_argument("--iterations", type=int, default=2000,
                        help="timed calls per function and size (default 2000)")
    parser.add_argument("--warmup", type=int, default=200,
                        help="untimed calls per function first (default 200)")
    parser.add_argument("--banlist", type=int, default=100_000,
                        help="generated banlist entries (default 100000)")
    parser.add_argument("--text", action="store_true",
                        help="give every page ~300 words of text (near_duplicates then works)")
    parser.add_argument("--seed", type=int, default=2024, help="page and banlist seed")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here")
    parser.add_argument("--profile", metavar="NAME",
                        help="force the body's `profile` (default: routed by the query, i.e. "
                             "default); `commercial` runs anti_seo_reset on most documents")
    parser.add_argument("--ceiling", action="store_true",
                        help="serve the sample config with no rule but depth (ceiling_config)")
    args = parser.parse_args(argv)
    if not args.sizes or min(args.sizes) < 1 or args.iterations < 1 or args.warmup < 0:
        parser.error("sizes and iterations must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    env = environment()
    with tempfile.TemporaryDirectory(prefix="rearrange-bench-config-") as tmp:
        config = CONFIG
        if args.ceiling:
            config = Path(tmp) / "ceiling.yaml"
            config.write_text(ceiling_config())
        service, seeding = build(args.banlist, args.seed, max(args.sizes), config)
    user, _ = pick_user(service, EXPERIMENT_VARIANT)
    print_header(env, seeding, user, args)
    results = []
    for n in args.sizes:
        fig = bench_size(service, n, args, user)
        print_size(fig, args.iterations)
        results.append(fig)
    print_summary(results)
    if args.json is not None:
        report = {"environment": env, "banlist": seeding, "seed": args.seed, "text": args.text,
                  "ceiling": args.ceiling,
                  "iterations": args.iterations, "warmup": args.warmup, "user_id": user,
                  "sizes": results}
        args.json.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
        print(f"\nfigures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
