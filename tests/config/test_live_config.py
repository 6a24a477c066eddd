"""`rearrange config …` against real `rearrange serve` processes sharing one redis-server."""
from __future__ import annotations

import contextlib
import io

import httpx
import pytest

from app.cli.main import main as cli
from bench.replicas import free_port
from tests.banlist.redis import test_live_redis
from tests.banlist.redis.test_live_redis import until
from tests.conftest import ROOT
from tests.redis_server import ServeProcess

pytestmark = pytest.mark.redis  # every test here runs on a redis-server of its own

cluster = test_live_redis.cluster  # its fixture: serve processes on one redis-server
PAGE = {"documents": [{"id": "a", "url": "http://x.com/1", "score": 2},
                      {"id": "b", "url": "http://y.com/1", "score": 1}]}
ONE = "profiles: {default: {trim: [{depth: {k: 1}}]}}\n"
TWO = "profiles: {default: {trim: [{depth: {k: 2}}]}}\n"


def serving(replica: ServeProcess) -> str:
    return httpx.post(f"{replica.base}/v1/rerank", json=PAGE).json()["config_version"]


def run(base: str, token: str | None, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(["config", "--url", base, *(["--token", token] if token else []), *args])
    return code, out.getvalue(), err.getvalue()


def unchanged_reloads(base: str) -> float:
    for line in httpx.get(f"{base}/metrics").text.splitlines():
        if line.startswith('rearrange_config_reloads_total{result="unchanged"}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_show_versions_and_rollback_across_replicas(cluster, tmp_path):
    _, instance = cluster
    config = tmp_path / "rules.yaml"  # the cluster's config file
    a, b = instance("a"), instance("b")
    start = serving(a)
    code, out, _ = run(a.base, "t-read", "versions")
    assert code == 0 and start in out and "start" in out
    config.write_text(ONE)  # both poll the file; the first to see it shares it
    until(lambda: serving(a) != start and serving(b) == serving(a), 10)
    one = serving(a)

    code, out, _ = run(a.base, "t-write", "rollback", start)
    assert code == 0 and out.startswith(f"now serving {start} (rolled back by tns at ")
    until(lambda: serving(b) == start)
    code, out, err = run(b.base, "t-read", "show")
    assert code == 0 and out == (ROOT / "config" / "rules.yaml").read_text()
    assert f"config_version {start}" in err and "replication of a rollback by tns" in err
    assert f"the file holds {one}" in err

    seen = unchanged_reloads(a.base)
    config.write_text(ONE)  # the same content again: a poll reads it, the rollback stays
    until(lambda: unchanged_reloads(a.base) > seen, 10)
    assert serving(a) == serving(b) == start
    c = instance("c")  # started later, on the file's ONE: serves the rollback
    assert serving(c) == start

    config.write_text(TWO)  # an edit: the newest version, everywhere
    until(lambda: serving(a) == serving(b) == serving(c) != start, 10)
    code, out, _ = run(c.base, "t-read", "versions")
    rows = out.splitlines()
    assert rows[0].split()[:2] == ["SERVING", "VERSION"] and rows[1].startswith("*")
    assert serving(c) in rows[1] and start in rows[2]


def test_the_cli_says_clearly_what_went_wrong(cluster):
    _, instance = cluster
    a = instance("a")
    start = serving(a)
    code, _, err = run(a.base, "t-read", "rollback", start)
    assert code == 1 and "refused: HTTP 403: Authorization: the token of viewer is read-only" in err
    code, _, err = run(a.base, None, "show")
    assert code == 1 and "HTTP 401: Authorization" in err
    code, _, err = run(a.base, "t-write", "rollback", "0123456789abcdef")
    assert code == 1 and "HTTP 404: version: no config version '0123456789abcdef'" in err
    code, _, err = run(a.base, "t-write", "show", "0123456789abcdef")
    assert code == 1 and "HTTP 404: version" in err
    code, out, _ = run(a.base, "t-write", "rollback", start)
    assert (code, out.strip()) == (0, f"already serving {start}: nothing changed")
    code, _, err = run(f"http://127.0.0.1:{free_port()}", "t-write", "versions")
    assert code == 3 and "cannot reach" in err and "connection refused" in err
