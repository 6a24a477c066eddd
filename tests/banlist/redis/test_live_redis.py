"""Several real `rearrange serve` processes sharing one real redis-server (started here)."""
from __future__ import annotations

import contextlib
import io
import re
import threading
import time
from pathlib import Path

import httpx
import pytest

from app.cli.main import main as cli
from tests.conftest import ROOT
from tests.redis_server import RedisServer, ServeProcess, stop_all

pytestmark = pytest.mark.redis  # every test here runs on a redis-server of its own

TOKENS = "tns:t-write,viewer:t-read:read,legacy:t-legacy"
W = {"Authorization": "Bearer t-write"}
PAGE = {"documents": [{"id": "a", "url": "http://banned.example/1", "score": 2},
                      {"id": "b", "url": "http://fine.example/1", "score": 1}]}


@pytest.fixture
def cluster(tmp_path: Path):
    redis = RedisServer(tmp_path / "redis", appendonly=True).start()
    config = tmp_path / "rules.yaml"
    config.write_bytes((ROOT / "config" / "rules.yaml").read_bytes())
    started: list[ServeProcess] = []

    def instance(name: str) -> ServeProcess:
        env = {"REDIS_URL": redis.url, "REARRANGE_CONFIG": str(config),
               "REARRANGE_ADMIN_TOKENS": TOKENS, "REARRANGE_CONFIG_POLL_SECONDS": "0.2",
               "REARRANGE_BANLIST_BLOCK_SECONDS": "0.5",
               "REARRANGE_BANLIST_SNAPSHOT_PATH": str(tmp_path / f"{name}.snapshot.json"),
               "REARRANGE_BANLIST_PATH": str(tmp_path / f"{name}.unused.jsonl")}
        proc = ServeProcess(ROOT, tmp_path, env)
        started.append(proc)
        return proc

    yield redis, instance
    stop_all(started)
    redis.kill()


def until(cond, timeout: float = 5.0) -> float:
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > timeout:
            pytest.fail(f"not within {timeout} s")
        time.sleep(0.01)
    return time.monotonic() - start


def banned(base: str, url: str) -> bool:
    return httpx.get(f"{base}/v1/banlist/lookup", params={"url": url}).json()["banned"]


def export(base: str) -> list[dict]:
    return [httpx.Response(200, content=line).json() for line in
            httpx.get(f"{base}/v1/banlist/export").content.splitlines()]


def test_replicas_follow_each_other_and_survive_redis_dying(cluster):
    redis, instance = cluster
    a, b = instance("a"), instance("b")
    r = httpx.post(f"{a.base}/v1/banlist/entries", headers=W,
                   json={"scope": "host", "value": "banned.example", "reason": "malware"})
    assert r.status_code == 201
    assert until(lambda: banned(b.base, "http://banned.example/x"), 1.0) < 1.0
    assert [d["id"] for d in httpx.post(f"{b.base}/v1/rerank", json=PAGE).json()["documents"]] \
        == ["b"]

    statuses: list[int] = []
    stop = threading.Event()

    def hammer(base: str) -> None:
        with httpx.Client(base_url=base, timeout=5) as c:
            while not stop.is_set():
                resp = c.post("/v1/rerank", json=PAGE)
                statuses.append(resp.status_code)
                assert [d["id"] for d in resp.json()["documents"]] == ["b"]

    threads = [threading.Thread(target=hammer, args=(x.base,)) for x in (a, b)]
    for t in threads:
        t.start()
    acked = []
    for i in range(30):
        if i == 10:
            redis.kill()
        if i == 20:
            redis.restart()
        resp = httpx.post(f"{a.base}/v1/banlist/entries", headers=W,
                          json={"scope": "domain", "value": f"s{i}.example", "reason": "spam"})
        if resp.status_code == 201:
            acked.append(resp.json()["entry"]["id"])
        else:
            assert resp.status_code == 503 and resp.json()["field"] == "banlist"
        if i == 15:  # Redis down: both replicas still serve and say how stale they are
            until(lambda: not httpx.get(f"{b.base}/readyz").json()["banlist_in_sync"], 5)
            ready = httpx.get(f"{b.base}/readyz")
            assert ready.status_code == 200
            assert ready.json()["banlist_staleness_seconds"] > 0
            assert "unreachable" in ready.json()["banlist_problem"]
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join()
    assert statuses and set(statuses) == {200}
    assert 10 <= len(acked) <= 20
    until(lambda: all(httpx.get(f"{x.base}/readyz").json()["banlist_in_sync"] for x in (a, b)))
    want = {"1", *acked}
    for x in (a, b):
        until(lambda x=x: {e["id"] for e in export(x.base)} == want)
    c = instance("c")  # started later: gets the whole list
    until(lambda: export(c.base) == export(a.base))
    metrics = httpx.get(f"{b.base}/metrics").text
    assert 'rearrange_banlist_entries_by_scope{scope="domain"}' in metrics
    assert "rearrange_banlist_replication_lag_seconds_bucket" in metrics
    assert "rearrange_banlist_in_sync 1.0" in metrics


