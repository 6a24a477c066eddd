"""Shared fixtures: settings on temporary paths and a real app behind TestClient."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from fastapi.testclient import TestClient

from app.config.settings import Settings
from app.main import create_app
from tests.paths import PATHS, involves_rerank, native  # noqa: F401 (a fixture)
from tests.sides import SIDES, Side

ROOT = Path(__file__).resolve().parents[1]
TOKENS = "tns:tns-token,antispam:spam-token"
# The suite's deadline: near_duplicates is optional, so a request past the default 100 ms
# skips it, and on a loaded CI run that changed pages the tests compare byte for byte (seen:
# near-dup collapses missing on one path of test_paths_identical, cache counts short). The
# deadline's own tests set theirs (1e-6 ms: every optional rule skipped).
DEADLINE_MS = 5000.0
AUTH = {"Authorization": "Bearer tns-token"}

# Property tests draw fresh examples on every local run; under CI (`CI` set, as .ci/run sets
# it) each draws the same ones every run, seeded by the test itself, so that a CI failure
# reproduces and a CI pass is not luck (no example database either: a fresh clone has none).
# A test's own @settings (max_examples, deadline) applies on top of the profile.
# Every `rearrange serve` a test starts binds its data port where the test says, else any free
# port: two servers of two tests (or a developer's own on 8081) never fight over the default.
os.environ.setdefault("REARRANGE_DATA_PORT", "0")

hypothesis.settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
hypothesis.settings.load_profile("ci" if os.environ.get("CI") else "default")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test on the `redis_server` fixture is marked `redis` too (`-m "not redis"`)."""
    for item in items:
        if "redis_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.redis)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test of a module sending /v1/rerank requests runs on both paths (tests/paths.py)."""
    if "rerank_path" in metafunc.fixturenames and involves_rerank(metafunc):
        metafunc.parametrize("rerank_path", PATHS, indirect=True)


@pytest.fixture(autouse=True)
def rerank_path(request: pytest.FixtureRequest) -> str:
    """The path TestClients' /v1/rerank requests take: `python` (the app's own) or
    `native` (the app's data-plane listener, tests/paths.py)."""
    path: str = getattr(request, "param", "python")
    if path == "native":
        request.getfixturevalue("native")
    return path


def pytest_collection_finish(session: pytest.Session) -> None:
    """Without redis-server: one line saying how to install it, and exit 2 before any test
    runs, when a test collected needs one (marked `redis`), not an error for each of them."""
    from tests.redis_server import INSTALL, NO_REDIS, REDIS_SERVER

    if REDIS_SERVER is not None or session.config.option.collectonly:
        return
    if any(item.get_closest_marker("redis") for item in session.items):
        pytest.exit(INSTALL, returncode=NO_REDIS)


def service_settings(tmp: Path, config: Path = ROOT / "config" / "rules.yaml",
                     **overrides: Any) -> Settings:
    """Settings of an isolated service in `tmp`: its own copy of `config`, banlist log and
    audit log; no review of high-impact bans (a test's few requests make every host
    high-impact: tests/api/test_ban_review.py turns it on); the suite's deadline
    (DEADLINE_MS); then `overrides`."""
    copy = tmp / "rules.yaml"
    copy.write_bytes(config.read_bytes())
    return Settings(**{"config": copy, "banlist_path": tmp / "banlist.jsonl",
                       "admin_tokens": TOKENS, "audit_log": str(tmp / "audit.jsonl"),
                       "config_poll_seconds": 0, "redis_url": None, "banlist_seed": None,
                       "ban_review_share": 1.0, "deadline_ms": DEADLINE_MS, **overrides})


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The settings of an isolated service (`service_settings`)."""
    return service_settings(tmp_path)


@pytest.fixture
def client(settings: Settings):
    """A TestClient around a freshly built app (lifespan run)."""
    with TestClient(create_app(settings)) as c:
        yield c


@pytest.fixture
def redis_server(tmp_path: Path):
    """A fresh real redis-server on a free port, killed after the test."""
    from tests.redis_server import RedisServer

    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.kill()


def app_on(redis_server, settings: Settings, name: str) -> TestClient:
    """A TestClient of a Redis-backed replica named `name` (its own local snapshot file);
    `redis_server` is a server of the suite's (RedisServer, SentinelSet) or a URL."""
    url = redis_server if isinstance(redis_server, str) else redis_server.url
    return TestClient(create_app(settings.model_copy(update={
        "redis_url": url, "banlist_block_seconds": 0.3,
        "banlist_snapshot_path": settings.banlist_path.with_name(f"{name}.snapshot.json")})))


PLUGINS = ROOT / "tests" / "plugins"


@pytest.fixture
def plugin_path(monkeypatch):
    """tests/plugins on sys.path, as PYTHONPATH would put a team's rule modules."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    return PLUGINS


@pytest.fixture(params=SIDES, ids=lambda side: side.name)
def side(request) -> Side:
    """The engine behind a config and request builder (tests/sides.py)."""
    return request.param
