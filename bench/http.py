"""HTTP throughput, latency and CPU per request with wrk: Rearrange against the floor, side by
side in one run.

Usage: python -m bench.http [--servers echo,bare,python] [--sizes 20,100,500] [--threads 1,2]
                            [--banlist 1000000] [--profiles default,commercial] [--seconds 8]
                            [--connections 32] [--rounds 3] [--fixed-rate 0.7] [--json PATH]
                            [--against REV] [--engine SO] [--ceiling] [--quota 0.65]

The servers (`--servers`, bench/http_servers.py; every ratio is to the first named):
`echo` the floor, bench/echo (hyper on tokio parsing the body with sonic-rs and writing it
back; built with cargo on first use), `echo-serde` the same with serde_json::Value,
`echo-pgo` the same echo built with profile-guided optimization as the image's engine is
(instrumented, trained for 2 s on each page of the run, built again: like with like beside
a `native` server on the PGO engine, `make pgo`), `bare`
bench/bare_app.py (uvicorn, orjson), `python` Rearrange on uvicorn (`rearrange serve`, the
FastAPI path), `native` `rearrange serve`'s native data-plane listener on the port
REARRANGE_DATA_PORT names. Rearrange serves the same page through each profile of
`--profiles` (forced by the body's `profile`) with a banlist of `--banlist` entries and the
sample config's experiment in shadow (the unit is in `control`, so spam_demotion runs in
shadow); the echo servers answer any path.

`--threads`: the echo's and the native listener's serving threads, uvicorn's worker
processes for `python` and `bare`. For each thread count, profile and page size the servers
are measured in `--rounds` rounds, each server once a round, one right after the other.
Columns: req/s, p50 and p99 (ms) are each server's best run; `CPU µs` is the CPU time
(user + system, every process of the server, from /proc/<pid>/stat) over the run divided by
the requests wrk reports, the median run's: the figure that holds steady on a shared machine
where req/s does not; `cores` the server's CPU seconds per second of the run, `wrk` the load
generator's own; `req/s x`, `p99 x`, `CPU x` the medians of each round's ratio to the first
server's run of that round. When the threads leave a core free, every server is pinned to
the threads' cores and wrk to the others (`cores_for`; 1 or 2 wrk threads, `wrk_threads`).
With several thread counts, `scaling` lines give req/s and CPU per request at the most over
the fewest, beside the cores wrk took; RSS (VmRSS of every process of the server, after
serving all rows) is printed per thread count. Needs `wrk` (Debian package).

`--fixed-rate F`: after each row's rounds, every server once more at F times its best
req/s with bench/pace (built with cargo on first use), latencies corrected for coordinated
omission (from when each request was due): its p50, p99 and p99/p50, and `late`, the
generator's own p99 lateness (a run its host held up shows there).

`--against REV` also serves Rearrange as of a git revision (checked out into a temporary
worktree, run on this virtualenv, with its own copy of the banlist log) in the same
alternation, and prints `python`'s req/s over that revision's: the head-to-head figure for
a change to the request path. `--ceiling` also serves Rearrange with a profile that runs
only `depth` (`ceiling_config`: the same response size and experiments, no other rule).
`--engine SO` also serves the native path, as `engine`, with another build of this
commit's engine (an app/_engine*.so file: the plain release build beside the PGO one that
app/ holds after `make pgo`, say).

`--quota CORES` puts each server in a cgroup of its own whose CFS quota is CORES of CPU
time per serving thread (bench/cpuquota.py; needs a writable cgroup cpu controller): on a
2-core machine that wrk shares, 2 threads at 2 x CORES against 1 at CORES is the scaling
figure, and a budget above one core shows whether the threads run side by side.

`--json PATH` writes every figure: each row's servers with their runs summed up (and the
fixed-rate run), the RSS per thread count and the scaling.

Issue 47's goals: the native path's CPU per request <= 1.3x the echo's at 100 and 500
documents and <= 1.5x at 20; req/s with 2 threads >= 1.8x one thread's; p99 <= 3x p50 at
70 % of the maximum; RSS with 2 threads within 10 % of one thread's at 1 M entries.
Issue 14's, read with `--servers bare,python`: Rearrange >= 0.8x the bare app's req/s and
p99 <= 1.5x its p99 at 100 documents, 1 worker; >= 0.7x at 20 and 500 documents.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from app.banlist.bulk import read_file
from app.banlist.embedded.store import EmbeddedStore
from app.config.load import load_file
from bench import cpuquota
from bench.http_load import WRK_LUA, build_pace, fixed_rate, pace, wrk, wrk_threads
from bench.http_report import print_row, print_summary, scaling, summarize
from bench.http_servers import (
    ROOT,
    SERVERS,
    Server,
    build_echo,
    build_echo_pgo,
    cores_for,
    make,
    serving,
)
from bench.pages import make_serp, write_banlist
from bench.pipeline import ceiling_config
from bench.procstat import group_pids, rss_kib
from bench.replicas import free_port


@contextlib.contextmanager
def revision_tree(rev: str, where: Path, build: bool = True) -> Iterator[Path]:
    """This repository at `rev`, checked out (detached) into `where`, removed afterwards.

    `python -m app.cli` run from that directory imports its `app`, not this checkout's; a
    revision with the Rust engine gets its own build of it, in place in that tree (unless
    not `build`: a release build of the engine takes a minute and a half).
    """
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet",
                    str(where), rev], check=True)
    try:
        if build and (where / "crates").is_dir():
            maturin = Path(sys.executable).with_name("maturin")
            subprocess.run([str(maturin), "develop", "--release", "--skip-install", "--quiet"],
                           cwd=where, check=True,
                           # this checkout's target dir: the dependencies are built already
                           env={**os.environ, "VIRTUAL_ENV": str(Path(sys.prefix)),
                                "CARGO_TARGET_DIR": str(ROOT / "target")})
        yield where
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)],
                       check=True)


def control_user() -> str:
    """A user id that every experiment of the sample config puts in `control` (shadow)."""
    experiments = load_file(ROOT / "config" / "rules.yaml").experiments
    for i in range(100_000):
        user = f"u-{i:06d}"
        got = [e.assign({"user_id": user}) for e in experiments]
        if got and all(a is not None and a[0] == "control" for a in got):
            return user
    raise SystemExit("no user id falls in control of every experiment")


def prepare_banlist(tmp: Path, entries: int) -> tuple[Path, float]:
    """An embedded-store log of `entries` bans that every server replays at start."""
    seed = tmp / "seed.jsonl"
    write_banlist(seed, entries, 2024)
    log = tmp / "banlist.jsonl"
    started = time.monotonic()
    EmbeddedStore(log).seed(read_file(seed)[1])
    return log, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default="echo,bare,python",
                        help=f"comma-separated, the reference first (of {', '.join(SERVERS)})")
    parser.add_argument("--sizes", default="20,100,500")
    parser.add_argument("--threads", "--workers", default="1,2", dest="threads",
                        help="serving threads (echo, native) or uvicorn workers (python, "
                             "bare), each a block of rows")
    parser.add_argument("--banlist", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of each server per row; the ratios are the rounds' medians")
    parser.add_argument("--profiles", default="default,commercial",
                        help="profiles to serve the page through, each its own row")
    parser.add_argument("--fixed-rate", type=float, metavar="F",
                        help="also run each server at F times its max req/s (bench/pace), "
                             "p50/p99")
    parser.add_argument("--quota", type=float, metavar="CORES",
                        help="give each server CORES of CPU time per serving thread (a cgroup's "
                             "CFS quota; bench/cpuquota.py), wrk the rest: 2 threads against 1 "
                             "on a machine wrk shares")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--against", metavar="REV",
                        help="also serve Rearrange at this git revision, head to head")
    parser.add_argument("--engine", type=Path, metavar="SO",
                        help="also serve the native path with this build of the engine (an "
                             "app/_engine*.so: the plain release build beside a PGO one, say)")
    parser.add_argument("--ceiling", action="store_true",
                        help="also serve Rearrange with only the depth rule (ceiling_config)")
    args = parser.parse_args(argv)
    unknown = set(args.servers.split(",")) - set(SERVERS)
    if unknown:
        parser.error(f"--servers: unknown {', '.join(sorted(unknown))} "
                     f"(known: {', '.join(SERVERS)})")
    if args.fixed_rate is not None:
        try:  # a bad fraction fails now, not after the rounds
            fixed_rate(1.0, args.fixed_rate)
        except ValueError as e:
            parser.error(str(e))
    if args.quota is not None:
        if not 0 < args.quota <= 1:
            parser.error("--quota: a fraction of one core, above 0 and at most 1")
        why = cpuquota.available()
        if why is not None:
            print(f"--quota: {why}", file=sys.stderr)
            return 2
    if shutil.which("wrk") is None:
        print("wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="rearrange-http-") as name, \
            contextlib.ExitStack() as stack:
        tmp = Path(name)
        against = (stack.enter_context(revision_tree(args.against, tmp / "against"))
                   if args.against else None)
        engine_tree = None
        if args.engine is not None:  # this commit's code with that engine beside it
            engine_tree = stack.enter_context(revision_tree("HEAD", tmp / "engine", build=False))
            engines = list((ROOT / "app").glob("_engine*.so"))
            if len(engines) != 1:
                raise SystemExit(f"--engine: app/ holds {len(engines)} engine builds "
                                 "(_engine*.so), not one: build it (make run) first")
            shutil.copyfile(args.engine, engine_tree / "app" / engines[0].name)
        report = measure(args, tmp, against, engine_tree)
    if args.json:
        args.json.write_text(json.dumps({"command": sys.argv, **report}, indent=2))
    return 0


def measure(args: argparse.Namespace, tmp: Path, against: Path | None,
            engine_tree: Path | None = None) -> dict:
    """Every row of the table, printed as it is measured, then RSS and scaling;
    `engine_tree`: the worktree holding --engine's build."""
    names = args.servers.split(",")
    echo = build_echo() if {"echo", "echo-serde"} & set(names) else None
    pacer = build_pace() if args.fixed_rate is not None else None
    log, seeded = prepare_banlist(tmp, args.banlist)
    user = control_user()
    rows_asked = [(p, int(s)) for p in args.profiles.split(",") for s in args.sizes.split(",")]
    for profile, size in rows_asked:
        body_path(tmp, profile, size).write_bytes(orjson.dumps(
            {**make_serp(size, 2024, user, False), "profile": profile}))
    echo_pgo = (build_echo_pgo([body_path(tmp, p, s) for p, s in rows_asked],
                               functools.partial(train_echo, args.connections))
                if "echo-pgo" in names else None)
    print(f"banlist: {args.banlist:,} entries seeded in {seeded:.1f} s (not measured); "
          f"unit {user} is in control of every experiment (gated rules run in shadow)")
    # read-only: the 2-worker rows serve one embedded log from two processes, which a
    # writable store refuses (each worker would append to it on its own)
    env = {**os.environ, "REARRANGE_BANLIST_PATH": str(log), "REARRANGE_LOG_LEVEL": "warning",
           "REARRANGE_BANLIST_READ_ONLY": "true",
           "REARRANGE_CONFIG_POLL_SECONDS": "1", "REARRANGE_MAX_DOCUMENTS": "1000"}
    env.pop("REDIS_URL", None)
    extra = extra_servers(args, tmp, env, log, against, engine_tree)
    rows: list[dict] = []
    rss: dict[int, dict[str, float]] = {}
    for threads in [int(x) for x in args.threads.split(",")]:
        wrk_t = wrk_threads(threads, args.connections)
        pinned = cores_for(threads)
        server_cores, wrk_cores = pinned if pinned is not None else (None, None)
        budget = None if args.quota is None else args.quota * threads
        print(f"{threads} thread(s): wrk runs {wrk_t} thread(s), {args.connections} "
              f"connections, on {os.cpu_count()} cores"
              + (f"; servers pinned to CPU {sorted(pinned[0])}, wrk to {sorted(pinned[1])}"
                 if pinned else "; nothing pinned")
              + (f"; each server limited to {budget:g} cores" if budget else ""), flush=True)
        ports = iter(distinct_ports(2 * len(names) + 2 * len(extra)))
        servers = [make(name, threads, next(ports), env, echo, next(ports), echo_pgo=echo_pgo)
                   for name in names]
        servers += [dataclasses.replace(make(kind, threads, next(ports), e, echo, next(ports),
                                             cwd), name=name)
                    for name, kind, e, cwd in extra]
        with serving(servers, server_cores, budget) as procs:
            groups = {s.name: p.pid for s, p in zip(servers, procs, strict=True)}
            for profile, size in rows_asked:
                body = body_path(tmp, profile, size)
                rows.append({"threads": threads, "profile": profile, "documents": size,
                             "kib": body.stat().st_size / 1024, "wrk_threads": wrk_t,
                             "rounds": args.rounds, "servers": measure_row(
                                 args, servers, groups, body, wrk_t, wrk_cores, pacer)})
                print_row(rows[-1], header=len(rows) == 1, fraction=args.fixed_rate)
            rss[threads] = {name: rss_kib(group_pids(pgid)) / 1024
                            for name, pgid in groups.items()}
    scaled = scaling(rows)
    print_summary(rss, scaled)
    return {"servers": names, "reference": names[0], "rows": rows, "rss_mib": rss,
            "scaling": scaled}