@pytest.mark.python_path("sends no /v1/rerank: the CLI and the control port only")
def test_the_cli_against_a_running_replica(cluster, tmp_path):
    _, instance = cluster
    a = instance("a")
    b = instance("b")

    def run(*args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli(["banlist", "--url", a.base, "--token", "t-write", *args])
        return code, out.getvalue(), err.getvalue()

    bad = tmp_path / "bad.csv"
    bad.write_text("scope,value,reason,regions\nhost,ok.example,r,\n"
                   "domain,co.uk,r,\nsite,x.example,r,\n")
    code, _, err = run("import", str(bad))
    assert code == 1 and "2 of 3 lines refused; nothing imported" in err
    assert "public suffix" in err and "co.uk" not in export(a.base)
    assert re.search(r"^3\s+value\s+co\.uk is a public suffix", err, re.M)
    assert re.search(r"^4\s+scope\s+unknown scope 'site'", err, re.M)
    good = tmp_path / "good.ndjson"
    good.write_text("".join(f'{{"scope": "host", "value": "h{i}.example", "reason": "r"}}\n'
                            for i in range(2500)))
    code, out, err = run("import", str(good), "--progress")  # stderr is no terminal here
    assert code == 0 and "imported 2500 entries" in out and " 2500/2500 " in err
    until(lambda: httpx.get(f"{b.base}/readyz").json()["banlist_entries"] == 2500)
    code, out, _ = run("group", "acme", "acme.com", "acme-shop.net", "--reason", "one owner")
    assert code == 0 and "acme.com, acme-shop.net" in out
    code, out, _ = run("add", "org", "acme", "--reason", "court order", "--regions", "ru")
    assert code == 0 and "org" in out and "RU" in out
    until(lambda: httpx.get(f"{b.base}/v1/banlist/lookup",
                            params={"url": "http://www.acme-shop.net/", "region": "RU"}
                            ).json()["banned"])
    code, out, err = run("lookup", "http://WWW.acme-shop.net/x", "--region", "ru")
    assert code == 0 and "BANNED" in out, err
    assert "org acme: member domain acme-shop.net (a parent of www.acme-shop.net)" in out
    code, out, _ = run("history", "--after-seq", "2500")
    assert code == 0 and "group acme: 2 domains" in out and "tns" in out
    code, out, _ = run("export", "--format", "csv")
    assert code == 0 and out.count("\n") == 2503 and out.startswith("id,scope,value")
    assert out.splitlines()[1] == ",group,acme,,,,,,acme.com;acme-shop.net"  # groups first
    # roles: a read token looks up, cannot write; a bare actor:token still writes
    r = httpx.post(f"{a.base}/v1/banlist/entries", headers={"Authorization": "Bearer t-read"},
                   json={"scope": "host", "value": "x.example", "reason": "r"})
    assert r.status_code == 403 and "read-only" in r.json()["problem"]
    r = httpx.post(f"{a.base}/v1/banlist/entries", headers={"Authorization": "Bearer t-legacy"},
                   json={"scope": "host", "value": "x.example", "reason": "r"})
    assert r.status_code == 201 and r.json()["entry"]["actor"] == "legacy"
    code, _, err = run("reseed", "--reason", "test")
    assert code == 1 and "not behind" in err


@pytest.mark.python_path("sends no /v1/rerank: an import and Redis dying")
def test_an_import_cut_short_by_redis_dying_says_exactly_what_committed(cluster, tmp_path):
    redis, instance = cluster
    a = instance("a")
    big = tmp_path / "big.ndjson"
    big.write_text("".join(f'{{"scope": "host", "value": "h{i}.example", "reason": "r"}}\n'
                           for i in range(10_000)))

    def saboteur() -> None:  # once a chunk is in, hold the next write in Redis, then kill it
        until(lambda: httpx.get(f"{a.base}/readyz").json()["banlist_version"] >= 1000, 60)
        with redis.client() as r:
            r.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
        time.sleep(0.5)
        redis.kill()

    thread = threading.Thread(target=saboteur)
    thread.start()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(["banlist", "--url", a.base, "--token", "t-write", "import", str(big)])
    thread.join()
    assert code == 1, err.getvalue()
    said = re.search(r"imported (\d+) entries \(file lines up to (\d+)\) before the failure; "
                     r"lines (\d+)-(\d+): unknown \(all or nothing\): "
                     r"`GET /v1/banlist/writes/([0-9a-f]{32})`", err.getvalue())
    assert said, err.getvalue()
    done, last, first_cut, last_cut, write_id = said.groups()
    assert int(done) == int(last) and int(first_cut) == int(last) + 1 and int(done) >= 1000
    redis.restart()  # its append-only file: every acknowledged chunk, and nothing else
    until(lambda: httpx.get(f"{a.base}/readyz").json()["banlist_in_sync"], 10)
    assert httpx.get(f"{a.base}/v1/banlist/writes/{write_id}", headers=W).json() == {
        "write_id": write_id, "committed": False}
    assert httpx.get(f"{a.base}/readyz").json()["banlist_entries"] == int(done)
