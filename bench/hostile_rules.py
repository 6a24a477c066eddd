"""What a hostile Python rule does to its neighbours, side by side in one run: this checkout
and, with `--against ROOT`, another (its engine built in place, e.g. main's own tree).

Usage: python -m bench.hostile_rules [--against /work/main] [--timeout 10]

Each side is a `rearrange serve` (one worker, the default 100 ms deadline) with the rules
of tests/plugins/rr_hostile.py on its Python path. Two scenarios, each on a fresh server:

- sleep: three requests whose profile runs a rule sleeping 2 s, at once; 20 ms later a
  request of the default profile (no Python rule) and a /healthz;
- spin: one request whose rule loops forever; 20 ms later the same two neighbours; then
  SIGTERM, and whether the server stops within 5 s.

Each figure is a wall time in seconds, or `hung` when no answer came within `--timeout`.
The `x` column is the other side's time over this one's (a hung one counts as
`--timeout`): how much longer a neighbour waited there.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from bench.replicas import free_port

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "tests" / "plugins"
CONFIG = """plugins: [rr_hostile]
profiles:
  default: {trim: [depth]}
  sleepy: {rerank: [{sleeper: {seconds: 2}}]}
  spin: {rerank: [spinner]}
"""
PAGE = {"query": {"text": "q"},
        "documents": [{"id": f"d{i}", "url": f"https://h{i}.example/", "score": 20.0 - i}
                      for i in range(20)]}


class Server:
    """`rearrange serve` of the checkout at `root`, on this interpreter."""

    def __init__(self, root: Path, workdir: Path) -> None:
        config = workdir / "rules.yaml"
        config.write_text(CONFIG)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "REARRANGE_CONFIG": str(config),
               "REARRANGE_BANLIST_PATH": str(workdir / "banlist.jsonl"),
               "REARRANGE_BANLIST_SEED": "", "REARRANGE_CONFIG_POLL_SECONDS": "0",
               "REARRANGE_DRAIN_SECONDS": "0", "REARRANGE_LOG_LEVEL": "critical",
               "REDIS_URL": "", "PYTHONPATH": str(PLUGINS), "PYTHONDONTWRITEBYTECODE": "1",
               "REARRANGE_DATA_PORT": "0"}  # the control port is measured
        self.proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port",
                                      str(self.port)], cwd=root, env=env,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.base}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise SystemExit(f"the server of {root} did not start")
            time.sleep(0.1)

    def stops_on_sigterm(self, seconds: float) -> bool:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def timed(client: httpx.Client, method: str, path: str, timeout: float,
          body: dict | None = None) -> float | None:
    """Seconds to the answer, None when none came within `timeout`."""
    started = time.perf_counter()
    try:
        client.request(method, path, json=body, timeout=timeout)
    except httpx.TimeoutException:
        return None
    return time.perf_counter() - started


def scenario(root: Path, name: str, timeout: float) -> dict[str, float | None | bool]:
    """The figures of one scenario against a fresh server of `root`."""
    with tempfile.TemporaryDirectory(prefix="rearrange-hostile-") as tmp:
        server = Server(root, Path(tmp))
        try:
            hostile = {"profile": "sleepy" if name == "sleep" else "spin", **PAGE}
            count = 3 if name == "sleep" else 1
            limits = httpx.Limits(max_connections=count + 2, max_keepalive_connections=count + 2)
            with ThreadPoolExecutor(count + 2) as pool, \
                    httpx.Client(base_url=server.base, limits=limits) as client:
                # warm: connections open, the server's first request served
                list(pool.map(lambda _: timed(client, "POST", "/v1/rerank", timeout,
                                              {**PAGE, "profile": "default"}), range(count + 2)))
                rules = [pool.submit(timed, client, "POST", "/v1/rerank", timeout, hostile)
                         for _ in range(count)]
                time.sleep(0.02)
                neighbour = pool.submit(timed, client, "POST", "/v1/rerank", timeout,
                                        {**PAGE, "profile": "default"})
                health = pool.submit(timed, client, "GET", "/healthz", timeout)
                times = [r.result() for r in rules]
                out: dict[str, float | None | bool] = {
                    f"{name}: its request (slowest)": None if None in times
                    else max(t for t in times if t is not None),
                    f"{name}: default-profile neighbour": neighbour.result(),
                    f"{name}: /healthz": health.result()}
            if name == "spin":
                out["spin: stops on SIGTERM within 5 s"] = server.stops_on_sigterm(5)
            return out
        finally:
            server.kill()


def shown(value: float | None | bool) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "hung" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, help="another checkout, its engine built")
    parser.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()
    sides = {"this": ROOT}
    if args.against is not None:
        sides["against"] = args.against.resolve()
    rows: dict[str, dict[str, float | None | bool]] = {}
    for side, root in sides.items():
        for name in ("sleep", "spin"):
            for key, value in scenario(root, name, args.timeout).items():
                rows.setdefault(key, {})[side] = value
    print(f"{'seconds':<36} {'this':>8}" + (f" {'against':>8} {'x':>6}" if len(sides) > 1
                                            else ""))
    for key, got in rows.items():
        line = f"{key:<36} {shown(got['this']):>8}"
        if "against" in got:
            line += f" {shown(got['against']):>8}"
            this, other = got["this"], got["against"]
            if not isinstance(this, bool) and this:
                line += f" {(args.timeout if other is None else other) / this:>6.1f}"
        print(line)


if __name__ == "__main__":
    main()
