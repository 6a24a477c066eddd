"""HTTP throughput and latency with wrk: Rearrange vs the bare limit, side by side in one run.

Usage: python -m bench.http [--sizes 20,100,500] [--workers 1,2] [--banlist 1000000]
                            [--profiles default,commercial] [--seconds 8] [--connections 32]
                            [--json PATH] [--against REV] [--ceiling]

The bare limit is `bench/bare_app.py`: an ASGI app on the same uvicorn settings (uvloop,
httptools) that parses the same body with orjson and echoes it. Rearrange serves the same
page through each profile of `--profiles` (forced by the body's `profile`) with a banlist
of `--banlist` entries and the sample config's experiment in shadow (the unit is in
`control`, so spam_demotion runs in shadow). For each worker count, profile and page
size the servers are measured in `--rounds` rounds, each server once a round, one right
after the other. The ratios (`req/s x`, `p99 x`) are the medians of each round's ratio:
a round's two runs share whatever the machine was doing then, so a slow spell of the
shared machine moves both, not the ratio. The absolute figures are each server's best
run. When the workers leave a core free, every server's processes are pinned to the
workers' cores and wrk to the others (`cores_for`), so the load generator never takes the
server's core and the scheduler does not move either (1 or 2 wrk threads, see
`wrk_threads`). Needs `wrk` (Debian package).
The goal (issue 14): Rearrange >= 0.8x the bare req/s and p99 <= 1.5x the bare p99 at
100 documents, both profiles, 1 worker; >= 0.7x at 20 and 500 documents.

`--against REV` also serves Rearrange as of a git revision (checked out into a temporary
worktree, run on this virtualenv, with its own copy of the banlist log) and measures it in
the same alternation: the `vs REV` column is this checkout's req/s over that revision's,
the head-to-head figure for a change to the request path.

`--ceiling` also serves Rearrange with a profile that runs only `depth` (`ceiling_config`:
the same response size and experiments, no other rule) and adds its req/s over the bare
app's: what the HTTP layer, decoding, building documents, the response and the metrics
leave, i.e. the most that making the rules faster could reach.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson

from app.banlist.bulk import read_file
from app.banlist.embedded.store import EmbeddedStore
from app.config.load import load_file
from bench.pages import make_serp, write_banlist
from bench.pipeline import ceiling_config
from bench.replicas import free_port

ROOT = Path(__file__).resolve().parents[1]
LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("{body}", "rb"); wrk.body = f:read("*a"); f:close()
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %.1f %.1f %.1f\\n", summary.requests, summary.errors.status
    + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99), summary.duration))
end
"""


def cores_for(workers: int, cores: set[int] | None = None) -> tuple[set[int], set[int]] | None:
    """The cores to pin the servers to and those left to wrk, or None (nothing pinned) when
    the workers would leave wrk no core of its own."""
    mine = sorted(cores if cores is not None else os.sched_getaffinity(0))
    if workers >= len(mine):
        return None
    return set(mine[:workers]), set(mine[workers:])


def start(target: list[str], env: dict[str, str], port: int, timeout: float = 900.0,
          cwd: Path = ROOT, cores: set[int] | None = None) -> subprocess.Popen[bytes]:
    """Start a server in a process group of its own and wait until /healthz answers (a 1 M-entry
    replay takes a while). One that does not answer in time is stopped, workers and all.
    `cores`: the CPUs the server and every process and thread it starts may run on."""
    pin = (lambda: os.sched_setaffinity(0, cores)) if cores else None
    proc = subprocess.Popen(target, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=pin)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz",
                             timeout=0.5).status_code == 200:
                    return proc
            except httpx.TransportError:
                time.sleep(0.2)
            if proc.poll() is not None:
                break
    except BaseException:  # Ctrl-C while waiting: nothing may be left running
        stop(proc)
        raise
    stop(proc)
    raise SystemExit(f"server on port {port} did not start: {' '.join(target)}")


def stop(proc: subprocess.Popen[bytes], grace: float = 30.0) -> None:
    """Stop a server started by `start` and everything in its process group (a server with
    several workers forks them): SIGTERM, then SIGKILL for whatever is left after `grace`."""
    with contextlib.suppress(ProcessLookupError):  # the group is gone already
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(grace)
    with contextlib.suppress(ProcessLookupError):  # none left: the usual case
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # a signal is delivered when its process next runs: a worker may outlive its leader
    deadline = time.monotonic() + 10
    while _group_runs(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.01)


def _group_runs(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs (a zombie has stopped running)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # after the command's `(…)`: state, parent, group
            state, _, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):  # gone meanwhile
            continue
        if int(group) == pgid and state != "Z":
            return True
    return False


Server = tuple[list[str], dict[str, str], int, Path]  # argv, environment, port, directory


