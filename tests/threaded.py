"""A Rearrange app served by uvicorn on a thread of the test's process: a real HTTP service
for the CLI (or a browser) to call, without a server process to start (~0.5 s against
~3.7 s)."""
from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence

import uvicorn

from app.config.settings import Settings
from app.main import create_app
from bench.replicas import free_port


@contextlib.contextmanager
def serving(settings: Settings) -> Iterator[str]:
    """The base URL of the app of `settings`, served until the block ends."""
    with serving_all([settings]) as (base,):
        yield base


@contextlib.contextmanager
def serving_all(all_settings: Sequence[Settings]) -> Iterator[list[str]]:
    """The base URLs of the apps of `all_settings` (replicas of one Redis, say), each on a
    thread, served until the block ends and stopped together: each app's shutdown waits
    for its stores' blocking reads to return, and one after the other those add up."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []
    bases = []
    try:
        for settings in all_settings:
            port = free_port()
            server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1",
                                                   port=port, log_level="warning"))
            thread = threading.Thread(target=server.run, daemon=True)
            thread.start()
            servers.append((server, thread))
            bases.append(f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 10
        for server, thread in servers:
            while not server.started:  # polled: up once its lifespan ran and it listens
                assert thread.is_alive() and time.monotonic() < deadline, \
                    "the service did not start"
                time.sleep(0.01)
        yield bases
    finally:
        for server, _ in servers:
            server.should_exit = True
        for _, thread in servers:
            thread.join(10)
