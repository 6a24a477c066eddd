"""REDIS_URL's Sentinel form (CONTRACT.md): read into its parts, refused with the part named,
and a plain URL that names a Redis replica (a primary since demoted) not taken for a source."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.banlist.redis.client import SentinelURL, check_url
from app.main import create_app
from tests.conftest import AUTH
from tests.redis_server import RedisServer


def test_a_sentinel_url_names_the_sentinels_the_service_and_the_db():
    url = SentinelURL.parse("redis+sentinel://app:p%40ss@s1.example:26380,[::1],10.0.0.3:5000"
                            "/rearrange/2?sentinel_password=sp")
    assert url.sentinels == (("s1.example", 26380), ("::1", 26379), ("10.0.0.3", 5000))
    assert (url.service, url.db, url.username, url.password) == ("rearrange", 2, "app", "p@ss")
    assert (url.sentinel_username, url.sentinel_password) == (None, "sp")
    plain = SentinelURL.parse("redis+sentinel://s1:26379/mymaster")
    assert (plain.db, plain.username, plain.password) == (0, None, None)


@pytest.mark.parametrize(("url", "problem"), [
    ("redis+sentinel://s1:26379", "names no service"),
    ("redis+sentinel://s1:26379/", "names no service"),
    ("redis+sentinel://s1:26379/svc/x", "is not /SERVICE or /SERVICE/DB"),
    ("redis+sentinel://s1:26379/svc/0/1", "is not /SERVICE or /SERVICE/DB"),
    ("redis+sentinel://s1:26379,,s2/svc", "an empty Sentinel address"),
    ("redis+sentinel://s1:0/svc", "is not HOST:PORT"),
    ("redis+sentinel://s1:port/svc", "is not HOST:PORT"),
    ("redis+sentinel://[::1]x/svc", "is not [HOST]:PORT"),
    ("redis+sentinel://s1/svc?timeout=3", "unknown option 'timeout'"),
    ("http://s1:26379/svc", "Redis URL must specify one of the following schemes"),
])
def test_a_malformed_url_is_refused_with_what_is_wrong(url, problem):
    with pytest.raises(ValueError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        check_url(url)


@pytest.mark.redis
def test_a_replica_named_by_a_plain_url_is_not_followed_and_says_why(tmp_path, settings):
    primary = RedisServer(tmp_path / "primary").start()
    demoted = RedisServer(tmp_path / "demoted", args=(
        "--replicaof", "127.0.0.1", str(primary.port))).start()
    try:
        with TestClient(create_app(settings.model_copy(update={
                "redis_url": demoted.url, "banlist_block_seconds": 0.3,
                "banlist_snapshot_path": None}))) as c:
            ready = c.get("/readyz").json()
            assert ready["banlist_in_sync"] is False
            assert f"127.0.0.1:{demoted.port} is a slave (its primary: 127.0.0.1:" \
                   f"{primary.port}), not the primary" in ready["banlist_problem"]
            r = c.post("/v1/banlist/entries", headers=AUTH,
                       json={"scope": "host", "value": "x.example", "reason": "r"})
            assert r.status_code == 503
    finally:
        demoted.kill()
        primary.kill()
