"""Both request paths under one suite: every TestClient's `POST /v1/rerank` (and `POST
/v1/feedback`, the data port's other route) answered by the native data-plane listener
(app/api/dataplane.py) when the test runs on the `native` path.

A test module that sends /v1/rerank requests runs each of its tests twice, as
`test_x[python]` and `test_x[native]` (the `rerank_path` fixture, tests/conftest.py). On
`native`, each TestClient of a Rearrange app starts the app's own data-plane listener on a
free port the first time it posts to /v1/rerank, and sends every such request there over a
real socket; every other request goes to the app as before. Likewise an httpx client's
/v1/rerank request to a live `rearrange serve` (tests/redis_server.py `ServeProcess`) goes
to that server's data port instead of its control port. After each answer the
listener's writer is flushed, so the audit line, the failure log and the response counts
are written by the time the test reads them, as on the Python path. A test that cannot
run on the native path (a fake clock the listener does not read, the two Python paths
compared with each other), or for which it changes nothing (it sends no /v1/rerank that
the path would take: only other routes, a socket of its own, the engine called directly),
says why with `@pytest.mark.python_path("why")`.
"""
from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from app.api.app import RearrangeApp
from app.api.dataplane import DataPlaneServer
from tests.redis_server import LIVE

PATHS = ("python", "native")
RERANK = "/v1/rerank"
FEEDBACK = "/v1/feedback"
ROUTED = (RERANK, FEEDBACK)  # the data port's POST routes
_MARKS = ("/v1/rerank", "RERANK", "rerank_path", "/v1/feedback")


def involves_rerank(metafunc: pytest.Metafunc) -> bool:
    """Whether the test's module sends /v1/rerank requests and the test may run natively."""
    if metafunc.definition.get_closest_marker("python_path") is not None:
        return False
    module = inspect.getsource(metafunc.module)
    return any(mark in module for mark in _MARKS)


class Listener:
    """One app's data-plane listener and a client of it."""

    def __init__(self, app: RearrangeApp) -> None:
        self.server = DataPlaneServer(app.state.services)
        port = self.server.start("127.0.0.1", 0, 2)
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)

    def request(self, method: str, target: str, **kwargs: Any) -> httpx.Response:
        """`method target` (the path and query) on the listener."""
        response = self.http.request(method, target, **kwargs)
        self.server.flush()
        return response

    def stop(self) -> None:
        self.http.close()
        assert self.server.stop(5), "a connection outlived the drain"


@pytest.fixture
def native(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """TestClients whose `POST /v1/rerank` goes to the app's native listener."""
    listeners: dict[int, Listener] = {}  # by the id of the app (kept alive by its client)
    request, leave = TestClient.request, TestClient.__exit__

    def routed(self: TestClient, method: str, url: Any, **kwargs: Any) -> httpx.Response:
        merged = self._merge_url(url)
        if method.upper() == "POST" and merged.path in ROUTED and isinstance(self.app,
                                                                            RearrangeApp):
            # the client's defaults (its headers merged in here) are not the listener's
            # client's: that is another httpx (starlette's own) with its own sentinels
            given = {k: v for k, v in kwargs.items()
                     if k != "timeout" and type(v).__name__ != "UseClientDefault"}
            given["headers"] = {**self.headers, **dict(httpx.Headers(given.get("headers")))}
            listener = listeners.get(id(self.app))
            if listener is None:
                listener = listeners[id(self.app)] = Listener(self.app)
            return listener.request(method, merged.raw_path.decode("ascii"), **given)
        return request(self, method, url, **kwargs)

    def exit(self: TestClient, *args: Any) -> None:
        listener = listeners.pop(id(self.app), None)
        if listener is not None:  # before the app's shutdown closes what it serves with
            listener.stop()
        leave(self, *args)

    send = httpx.Client.send

    def to_data_port(self: httpx.Client, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        url = request.url
        live = LIVE.get((url.host, url.port or 80))
        if request.method == "POST" and url.path in ROUTED and live is not None \
                and live[1].poll() is None:
            request.url = url.copy_with(port=live[0])
        return send(self, request, **kwargs)

    monkeypatch.setattr(httpx.Client, "send", to_data_port)
    monkeypatch.setattr(TestClient, "request", routed)
    monkeypatch.setattr(TestClient, "__exit__", exit)
    yield
    for listener in listeners.values():  # clients never entered
        listener.stop()
