"""Fixtures of the API tests."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.conftest import app_on


@pytest.fixture(params=["embedded", pytest.param("redis", marks=pytest.mark.redis)])
def api(request, settings, tmp_path):
    """(a, b): two clients of one banlist (on the embedded store both are the same one)."""
    if request.param == "embedded":
        with TestClient(create_app(settings)) as c:
            yield c, c
        return
    from tests.redis_server import RedisServer

    server = RedisServer(tmp_path / "redis").start()
    try:
        with app_on(server, settings, "a") as a, app_on(server, settings, "b") as b:
            yield a, b
    finally:
        server.kill()
