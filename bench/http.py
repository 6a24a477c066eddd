"""HTTP throughput and latency with wrk: Rearrange vs the bare orjson echo, same body, one run.

Usage: python -m bench.http [--size 100] [--seconds 10] [--connections 16]
Needs `wrk` (Debian package). Both servers run one uvicorn worker with uvloop + httptools;
they are measured alternately (bare, rearrange, bare, rearrange) and reported as ratios.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson

from bench.pipeline import make_serp

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(target: list[str], env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(target, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5)
            return proc
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"server on port {port} did not start: {' '.join(target)}")


def wrk(port: int, path: str, script: Path, seconds: int, connections: int) -> dict[str, float]:
    out = subprocess.run(
        ["wrk", f"-t{min(2, connections)}", f"-c{connections}", f"-d{seconds}s", "--latency",
         "-s", str(script), f"http://127.0.0.1:{port}{path}"],
        capture_output=True, text=True, check=True).stdout
    m = re.search(r"RESULT (\d+) (\d+) ([\d.]+) ([\d.]+) ([\d.]+)", out)
    if m is None:
        raise SystemExit(f"unexpected wrk output:\n{out}")
    requests, errors, p50, p99, duration = (float(x) for x in m.groups())
    return {"rps": requests / (duration / 1e6), "errors": errors, "p50_ms": p50 / 1000,
            "p99_ms": p99 / 1000}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="rearrange-http-"))
    body = tmp / "body.json"
    body.write_bytes(orjson.dumps(make_serp(args.size, 2024, "u-000004", False)))
    script = tmp / "post.lua"
    script.write_text(LUA.replace("{body}", str(body)))
    env = {**os.environ, "REARRANGE_BANLIST_PATH": str(tmp / "banlist.jsonl"),
           "REARRANGE_BANLIST_SEED": str(ROOT / "config" / "banlist.sample.jsonl"),
           "REARRANGE_LOG_LEVEL": "warning", "REARRANGE_CONFIG_POLL_SECONDS": "1"}
    env.pop("REDIS_URL", None)
    uvicorn = [sys.executable, "-m", "uvicorn", "--loop", "uvloop", "--http", "httptools",
               "--log-level", "warning", "--no-access-log"]
    bare_port, app_port = free_port(), free_port()
    bare = start([*uvicorn, "--port", str(bare_port), "bench.bare_app:app"], env, bare_port)
    rear = start([*uvicorn, "--port", str(app_port), "--factory", "app.main:create_app"],
                 env, app_port)
    results: dict[str, list[dict[str, float]]] = {"bare": [], "rearrange": []}
    try:
        for _ in range(2):
            results["bare"].append(wrk(bare_port, "/", script, args.seconds, args.connections))
            results["rearrange"].append(
                wrk(app_port, "/v1/rerank", script, args.seconds, args.connections))
    finally:
        for proc in (bare, rear):
            proc.terminate()
            proc.wait(10)
    best = {k: max(v, key=lambda r: r["rps"]) for k, v in results.items()}
    print(f"{args.size}-document SERP ({body.stat().st_size / 1024:.1f} KiB), "
          f"{args.connections} connections, {args.seconds}s x 2 each, 1 worker")
    print(f"{'server':<12}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}")
    for name, r in best.items():
        print(f"{name:<12}{r['rps']:>10.0f}{r['p50_ms']:>10.2f}{r['p99_ms']:>10.2f}"
              f"{r['errors']:>8.0f}")
    b, r = best["bare"], best["rearrange"]
    print(f"ratio: rearrange/bare req/s {r['rps'] / b['rps']:.2f}x, "
          f"p99 {r['p99_ms'] / b['p99_ms']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