@contextlib.contextmanager
def serving(servers: list[Server], cores: set[int] | None = None
            ) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start each server in turn (`start`, pinned to `cores`) and stop them all (`stop`) on
    the way out; when one fails to start, those started before it are stopped too."""
    with contextlib.ExitStack() as running:
        procs = []
        for target, env, port, cwd in servers:
            procs.append(start(target, env, port, cwd=cwd, cores=cores))
            running.callback(stop, procs[-1])
        yield procs


def wrk_threads(workers: int, connections: int, cores: int | None = None) -> int:
    """wrk's threads: the cores the server's workers leave free, 1 to 2 (and <= connections).

    On this 2-core machine a 1-worker server with two wrk threads beside it shares its core
    with the load generator, which showed as a wider p99 for the heavier server (1-worker,
    500 documents: 2.6x and 7.2x the bare p99 with two threads, 2.0x and 2.2x with one)
    while one wrk thread kept up with the bare app (15-17k req/s either way at 20 docs).
    """
    free = (cores or os.cpu_count() or 1) - workers
    return max(1, min(2, free, connections))


def wrk(port: int, path: str, script: Path, seconds: int, connections: int,
        threads: int, cores: set[int] | None = None) -> dict[str, float]:
    pin = (lambda: os.sched_setaffinity(0, cores)) if cores else None
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency",
         "-s", str(script), f"http://127.0.0.1:{port}{path}"],
        capture_output=True, text=True, check=True, preexec_fn=pin).stdout
    m = re.search(r"RESULT (\d+) (\d+) ([\d.]+) ([\d.]+) ([\d.]+)", out)
    if m is None:
        raise SystemExit(f"unexpected wrk output:\n{out}")
    requests, errors, p50, p99, duration = (float(x) for x in m.groups())
    return {"rps": requests / (duration / 1e6), "errors": errors, "p50_ms": p50 / 1000,
            "p99_ms": p99 / 1000}


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="20,100,500")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--banlist", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of each server per row; the ratios are the rounds' medians")
    parser.add_argument("--profiles", default="default,commercial",
                        help="profiles to serve the page through, each its own row")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--against", metavar="REV",
                        help="also serve Rearrange at this git revision, head to head")
    parser.add_argument("--ceiling", action="store_true",
                        help="also serve Rearrange with only the depth rule (ceiling_config)")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="rearrange-http-") as name, \
            contextlib.ExitStack() as stack:
        tmp = Path(name)
        against = (stack.enter_context(revision_tree(args.against, tmp / "against"))
                   if args.against else None)
        rows = measure(args, tmp, against)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


def measure(args: argparse.Namespace, tmp: Path, against: Path | None) -> list[dict]:
    """Every row of the table, printed as it is measured."""
    sizes = [int(x) for x in args.sizes.split(",")]
    workers = [int(x) for x in args.workers.split(",")]
    log, seeded = prepare_banlist(tmp, args.banlist)
    user = control_user()
    print(f"banlist: {args.banlist:,} entries seeded in {seeded:.1f} s (not measured); "
          f"unit {user} is in control of every experiment (gated rules run in shadow)")
    # read-only: the 2-worker rows serve one embedded log from two processes, which a
    # writable store refuses (each worker would append to it on its own)
    env = {**os.environ, "REARRANGE_BANLIST_PATH": str(log), "REARRANGE_LOG_LEVEL": "warning",
           "REARRANGE_BANLIST_READ_ONLY": "true",
           "REARRANGE_CONFIG_POLL_SECONDS": "1", "REARRANGE_MAX_DOCUMENTS": "1000"}
    env.pop("REDIS_URL", None)
    against_env = {**env, "REARRANGE_BANLIST_PATH": str(tmp / "banlist-against.jsonl")}
    if against is not None:  # its own copy: an embedded store appends to its log
        shutil.copyfile(log, against_env["REARRANGE_BANLIST_PATH"])
    ceiling_env = {**env, "REARRANGE_BANLIST_PATH": str(tmp / "banlist-ceiling.jsonl"),
                   "REARRANGE_CONFIG": str(tmp / "ceiling.yaml")}
    if args.ceiling:
        shutil.copyfile(log, ceiling_env["REARRANGE_BANLIST_PATH"])
        (tmp / "ceiling.yaml").write_text(ceiling_config())
    uvicorn = [sys.executable, "-m", "uvicorn", "--loop", "uvloop", "--http", "httptools",
               "--log-level", "warning", "--no-access-log"]
    rows: list[dict] = []
    for n_workers in workers:
        threads = wrk_threads(n_workers, args.connections)
        pinned = cores_for(n_workers)
        server_cores, wrk_cores = pinned if pinned is not None else (None, None)
        print(f"{n_workers} worker(s): wrk runs {threads} thread(s), {args.connections} "
              f"connections, on {os.cpu_count()} cores"
              + (f"; servers pinned to CPU {sorted(server_cores)}, wrk to {sorted(wrk_cores)}"
                 if server_cores else "; nothing pinned"))
        ports = {"bare": free_port(), "rearrange": free_port()}
        serve = [sys.executable, "-m", "app.cli", "serve", "--workers", str(n_workers)]
        bare = [*uvicorn, "--workers", str(n_workers), "--port", str(ports["bare"]),
                "bench.bare_app:app"]
        servers: list[Server] = [
            (bare, env, ports["bare"], ROOT),
            ([*serve, "--port", str(ports["rearrange"])], env, ports["rearrange"], ROOT)]
        if against is not None:
            ports["against"] = free_port()
            servers.append(([*serve, "--port", str(ports["against"])], against_env,
                            ports["against"], against))
        if args.ceiling:
            ports["ceiling"] = free_port()
            servers.append(([*serve, "--port", str(ports["ceiling"])], ceiling_env,
                            ports["ceiling"], ROOT))
        with serving(servers, server_cores):
            for profile, size in [(p, s) for p in args.profiles.split(",") for s in sizes]:
                body = tmp / f"body-{profile}-{size}.json"
                page = make_serp(size, 2024, user, False)
                body.write_bytes(orjson.dumps({**page, "profile": profile}))
                script = tmp / f"post-{profile}-{size}.lua"
                script.write_text(LUA.replace("{body}", str(body)))
                runs: dict[str, list[dict[str, float]]] = {k: [] for k in ports}
                for _ in range(args.rounds):
                    for k, port in ports.items():
                        runs[k].append(wrk(port, "/" if k == "bare" else "/v1/rerank", script,
                                           args.seconds, args.connections, threads, wrk_cores))
                best = {k: max(v, key=lambda r: r["rps"]) for k, v in runs.items()}
                rows.append({"workers": n_workers, "profile": profile, "documents": size,
                             "wrk_threads": threads, "rounds": args.rounds,
                             "kib": body.stat().st_size / 1024, **{
                                 f"{k}_{m}": v[m] for k, v in best.items() for m in v},
                             # every run's errors, not only the best run's
                             "rearrange_errors": sum(r["errors"] for r in runs["rearrange"]),
                             **round_ratios(runs)})
                print_row(rows[-1], header=len(rows) == 1)
    return rows


def round_ratios(runs: dict[str, list[dict[str, float]]]) -> dict[str, float]:
    """Each server's req/s and p99 over the bare app's, round by round, and their medians:
    `<server>_rps_x` and `<server>_p99_x` (Rearrange's: `rearrange_…`)."""
    out = {}
    for k, mine in runs.items():
        if k == "bare":
            continue
        pairs = list(zip(mine, runs["bare"], strict=True))
        out[f"{k}_rps_x"] = statistics.median(m["rps"] / b["rps"] for m, b in pairs)
        out[f"{k}_p99_x"] = statistics.median(m["p99_ms"] / b["p99_ms"] for m, b in pairs)
    if "against" in runs:
        pairs = list(zip(runs["rearrange"], runs["against"], strict=True))
        out["vs_against_x"] = statistics.median(m["rps"] / a["rps"] for m, a in pairs)
    return out


def print_row(r: dict[str, float], header: bool) -> None:
    against, ceiling = "against_rps" in r, "ceiling_rps" in r
    if header:
        print(f"{'workers':>7} {'profile':>10} {'docs':>5} {'KiB':>6} | {'bare req/s':>10} "
              f"{'p50':>6} {'p99':>6} | {'rearr req/s':>11} {'p50':>6} {'p99':>6} {'err':>4} | "
              f"{'req/s x':>7} {'p99 x':>6}"
              + (f" | {'REV req/s':>9} {'p99':>6} {'vs REV':>6}" if against else "")
              + (f" | {'ceil req/s':>10} {'ceil x':>6}" if ceiling else ""))
    print(f"{r['workers']:>7} {r['profile']:>10} {r['documents']:>5} {r['kib']:>6.1f} | "
          f"{r['bare_rps']:>10.0f} {r['bare_p50_ms']:>6.2f} {r['bare_p99_ms']:>6.2f} | "
          f"{r['rearrange_rps']:>11.0f} "
          f"{r['rearrange_p50_ms']:>6.2f} {r['rearrange_p99_ms']:>6.2f} "
          f"{r['rearrange_errors']:>4.0f} | {r['rearrange_rps_x']:>7.2f} "
          f"{r['rearrange_p99_x']:>6.2f}"
          + (f" | {r['against_rps']:>9.0f} {r['against_p99_ms']:>6.2f} "
             f"{r['vs_against_x']:>6.2f}" if against else "")
          + (f" | {r['ceiling_rps']:>10.0f} {r['ceiling_rps_x']:>6.2f}"
             if ceiling else ""), flush=True)


if __name__ == "__main__":
    sys.exit(main())
