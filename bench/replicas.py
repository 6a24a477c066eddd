"""Local `rearrange serve` replicas for the load test and the memory measurement.

Each replica is the README's start command (`rearrange serve --port P`) in its own
process, with its own banlist log under a work directory, so nothing is shared but the
config file (and Redis, when REDIS_URL is set in the environment). RSS is read from
/proc and summed over the process tree, so `--workers N` counts every worker.
"""
from __future__ import annotations

import functools
import itertools
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
REARRANGE = Path(sys.executable).with_name("rearrange")  # the console script of this venv


def scratch_dir(prefix: str) -> Path:
    """A temporary directory on tmpfs when there is one.

    The embedded store fsyncs each banlist change; seeding 100,000 entries into a log on a
    real disk measures the disk (minutes), not the service.
    """
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix=prefix, dir=shm if shm.is_dir() else None))


def redis_server(directory: Path, *args: str) -> tuple[subprocess.Popen[bytes], int]:
    """A redis-server of a benchmark's own on a free port (no persistence; `args`: more
    options), answering PING; the caller kills it."""
    import redis

    port = free_port()
    directory.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--save", "",
                             "--appendonly", "no", "--dir", str(directory), *args],
                            stdout=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(200):
        try:
            client.ping()
            return proc, port
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("redis-server did not answer PING")


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out by itself (outgoing connections, bind to 0)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


PORT_BLOCK = 500  # ports a process cycles through, so that a test suite's workers never meet
WORKER_BLOCKS = 16  # blocks kept for pytest-xdist's workers


@functools.cache
def _block_start() -> int | None:
    """The first port of this process's block (None: an unusual ip_local_port_range leaves
    too few blocks below it, and the kernel picks)."""
    blocks = (_ephemeral_low() - 10_000) // PORT_BLOCK  # from 10000: clear of well-known ones
    if blocks <= 2 * WORKER_BLOCKS:
        return None
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    block = (int(worker[2:]) % WORKER_BLOCKS if worker[2:].isdigit()
             else WORKER_BLOCKS + os.getpid() % (blocks - WORKER_BLOCKS))
    return 10_000 + block * PORT_BLOCK


_turns = itertools.count(os.getpid())  # this process's offsets into its block, in turn


def free_port() -> int:
    """A TCP port nobody listens on right now, and that nothing else is about to take.

    A port the kernel picked (bind to port 0) is one of its ephemeral ports: between our
    closing it and a server binding it, an outgoing connection of any process may be given
    it (CI saw `Address already in use` that way). So the port comes from below the
    ephemeral range instead, out of a block of PORT_BLOCK of this process's own: pytest-xdist
    worker N takes block N (its PYTEST_XDIST_WORKER, `gwN`; the first WORKER_BLOCKS are
    theirs), any other process one of the rest by its pid. Within the block the ports go
    round in turn, each checked free by a bind.
    """
    start = _block_start()
    if start is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    for _ in range(PORT_BLOCK):
        port = start + next(_turns) % PORT_BLOCK
        with socket.socket() as s:
            # as a server binds (SO_REUSEADDR): a port whose last connections wait in
            # TIME_WAIT is as free for it as for us
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {start}..{start + PORT_BLOCK - 1}")


def _tree(pid: int) -> list[int]:
    """pid and every descendant (uvicorn's supervisor and its workers)."""
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            pids.extend(_tree(int(child)))
    return pids


def _status_kib(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


@dataclass
class Replica:
    """One `rearrange serve` process on a local port."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def rss_mib(self) -> float:
        """Resident memory of the process tree now (MiB)."""
        return sum(_status_kib(p, "VmRSS") for p in _tree(self.proc.pid)) / 1024

    def peak_rss_mib(self) -> float:
        """Highest resident memory each process of the tree reached, summed (MiB)."""
        return sum(_status_kib(p, "VmHWM") for p in _tree(self.proc.pid)) / 1024

    def tail(self, chars: int = 2000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


def start(count: int, workdir: Path, env: dict[str, str], workers: int = 1) -> list[Replica]:
    """Start `count` replicas, each with its own banlist log under workdir/replica-N."""
    replicas = []
    for n in range(1, count + 1):
        state = workdir / f"replica-{n}"
        state.mkdir(parents=True, exist_ok=True)
        port = free_port()
        log = state / "server.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(REARRANGE), "serve", "--port", str(port), "--workers", str(workers)],
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                # each replica's data port anywhere free (the default 8081 is one per host)
                env={"REARRANGE_DATA_PORT": "0", **env,
                     "REARRANGE_BANLIST_PATH": str(state / "banlist.jsonl")})
        replicas.append(Replica(proc, port, log))
    return replicas


def wait_ready(replicas: list[Replica], timeout: float) -> None:
    """Block until every replica's /readyz answers 200; SystemExit with its log otherwise."""
    deadline = time.monotonic() + timeout
    for r in replicas:
        while True:
            if r.proc.poll() is not None:
                stop(replicas)
                raise SystemExit(f"replica on port {r.port} exited with {r.proc.returncode}:\n"
                                 f"{r.tail()}")
            try:
                if httpx.get(f"{r.url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                stop(replicas)
                raise SystemExit(f"replica on port {r.port} not ready after {timeout:.0f}s:\n"
                                 f"{r.tail()}")
            time.sleep(0.2)


def stop(replicas: list[Replica], grace: float = 15) -> list[int | None]:
    """SIGTERM every replica (graceful shutdown), SIGKILL after `grace`; the exit codes."""
    for r in replicas:
        if r.proc.poll() is None:
            r.proc.send_signal(signal.SIGTERM)
    codes = []
    for r in replicas:
        try:
            codes.append(r.proc.wait(grace))
        except subprocess.TimeoutExpired:
            r.proc.kill()
            codes.append(r.proc.wait())
    return codes


def base_env(**extra: str) -> dict[str, str]:
    """The caller's environment (REDIS_URL kept if set) plus quiet logging and `extra`."""
    env = {**os.environ, "REARRANGE_LOG_LEVEL": "warning", **extra}
    if not env.get("REDIS_URL"):
        env.pop("REDIS_URL", None)
    return env