def body_path(tmp: Path, profile: str, size: int) -> Path:
    """Where the page of a row is written: every server of the row is sent these bytes."""
    return tmp / f"body-{profile}-{size}.json"


def train_echo(connections: int, port: int, body: Path, seconds: int = 2) -> None:
    """echo-pgo's training on one page: wrk posts it for `seconds`."""
    script = body.with_suffix(".train.lua")
    script.write_text(WRK_LUA.replace("{body}", str(body)))
    subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script),
                    f"http://127.0.0.1:{port}/"], check=True, stdout=subprocess.DEVNULL)


def distinct_ports(count: int) -> list[int]:
    """`count` free ports, all different: drawn before any server binds one, the system may
    hand the same port out twice."""
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(free_port())
    return sorted(ports)


def extra_servers(args: argparse.Namespace, tmp: Path, env: dict[str, str], log: Path,
                  against: Path | None, engine_tree: Path | None = None
                  ) -> list[tuple[str, str, dict[str, str], Path]]:
    """The Rearrange servers --against, --engine and --ceiling add: name, kind (`make`'s
    name), environment, directory."""
    extra = []
    if against is not None:  # its own copy: an embedded store appends to its log
        against_env = {**env, "REARRANGE_BANLIST_PATH": str(tmp / "banlist-against.jsonl")}
        shutil.copyfile(log, against_env["REARRANGE_BANLIST_PATH"])
        extra.append(("against", "python", against_env, against))
    if engine_tree is not None:
        engine_env = {**env, "REARRANGE_BANLIST_PATH": str(tmp / "banlist-engine.jsonl")}
        shutil.copyfile(log, engine_env["REARRANGE_BANLIST_PATH"])
        extra.append(("engine", "native", engine_env, engine_tree))
    if args.ceiling:
        ceiling_env = {**env, "REARRANGE_BANLIST_PATH": str(tmp / "banlist-ceiling.jsonl"),
                       "REARRANGE_CONFIG": str(tmp / "ceiling.yaml")}
        shutil.copyfile(log, ceiling_env["REARRANGE_BANLIST_PATH"])
        (tmp / "ceiling.yaml").write_text(ceiling_config())
        extra.append(("ceiling", "python", ceiling_env, ROOT))
    return extra


def measure_row(args: argparse.Namespace, servers: list[Server], groups: dict[str, int],
                body: Path, wrk_t: int, wrk_cores: set[int] | None,
                pacer: Path | None = None) -> dict[str, dict]:
    """One page through every server: the rounds of wrk, then (--fixed-rate, `pacer` the
    bench/pace binary) one fixed-rate run each at that fraction of its best req/s."""
    script = body.with_suffix(".lua")
    script.write_text(WRK_LUA.replace("{body}", str(body)))
    runs: dict[str, list[dict[str, float]]] = {s.name: [] for s in servers}
    for _ in range(args.rounds):
        for s in servers:
            runs[s.name].append(wrk(s.port, s.path, script, args.seconds, args.connections,
                                    wrk_t, groups[s.name], wrk_cores))
    figures = summarize(runs, reference=servers[0].name)
    if pacer is not None:  # built only for --fixed-rate
        for s in servers:
            figures[s.name]["fixed"] = pace(
                pacer, s.port, s.path, body, args.seconds, args.connections,
                fixed_rate(figures[s.name]["rps"], args.fixed_rate), groups[s.name],
                wrk_cores)
    return figures


if __name__ == "__main__":
    sys.exit(main())
