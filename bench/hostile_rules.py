"""What a hostile Python rule does to its neighbours, side by side in one run: this checkout
and, with `--against ROOT`, another (its engine built in place, e.g. main's own tree).

Usage: python -m bench.hostile_rules [--against /work/main] [--timeout 10]

Each side is a `rearrange serve` (one worker, the default 100 ms deadline) with the rules
of tests/plugins/rr_hostile.py and rr_business.py on its Python path. Each scenario runs on
a fresh server:

- sleep: three requests whose profile runs a rule sleeping 2 s, at once; 20 ms later a
  request of the default profile (no Python rule) and a /healthz;
- spin: one request whose rule loops forever; 20 ms later the same two neighbours; then
  SIGTERM, and whether the server stops within 5 s;
- spinning: four clients sending requests whose rule loops forever, for 3 s, while one
  client sends default-profile requests and another requests whose Python rule answers
  at once (`business`): the slowest answer each neighbour got;
- stuck: eight clients sending requests whose rule sleeps 600 s, for 6 s; then whether a
  `business` request gets its rule applied (the executor recovered without a restart), and
  how long after the burst that took;
- cost: 300 `business` requests of 20 documents, one at a time, after 100 to warm: CPU
  microseconds per request of the server and every process under it (its rule processes).

Each time is a wall time in seconds, or `hung` when no answer came within `--timeout`.
The `x` column is the other side's figure over this one's (a hung one counts as
`--timeout`): how much longer a neighbour waited there, how much more CPU it took.
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
CONFIG = """plugins: [rr_hostile, rr_business]
profiles:
  default: {trim: [depth]}
  sleepy: {rerank: [{sleeper: {seconds: 2}}]}
  spin: {rerank: [spinner]}
  stuck: {rerank: [{sleeper: {seconds: 600}}]}
  business: {rerank: [{demote_host: {host: h0.example, by: 1}}]}
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


def cpu_seconds(pid: int) -> float:
    """CPU seconds of `pid` and every process under it, alive now."""
    total, ticks = 0.0, os.sysconf("SC_CLK_TCK")
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    total += (int(fields[11]) + int(fields[12])) / ticks
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids = (task / "children").read_text().split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        total += sum(cpu_seconds(int(kid)) for kid in kids)
    return total


def business(client: httpx.Client, timeout: float) -> tuple[float | None, bool]:
    """(seconds, whether its Python rule was applied) for one `business` request."""
    started = time.perf_counter()
    try:
        r = client.post("/v1/rerank", json={**PAGE, "profile": "business"}, timeout=timeout)
    except httpx.TimeoutException:
        return None, False
    applied = r.status_code == 200 and any(a["rule"] == "demote_host"
                                           for a in r.json().get("audit", []))
    return time.perf_counter() - started, applied


def loaded(server: Server, timeout: float, profile: str, clients: int, seconds: float,
           probe: bool) -> dict[str, float | None | bool]:
    """`clients` clients sending `profile` for `seconds`; with `probe`, the slowest answer
    of a default-profile client and of a `business` one meanwhile."""
    stop = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=clients + 2, max_keepalive_connections=clients + 2)

    def hostile() -> None:
        while time.monotonic() < stop:
            timed(client, "POST", "/v1/rerank", timeout, {**PAGE, "profile": profile})

    def slowest(call) -> float | None:
        worst: float | None = 0.0
        time.sleep(0.2)  # the hostile ones are in
        while time.monotonic() < stop:
            took = call()
            worst = None if took is None or worst is None else max(worst, took)
        return worst

    with ThreadPoolExecutor(clients + 2) as pool, \
            httpx.Client(base_url=server.base, limits=limits) as client:
        hostiles = [pool.submit(hostile) for _ in range(clients)]
        if not probe:
            for h in hostiles:
                h.result()
            return {}
        plain = pool.submit(slowest, lambda: timed(client, "POST", "/v1/rerank", timeout,
                                                   {**PAGE, "profile": "default"}))
        rule = pool.submit(slowest, lambda: business(client, timeout)[0])
        for h in hostiles:
            h.result()
        return {"spinning: default neighbour (slowest)": plain.result(),
                "spinning: business neighbour (slowest)": rule.result()}


def recovered(server: Server, timeout: float) -> dict[str, float | None | bool]:
    """After a burst of stuck rules: whether a `business` request gets its rule, and when."""
    loaded(server, timeout, "stuck", 8, 6.0, probe=False)
    ended = time.perf_counter()
    with httpx.Client(base_url=server.base) as client:
        while time.perf_counter() - ended < 15:
            _, applied = business(client, timeout)
            if applied:
                return {"stuck: business rule runs after": True,
                        "stuck: seconds until it does": time.perf_counter() - ended}
            time.sleep(0.05)
    return {"stuck: business rule runs after": False, "stuck: seconds until it does": None}


def cost(server: Server, timeout: float) -> dict[str, float | None | bool]:
    with httpx.Client(base_url=server.base) as client:
        for _ in range(100):
            business(client, timeout)
        before = cpu_seconds(server.proc.pid)
        for _ in range(300):
            business(client, timeout)
        used = cpu_seconds(server.proc.pid) - before
    return {"cost: CPU us per business request": used / 300 * 1e6}


def scenario(root: Path, name: str, timeout: float) -> dict[str, float | None | bool]:
    """The figures of one scenario against a fresh server of `root`."""
    with tempfile.TemporaryDirectory(prefix="rearrange-hostile-") as tmp:
        server = Server(root, Path(tmp))
        try:
            if name == "spinning":
                return loaded(server, timeout, "spin", 4, 3.0, probe=True)
            if name == "stuck":
                return recovered(server, timeout)
            if name == "cost":
                return cost(server, timeout)
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
        for name in ("sleep", "spin", "spinning", "stuck", "cost"):
            for key, value in scenario(root, name, args.timeout).items():
                rows.setdefault(key, {})[side] = value
    print(f"{'seconds':<40} {'this':>8}" + (f" {'against':>8} {'x':>6}" if len(sides) > 1
                                            else ""))
    for key, got in rows.items():
        line = f"{key:<40} {shown(got['this']):>8}"
        if "against" in got:
            line += f" {shown(got['against']):>8}"
            this, other = got["this"], got["against"]
            if not isinstance(this, bool) and this and not isinstance(other, bool):
                line += f" {(args.timeout if other is None else other) / this:>6.1f}"
        print(line)


if __name__ == "__main__":
    main()
