"""bench.replicas.free_port: ports the kernel never hands out by itself, a block per
pytest-xdist worker, each one free when it is given."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

from bench.replicas import PORT_BLOCK, _ephemeral_low, free_port


def ports_of(worker: str, n: int) -> list[int]:
    """`n` ports as a fresh process standing for xdist worker `worker` is given them."""
    code = f"from bench.replicas import free_port; print([free_port() for _ in range({n})])"
    env = {**os.environ, "PYTEST_XDIST_WORKER": worker}
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout
    return [int(p) for p in out.strip("[]\n").split(",")]


def test_a_port_is_below_the_ephemeral_range_and_free():
    low = _ephemeral_low()
    for _ in range(20):
        port = free_port()
        assert 10_000 <= port < low
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))


def test_a_port_someone_listens_on_is_passed_over():
    first = free_port()
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # the next port in turn, taken: the one after it comes back instead
        taken.bind(("127.0.0.1", first + 1 if (first + 1) % PORT_BLOCK else first - PORT_BLOCK + 1))
        taken.listen()
        assert free_port() != taken.getsockname()[1]


def test_two_workers_never_get_the_same_port():
    ours, theirs = ports_of("gw0", 30), ports_of("gw1", 30)
    assert len(set(ours)) == 30 and not set(ours) & set(theirs)
    assert max(ours) - min(ours) < PORT_BLOCK and max(theirs) - min(theirs) < PORT_BLOCK
