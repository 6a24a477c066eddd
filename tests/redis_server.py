"""A real redis-server the suite starts itself on a free port, so tests can kill and restart it."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from bench.replicas import free_port
from tests.helpers import answers

REDIS_SERVER = shutil.which("redis-server")  # None: not on PATH (make test checks it too)
# What the suite says, once, when a test it collected needs redis-server and there is none
# (tests/conftest.py); make test's need-redis says the same, and exits with the same code.
INSTALL = ("redis-server is not installed; the Redis tests start their own. Install it: "
           "apt-get install redis-server (Debian, Ubuntu) or brew install redis (macOS)")
NO_REDIS = 2


class RedisServer:
    """One redis-server process; `appendonly` keeps acknowledged writes across a kill."""

    def __init__(self, directory: Path, appendonly: bool = False,
                 args: tuple[str, ...] = ()) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.appendonly = appendonly
        self.args = list(args)  # more redis-server options, say ("--maxmemory-policy", …)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=5)

    def start(self) -> RedisServer:
        if REDIS_SERVER is None:  # a Redis test tests/conftest.py did not see: stop there
            pytest.exit(INSTALL, returncode=NO_REDIS)
        cmd = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "yes" if self.appendonly else "no", "--appendfsync", "always",
               "--dir", str(self.dir), "--protected-mode", "no", *self.args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with self.client() as c:
                    if c.ping():
                        return self
            except redis.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer PING on port {self.port}")

    def kill(self) -> None:
        """SIGKILL: no shutdown save, connections drop mid-stream."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def pause(self) -> None:
        """SIGSTOP: connections stay open and commands hang, as on a stalled host."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)

    def restart(self, empty: bool = False) -> None:
        """Start again on the same port; `empty` throws the append-only file away first."""
        self.kill()
        if empty:
            shutil.rmtree(self.dir / "appendonlydir", ignore_errors=True)
        self.start()


# (host, control port) → (data port, process) of every `rearrange serve` a test started
# (tests/paths.py sends the /v1/rerank requests of a test on the native path to the data
# port of a process still running)
LIVE: dict[tuple[str, int], tuple[int, subprocess.Popen[bytes]]] = {}


class ServeProcess:
    """`rearrange serve` on a free port, as deployed (for multi-instance tests)."""

    def __init__(self, root: Path, workdir: Path, env: dict[str, str],
                 args: tuple[str, ...] = (), host: str = "127.0.0.1",
                 wrap: tuple[str, ...] = (),
                 program: tuple[str, ...] = ("-m", "app.cli", "serve")) -> None:
        """`host`: the address it listens on; `wrap`: what runs it (say, `ip netns exec`:
        tests/netns.py's `Namespace.command`); `program`: Python's arguments before the
        listen address (`-m uvicorn app.main:app` serves no data port)."""
        self.port = free_port()
        self.base = f"http://{host}:{self.port}"
        # the data port (POST /v1/rerank on the engine's listener), a free one unless given
        self.data_port = int(env.get("REARRANGE_DATA_PORT") or free_port())
        self.data_base = f"http://{host}:{self.data_port}"
        self.log = workdir / f"serve-{self.port}.log"
        # no drain on SIGTERM unless a test asks for one (the default's 5 s is a deploy's), no
        # review of high-impact bans unless one asks (a test's few requests make every host
        # high-impact: tests/api/test_ban_review.py)
        full = {**os.environ, "REARRANGE_LOG_LEVEL": "warning", "REARRANGE_DRAIN_SECONDS": "0",
                "REARRANGE_BAN_REVIEW_SHARE": "1",
                **env, "REARRANGE_DATA_PORT": str(self.data_port)}
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(
                [*wrap, sys.executable, *program, "--host", host, "--port", str(self.port),
                 *args],
                cwd=root, env=full, stderr=err)
        # a loaded shared machine starts slowly
        # the control port first (a loaded machine starts slowly), then the data port
        if answers(f"{self.base}/healthz", 60, self.proc) and (
                "serve" not in program or answers(f"{self.data_base}/healthz", 10, self.proc)):
            if "serve" in program:  # tests/paths.py: the native path
                LIVE[(host, self.port)] = (self.data_port, self.proc)
            return
        self.stop()
        raise RuntimeError(f"server did not start: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def stop_all(started: list[ServeProcess]) -> None:
    """Stop servers all at once (each takes a moment to shut down), then wait for each."""
    for proc in started:
        proc.proc.terminate()
    for proc in started:
        proc.stop()


class AnswerLosingProxy:
    """A TCP proxy to a redis-server that, once armed, passes the next request containing
    `marker` to Redis and then cuts that connection instead of relaying the answer: a write
    that Redis ran whose answer the writer never got."""

    def __init__(self, target_port: int, marker: bytes = b"EVALSHA") -> None:
        self.target, self.marker = target_port, marker
        self.armed, self.cut = threading.Event(), threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            doomed = threading.Event()
            threading.Thread(target=self._up, args=(client, upstream, doomed),
                             daemon=True).start()
            threading.Thread(target=self._down, args=(client, upstream, doomed),
                             daemon=True).start()

    def _up(self, client: socket.socket, upstream: socket.socket,
            doomed: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                if self.armed.is_set() and self.marker in data:
                    self.armed.clear()
                    doomed.set()  # before Redis can answer
                upstream.sendall(data)

    def _down(self, client: socket.socket, upstream: socket.socket,
              doomed: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                if doomed.is_set():
                    break
                client.sendall(data)
        for s in (client, upstream):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        if doomed.is_set():
            self.cut.set()
