"""Redis's maxmemory-policy: an evicting one refuses the start, found after a reconnect it
suspends writes loudly, and a Redis that hides CONFIG is served with a warning (a real
redis-server each time)."""
from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.errors import StartupRefused
from app.main import create_app
from tests.conftest import AUTH, ROOT, app_on
from tests.redis_server import RedisServer

BAN = {"scope": "host", "value": "spam.example", "reason": "r"}


@pytest.fixture
def aof_server(tmp_path: Path):
    """Append-only on, so a restart with other options keeps the data."""
    server = RedisServer(tmp_path / "redis", appendonly=True).start()
    yield server
    server.kill()


def metric(client, name: str, labels: str = "") -> float:
    text = client.get("/metrics").text
    return float(re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.MULTILINE).group(1))


def until(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.02)


@pytest.mark.redis
def test_an_evicting_redis_refuses_the_start_in_one_line(tmp_path, settings):
    server = RedisServer(tmp_path / "lru", args=("--maxmemory-policy", "allkeys-lru")).start()
    try:
        with pytest.raises(StartupRefused, match="maxmemory-policy is allkeys-lru, not "
                           "noeviction"):
            create_app(settings.model_copy(update={"redis_url": server.url}))
        env = {**os.environ, "REDIS_URL": server.url, "REARRANGE_CONFIG": str(settings.config),
               "REARRANGE_BANLIST_SNAPSHOT_PATH": "", "REARRANGE_AUDIT_LOG": "",
               "REARRANGE_LOG_LEVEL": "warning"}
        done = subprocess.run([sys.executable, "-m", "app.cli", "serve", "--port", "0"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("rearrange: not starting: Redis's maxmemory-policy is "
                               "allkeys-lru"), done.stderr
        assert "Traceback" not in done.stderr
    finally:
        server.kill()


@pytest.mark.redis
def test_an_evicting_policy_found_on_reconnect_suspends_writes_loudly(
        aof_server, settings, caplog):
    with app_on(aof_server, settings, "a") as a:
        assert a.post("/v1/banlist/entries", headers=AUTH, json=BAN).status_code == 201
        assert a.get("/readyz").json()["redis_maxmemory_policy"] == "noeviction"
        assert metric(a, "rearrange_redis_evicting") == 0
        aof_server.args = ["--maxmemory-policy", "volatile-lru"]  # the outcome keys go first
        aof_server.restart()
        until(lambda: a.get("/readyz").json()["redis_policy_problem"] is not None)
        ready = a.get("/readyz")
        assert ready.status_code == 200 and ready.json()["ready"]  # still serving its copy
        assert ready.json()["redis_maxmemory_policy"] == "volatile-lru"
        assert metric(a, "rearrange_redis_evicting") == 1
        assert metric(a, "rearrange_redis_policy_checks_total", '{result="evicting"}') >= 1
        w = a.post("/v1/banlist/entries", headers=AUTH,
                   json={**BAN, "value": "other.example"})
        assert w.status_code == 503 and "volatile-lru" in w.json()["problem"]
        feed = a.post("/v1/sanctions/scores", headers={"Authorization": "Bearer spam-token"},
                      json={"observations": [{"host": "g.example", "spam_score": 0.8,
                                              "observed_at": 1}]})
        assert feed.status_code == 503 and "volatile-lru" in feed.json()["problem"]
        loud = [r for r in caplog.records
                if r.levelno == logging.ERROR and "volatile-lru" in r.getMessage()]
        assert len(loud) == 1, [r.getMessage() for r in loud]  # once, with the cause

        aof_server.args = []  # noeviction, Redis's default
        aof_server.restart()
        until(lambda: a.get("/readyz").json()["redis_policy_problem"] is None)
        assert a.post("/v1/banlist/entries", headers=AUTH,
                      json={**BAN, "value": "other.example"}).status_code == 201
        assert metric(a, "rearrange_redis_evicting") == 0


def test_a_redis_that_refuses_config_get_is_served_with_a_warning(
        redis_server, settings, caplog):
    with redis_server.client() as r:
        r.execute_command("ACL", "SETUSER", "default", "-config")  # as managed Redis does
    caplog.set_level(logging.WARNING)
    with app_on(redis_server, settings, "a") as a:
        ready = a.get("/readyz")
        assert ready.status_code == 200 and ready.json()["redis_maxmemory_policy"] is None
        assert "could not be checked" not in ready.json()["redis_policy_problem"]
        assert "CONFIG GET maxmemory-policy was refused" in ready.json()["redis_policy_problem"]
        assert metric(a, "rearrange_redis_policy_checks_total", '{result="unknown"}') >= 1
        assert a.post("/v1/banlist/entries", headers=AUTH, json=BAN).status_code == 201
        warned = [r for r in caplog.records if "could not be checked" in r.getMessage()]
        assert len(warned) == 1


def test_without_redis_there_is_no_policy_to_report(settings):
    with TestClient(create_app(settings)) as client:
        assert "redis_maxmemory_policy" not in client.get("/readyz").json()
