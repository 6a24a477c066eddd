"""Config versions shared through a real redis-server: two (and three) service instances."""
from __future__ import annotations

import logging

from tests.banlist.redis.test_live_redis import until
from tests.conftest import AUTH, app_on

PAGE = {"documents": [{"id": "a", "url": "http://x.com/1", "score": 2},
                      {"id": "b", "url": "http://y.com/1", "score": 1}]}
ONE = "profiles: {default: {trim: [{depth: {k: 1}}]}}\n"
TWO = "profiles: {default: {trim: [{depth: {k: 2}}]}}\n"


def serving(app) -> str:
    return app.post("/v1/rerank", json=PAGE).json()["config_version"]


def config(app) -> dict:
    return app.get("/v1/admin/config", headers=AUTH).json()


def test_a_rollback_reaches_every_replica_and_one_started_later(redis_server, settings):
    with app_on(redis_server, settings, "a") as a, app_on(redis_server, settings, "b") as b:
        start = serving(a)
        assert serving(b) == start and config(b)["replication"]["connected"] is True
        settings.config.write_text(ONE)
        one = a.post("/v1/admin/config/reload", headers=AUTH).json()["config_version"]
        until(lambda: serving(b) == one)  # b's poll is off: it came through Redis
        r = a.post("/v1/admin/config/rollback", headers=AUTH, json={"version": start})
        assert r.status_code == 200
        until(lambda: serving(b) == start)
        got = config(b)
        assert (got["how"], got["by"], got["origin"], got["file_version"]) == (
            "replication", "tns", "rollback", one)
        assert len(b.post("/v1/rerank", json=PAGE).json()["documents"]) == 2
        with app_on(redis_server, settings, "c") as c:  # its file holds ONE: not new
            assert serving(c) == start
            versions = c.get("/v1/admin/config/versions", headers=AUTH).json()["versions"]
            assert [(v["version"], v["how"]) for v in versions] == [
                (start, "replication"), (one, "start")]


def test_rollback_on_any_replica_finds_versions_only_another_served(redis_server, settings):
    with app_on(redis_server, settings, "a") as a:
        start = serving(a)
        settings.config.write_text(ONE)
        one = a.post("/v1/admin/config/reload", headers=AUTH).json()["config_version"]
        with app_on(redis_server, settings, "b") as b:  # started on ONE, never served start
            assert [v["version"] for v in b.get("/v1/admin/config/versions",
                                                headers=AUTH).json()["versions"]] == [one]
            old = b.get(f"/v1/admin/config/versions/{start}", headers=AUTH)
            assert old.status_code == 200 and old.json()["how"] == "start"
            r = b.post("/v1/admin/config/rollback", headers=AUTH, json={"version": start})
            assert r.status_code == 200 and serving(b) == start
            until(lambda: serving(a) == start)


def test_after_a_rollback_the_same_file_keeps_it_and_new_content_wins(redis_server, settings):
    with app_on(redis_server, settings, "a") as a, app_on(redis_server, settings, "b") as b:
        start = serving(a)
        settings.config.write_text(ONE)
        one = a.post("/v1/admin/config/reload", headers=AUTH).json()["config_version"]
        until(lambda: serving(b) == one)
        a.post("/v1/admin/config/rollback", headers=AUTH, json={"version": start})
        until(lambda: serving(b) == start)
        settings.config.write_text(ONE)  # b reads the file again: nothing new in it
        r = b.post("/v1/admin/config/reload", headers=AUTH).json()
        assert (r["changed"], r["config_version"]) == (False, start)
        settings.config.write_text(TWO)  # an edit: the newest change, on every replica
        two = b.post("/v1/admin/config/reload", headers=AUTH).json()["config_version"]
        until(lambda: serving(a) == two)
        assert config(a)["how"] == "replication" and config(a)["origin"] == "reload"


def test_a_replica_started_on_new_file_content_publishes_it(redis_server, settings):
    with app_on(redis_server, settings, "a") as a:
        start = serving(a)
        settings.config.write_text(ONE)  # a's poll is off; b starts on the edited file
        with app_on(redis_server, settings, "b") as b:
            one = serving(b)
            assert one != start and config(b)["how"] == "start"
            until(lambda: serving(a) == one)


def test_redis_lost_keeps_the_config_and_is_counted_and_logged_once(redis_server, settings,
                                                                     caplog):
    caplog.set_level(logging.WARNING, logger="app.config.replica")
    with app_on(redis_server, settings, "a") as a, app_on(redis_server, settings, "b") as b:
        start = serving(a)
        redis_server.kill()
        until(lambda: config(a)["replication"]["connected"] is False)
        assert serving(a) == start
        r = a.post("/v1/admin/config/rollback", headers=AUTH, json={"version": start})
        assert r.json()["changed"] is False  # the version served: nothing to share
        settings.config.write_text(ONE)  # a file change while Redis is gone: served here
        one = a.post("/v1/admin/config/reload", headers=AUTH).json()["config_version"]
        assert serving(a) == one and serving(b) == start
        for _ in range(3):
            a.post("/v1/admin/config/reload", headers=AUTH)
        r = a.post("/v1/admin/config/rollback", headers=AUTH, json={"version": start})
        assert r.status_code == 503 and r.json()["field"] == "redis"
        assert serving(a) == one
        scrape = a.get("/metrics")  # answers while Redis is down
        assert scrape.status_code == 200
        for op in ("follow", "publish"):
            assert f'rearrange_config_redis_errors_total{{op="{op}"}} 0.0' not in scrape.text
        assert f'rearrange_config_info{{version="{one}"}} 1.0' in scrape.text
        lost = [rec for rec in caplog.records if rec.name == "app.config.replica"
                and "Redis unreachable" in rec.getMessage()]
        assert len(lost) == 2  # one line per replica however many rounds failed
        redis_server.restart()  # back empty: a's change is the one Redis lacks
        until(lambda: serving(b) == one, 15)  # both reconnect with a backoff of up to 2 s
        until(lambda: config(a)["replication"]["in_step"] and config(b)["replication"][
            "in_step"])
        assert serving(a) == one
