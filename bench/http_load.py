"""The load generators of bench/http.py: wrk at full speed, bench/pace at a fixed rate,
each run measured with the serving processes' CPU time per request and the generator's own
CPU.

wrk sends as fast as the server answers on `connections` keep-alive connections: its req/s
is the maximum. Its latencies are those of a closed loop (a slow answer delays the next
request rather than being measured against when that request was due), so the latency goal
is read at a fixed rate instead: bench/pace sends request k at k / `rate` seconds and
measures each latency from the moment it was due, so a stall counts for every request it
held back (coordinated omission corrected). It keeps the schedule to the microsecond (a
loop that polls, never a millisecond timer as oha's and wrk2's are) and reports how late it
was itself, so a run the generator or its host held up shows as such.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from bench.http_servers import ROOT, cargo_build
from bench.procstat import (
    children_cpu_seconds,
    cpu_seconds,
    group_pids,
    per_request_us,
    steal_seconds,
)

WRK_LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("{body}", "rb"); wrk.body = f:read("*a"); f:close()
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %.1f %.1f %.1f\\n", summary.requests, summary.errors.status
    + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99), summary.duration))
end
"""
PACE = ROOT / "bench" / "pace"


def wrk_threads(workers: int, connections: int, cores: int | None = None) -> int:
    """wrk's threads: the cores the server's workers leave free, 1 to 2 (and <= connections).

    On this 2-core machine a 1-worker server with two wrk threads beside it shares its core
    with the load generator, which showed as a wider p99 for the heavier server (1-worker,
    500 documents: 2.6x and 7.2x the bare p99 with two threads, 2.0x and 2.2x with one)
    while one wrk thread kept up with the bare app (15-17k req/s either way at 20 docs).
    """
    free = (cores or os.cpu_count() or 1) - workers
    return max(1, min(2, free, connections))


def fixed_rate(max_rps: float, fraction: float) -> float:
    """The rate of the fixed-rate run: `fraction` of the measured maximum, at least 1/s."""
    if not 0 < fraction <= 1:
        raise ValueError(f"--fixed-rate: a fraction of the maximum in (0, 1], not {fraction}")
    return max(1.0, max_rps * fraction)


def _measured(argv: list[str], pgid: int, cores: set[int] | None
              ) -> tuple[str, float, float, float]:
    """Run a load generator to its end: its stdout, the server group's CPU seconds, the
    generator's own CPU seconds (read once it has exited, from the kernel's account of
    finished children) and the machine's stolen CPU seconds over the run."""
    pin = (lambda: os.sched_setaffinity(0, cores)) if cores else None
    server = group_pids(pgid)
    server_before, load_before = cpu_seconds(server), children_cpu_seconds()
    steal_before = steal_seconds()
    out = subprocess.run(argv, capture_output=True, text=True, check=True,
                         preexec_fn=pin).stdout
    return (out, cpu_seconds(server) - server_before,
            children_cpu_seconds() - load_before, steal_seconds() - steal_before)


def _costs(requests: float, seconds: float, server_cpu: float, load_cpu: float,
           stolen: float) -> dict[str, float]:
    """CPU per request of the server and of the load generator, the cores each used, and
    the share of the machine's CPU time the hypervisor took (`steal`, of every core)."""
    return {"cpu_us": per_request_us(0, server_cpu, requests),
            "server_cores": server_cpu / seconds,
            "load_cpu_us": per_request_us(0, load_cpu, requests),
            "load_cores": load_cpu / seconds,
            "steal": stolen / seconds / (os.cpu_count() or 1)}


def wrk(port: int, path: str, script: Path, seconds: int, connections: int, threads: int,
        pgid: int, cores: set[int] | None = None) -> dict[str, float]:
    """One wrk run at full speed against the server whose process group is `pgid`."""
    out, server_cpu, load_cpu, stolen = _measured(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency",
         "-s", str(script), f"http://127.0.0.1:{port}{path}"], pgid, cores)
    m = re.search(r"RESULT (\d+) (\d+) ([\d.]+) ([\d.]+) ([\d.]+)", out)
    if m is None:
        raise SystemExit(f"unexpected wrk output:\n{out}")
    requests, errors, p50, p99, duration = (float(x) for x in m.groups())
    return {"rps": requests / (duration / 1e6), "requests": requests, "errors": errors,
            "p50_ms": p50 / 1000, "p99_ms": p99 / 1000,
            **_costs(requests, duration / 1e6, server_cpu, load_cpu, stolen)}


def build_pace() -> Path:
    """bench/pace built (release) if it is not already; the path of its binary."""
    return cargo_build(PACE, "the fixed-rate load generator")


def pace(binary: Path, port: int, path: str, body: Path, seconds: int, connections: int,
         rate: float, pgid: int, cores: set[int] | None = None) -> dict[str, float]:
    """One bench/pace run at `rate` requests a second, latencies from when each request was
    due; answers in flight at the end are waited for (2 s, then counted as failed)."""
    out, server_cpu, load_cpu, stolen = _measured(
        [str(binary), "--port", str(port), "--path", path, "--body", str(body),
         "--rate", f"{rate:.1f}", "--seconds", str(seconds),
         "--connections", str(connections)], pgid, cores)
    return pace_figures(json.loads(out), server_cpu, load_cpu, stolen)


def pace_figures(report: dict, server_cpu: float, load_cpu: float,
                 stolen: float = 0.0) -> dict[str, float]:
    """The figures of one bench/pace report: the rate asked and reached, p50 and p99 (ms) and
    their ratio, the answers that were not 2xx or never came, the generator's own p99
    lateness (ms: due to seen by its loop) and the CPU per request."""
    latency, late = report["latency_us"], report["late_us"]
    answered = report["answered"]
    return {"rate": report["rate"], "rps": report["rps"], "requests": answered,
            "errors": report["non_2xx"] + report["failed"],
            "p50_ms": latency["p50"] / 1000, "p99_ms": latency["p99"] / 1000,
            "p99_over_p50": latency["p99"] / latency["p50"] if latency["p50"] else float("nan"),
            "late_p99_ms": late["p99"] / 1000,
            **_costs(answered, report["seconds"], server_cpu, load_cpu, stolen)}
