"""Issue 15: an export imports into an empty service as the same bans and groups, and a second
time changes nothing; into the embedded store and into Redis (a real redis-server)."""
from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.config.settings import Settings
from app.errors import BanlistError
from app.main import create_app
from tests.conftest import AUTH, app_on

SPAM = {"Authorization": "Bearer spam-token"}


def apart(settings: Settings, tmp_path: Path, name: str) -> Settings:
    """Settings of another service: its own banlist log, sanctions file and audit log."""
    home = tmp_path / name
    home.mkdir()
    return settings.model_copy(update={"banlist_path": home / "banlist.jsonl",
                                       "audit_log": str(home / "audit.jsonl")})


@pytest.fixture
def source(settings):
    """A service holding org groups, an org ban, regional, expiring and another actor's bans."""
    with TestClient(create_app(settings)) as c:
        for name, domains in (("acme", ["acme.com", "acme-shop.net"]), ("beta", ["beta.org"])):
            r = c.put(f"/v1/banlist/groups/{name}", headers=AUTH,
                      json={"domains": domains, "reason": "one owner"})
            assert r.status_code == 200, r.text
        for headers, body in (
                (AUTH, {"scope": "org", "value": "acme", "reason": "court order"}),
                (AUTH, {"scope": "host", "value": "x.example", "reason": "malware",
                        "regions": ["RU", "KZ"]}),
                (SPAM, {"scope": "domain", "value": "spam.example", "reason": "doorways",
                        "ttl_seconds": 86400}),
                (SPAM, {"scope": "url", "value": "https://news.example/a?b=1",
                        "reason": "legal, \"quoted\"; with a comma"}),
                (AUTH, {"scope": "prefix", "value": "forum.example/leaks/", "reason": "doxxing",
                        "expires_at": "2099-01-02T03:04:05.678Z", "regions": ["DE"]})):
            r = c.post("/v1/banlist/entries", headers=headers, json=body)
            assert r.status_code == 201, r.text
        yield c


def bans(c: TestClient) -> tuple[dict[str, list[str]], list[tuple]]:
    """The groups and the active bans, by the list routes (not the export), without ids."""
    groups = {k: sorted(v) for k, v in c.get("/v1/banlist/groups").json()["groups"].items()}
    entries = c.get("/v1/banlist/entries", params={"limit": 1000}).json()["entries"]
    return groups, sorted((e["scope"], e["value"], tuple(e["regions"]), e["reason"], e["actor"],
                           e["expires_at"]) for e in entries)


def until(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.02)


@pytest.fixture(params=["embedded", pytest.param("redis", marks=pytest.mark.redis)])
def target(request, settings, tmp_path):
    """(a, b): two clients of one empty banlist (on the embedded store both are one)."""
    fresh = apart(settings, tmp_path, "target")
    if request.param == "embedded":
        with TestClient(create_app(fresh)) as c:
            yield c, c
        return
    from tests.redis_server import RedisServer

    server = RedisServer(tmp_path / "redis").start()
    try:
        with app_on(server, fresh, "a") as a, app_on(server, fresh, "b") as b:
            yield a, b
    finally:
        server.kill()


@pytest.mark.parametrize("fmt", ["ndjson", "csv"])
def test_an_export_imports_into_an_empty_service_as_the_same_bans_and_groups(
        source, target, fmt):
    a, b = target
    exported = source.get("/v1/banlist/export", params={"format": fmt})
    assert exported.status_code == 200
    r = a.post("/v1/banlist/import", params={"format": fmt}, headers=AUTH,
               content=exported.content)
    assert r.status_code == 200, r.text
    got = r.json()
    assert (got["imported"], got["existing"], got["refused"]) == (5, 0, [])
    assert (got["groups_defined"], got["groups_existing"]) == (2, 0)
    want = bans(source)
    assert bans(a) == want
    until(lambda: bans(b) == want)  # the other replica holds the same list
    # the entry keeps who banned it; the change log says who imported it
    changes = a.get("/v1/banlist/changes", params={"limit": 1000}).json()["changes"]
    assert [c["op"] for c in changes] == ["group", "group"] + ["add"] * 5
    assert {c["actor"] for c in changes} == {"tns"}
    assert {c["entry"]["actor"] for c in changes if c["op"] == "add"} == {"tns", "antispam"}
    # the org ban bans the members, as at the source
    look = b.get("/v1/banlist/lookup", params={"url": "https://shop.acme-shop.net/x"}).json()
    assert look["banned"] is True

    # twice: nothing changes, not even the version
    version = a.get("/v1/banlist/entries").json()["banlist_version"]
    again = b.post("/v1/banlist/import", params={"format": fmt}, headers=AUTH,
                   content=exported.content).json()
    assert (again["imported"], again["existing"], again["first_id"]) == (0, 5, None)
    assert (again["groups_defined"], again["groups_existing"]) == (0, 2)
    assert again["banlist_version"] == version
    for c in (a, b):
        assert bans(c) == want
        assert len(c.get("/v1/banlist/changes", params={"limit": 1000}).json()["changes"]) == 7
    # and the re-export is the same export, but for ids and creation times
    reexported = b.get("/v1/banlist/export", params={"format": fmt}).content
    assert _without_ids(reexported, fmt) == _without_ids(exported.content, fmt)


def _without_ids(body: bytes, fmt: str) -> list:
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(body.decode())))
    else:
        rows = [json.loads(line) for line in body.decode().splitlines()]
    assert rows
    return [{k: v for k, v in row.items() if k not in ("id", "created_at")} for row in rows]


def test_the_export_layout_is_groups_first_then_entries_with_the_documented_columns(source):
    lines = source.get("/v1/banlist/export").text.splitlines()
    assert json.loads(lines[0]) == {"scope": "group", "value": "acme",
                                    "domains": ["acme.com", "acme-shop.net"]}
    assert json.loads(lines[1]) == {"scope": "group", "value": "beta", "domains": ["beta.org"]}
    assert [json.loads(line)["scope"] for line in lines[2:]] == [
        "org", "host", "domain", "url", "prefix"]
    rows = source.get("/v1/banlist/export", params={"format": "csv"}).text.splitlines()
    assert rows[0] == "id,scope,value,reason,regions,expires_at,actor,created_at,domains"
    assert rows[1] == ",group,acme,,,,,,acme.com;acme-shop.net"
    assert rows[3].startswith("3,org,acme,court order,,,tns,") and rows[3].endswith(",")


@pytest.mark.parametrize("mode", ["all", "valid"])
def test_a_group_held_with_other_members_is_a_409_naming_it_and_nothing_changes(
        source, target, mode):
    a, b = target
    r = b.put("/v1/banlist/groups/beta", headers=AUTH,
              json={"domains": ["beta.net"], "reason": "another owner"})
    assert r.status_code == 200
    # acme held identically, members in another order: no conflict, a no-op
    r = a.put("/v1/banlist/groups/acme", headers=AUTH,
              json={"domains": ["acme-shop.net", "acme.com"], "reason": "one owner"})
    assert r.status_code == 200
    until(lambda: set(a.get("/v1/banlist/groups").json()["groups"]) == {"acme", "beta"})
    before = bans(a), a.get("/v1/banlist/entries").json()["banlist_version"]
    exported = source.get("/v1/banlist/export").content
    for dry_run in ("true", "false"):
        r = a.post("/v1/banlist/import", headers=AUTH, content=exported,
                   params={"mode": mode, "dry_run": dry_run})
        assert r.status_code == 409, r.text
        body = r.json()
        assert (body["field"], body["group"], body["line"]) == ("group", "beta", 2)
        assert "group 'beta' exists with other members" in body["problem"]
        assert "beta.net" in body["problem"] and "beta.org" in body["problem"]
        assert (bans(a), a.get("/v1/banlist/entries").json()["banlist_version"]) == before
    # without the conflicting group, the rest imports; acme counts as already there
    rest = b"\n".join(line for line in exported.splitlines() if b'"beta"' not in line)
    r = a.post("/v1/banlist/import", headers=AUTH, content=rest)
    assert r.status_code == 200, r.text
    assert (r.json()["groups_defined"], r.json()["groups_existing"]) == (0, 1)
    assert r.json()["imported"] == 5


def test_an_org_line_before_its_group_or_a_group_defined_twice_differently_is_refused(client):
    body = b"\n".join([
        b'{"scope": "org", "value": "acme", "reason": "r"}',
        b'{"scope": "group", "value": "acme", "domains": ["acme.com"]}',
        b'{"scope": "org", "value": "acme", "reason": "r"}',
        b'{"scope": "group", "value": "acme", "domains": ["acme.org"]}',
        b'{"scope": "group", "value": "acme", "domains": "acme.com"}',
        b'{"scope": "group", "value": "co", "domains": ["co.uk"]}',
        b'{"scope": "group", "value": "g", "domains": ["g.example"], "regions": ["DE"]}',
        b'{"scope": "host", "value": "h.example", "reason": "r", "domains": ["x.com"]}'])
    r = client.post("/v1/banlist/import", headers=AUTH, content=body)
    assert r.status_code == 422
    refused = {x["line"]: (x["field"], x["problem"]) for x in r.json()["refused"]}
    assert refused[1][0] == "value" and "no org group named 'acme'" in refused[1][1]
    assert refused[4] == ("domains", "group 'acme' is defined with other members on line 2")
    assert refused[6][0] == "domains[0]" and "public suffix" in refused[6][1]
    assert refused[7][0] == "regions"
    assert refused[8] == ("domains", "only a group record (scope group) has domains")
    assert set(refused) == {1, 4, 6, 7, 8}  # line 5: line 2's group again, as a CSV writes it
    assert client.get("/v1/banlist/groups").json()["groups"] == {}


def test_an_import_line_keeps_the_actor_it_names_within_limits(client):
    body = "\n".join(json.dumps({"scope": "host", "value": f"h{n}.example", "reason": "r",
                                 "actor": actor})
                     for n, actor in enumerate(["alice", "", "x" * 201, 5])).encode()
    body += b'\n{"scope": "group", "value": "g", "domains": ["g.example"], "actor": "bob"}\n'
    r = client.post("/v1/banlist/import", headers=AUTH, content=body, params={"mode": "valid"})
    assert r.status_code == 200, r.text
    assert [(x["line"], x["field"]) for x in r.json()["refused"]] == [
        (2, "actor"), (3, "actor"), (4, "actor"), (5, "actor")]
    assert r.json()["imported"] == 1
    change = client.get("/v1/banlist/changes").json()["changes"][0]
    assert (change["entry"]["actor"], change["actor"]) == ("alice", "tns")


def test_a_write_that_defines_a_group_another_replica_defined_since_is_decided_again(
        redis_server, settings):
    with app_on(redis_server, settings, "a") as a, app_on(redis_server, settings, "b") as b:
        r = a.put("/v1/banlist/groups/acme", headers=AUTH,
                  json={"domains": ["acme.com"], "reason": "r"})
        assert r.status_code == 200
        sb = b.app.state.services.store
        # b decided on a copy without a's group (stream id 0-0): the script refuses
        with pytest.raises(BanlistError) as info:
            sb._run(["group", "acme", json.dumps(["acme.org"]), "tns", "r", ""],
                    decided_on="0-0")
        assert info.value.field == "conflict"
        # decided again on the caught-up copy: the import's other members are a 409
        body = b'{"scope": "group", "value": "acme", "domains": ["acme.org"]}\n'
        r = b.post("/v1/banlist/import", headers=AUTH, content=body)
        assert r.status_code == 409 and r.json()["group"] == "acme"
        assert b.get("/v1/banlist/groups").json()["groups"] == {"acme": ["acme.com"]}


@pytest.mark.parametrize("store", ["embedded", pytest.param("redis", marks=pytest.mark.redis),
                                   pytest.param("redis-staged", marks=pytest.mark.redis)])
@pytest.mark.parametrize("name", ["live.ndjson", "live.csv", "live"])
def test_a_service_seeded_with_an_export_holds_its_bans_and_groups(
        source, settings, tmp_path, monkeypatch, store, name):
    fmt = "csv" if name != "live.ndjson" else "ndjson"  # `live`: CSV told by its content
    seed = tmp_path / name
    seed.write_bytes(source.get("/v1/banlist/export", params={"format": fmt}).content)
    fresh = apart(settings, tmp_path, "seeded").model_copy(update={"banlist_seed": seed})
    if store == "embedded":
        with TestClient(create_app(fresh)) as c:
            assert_seeded(c, bans(source))
        return
    from app.banlist.redis import store as redis_store
    from tests.redis_server import RedisServer

    if store == "redis-staged":  # staged in hashes of their own, swapped in by one script
        monkeypatch.setattr(redis_store, "MAX_SCRIPT", 3)
    server = RedisServer(tmp_path / "redis").start()
    try:
        with app_on(server, fresh, "a") as a:
            assert_seeded(a, bans(source))
            ops = [c["op"] for c in a.get("/v1/banlist/changes").json()["changes"]]
            assert ops == (["seed"] if store == "redis-staged" else ["group"] * 2 + ["add"] * 5)
    finally:
        server.kill()


def assert_seeded(c: TestClient, want) -> None:
    assert bans(c) == want
    look = c.get("/v1/banlist/lookup", params={"url": "https://www.acme.com/"}).json()
    assert look["banned"] is True and look["matches"][0]["scope"] == "org"


def test_the_cli_imports_an_export_chunk_by_chunk_each_led_by_the_groups(
        source, tmp_path, capsys, monkeypatch):
    """`rearrange banlist import` against `rearrange serve`: an org line in a later chunk than
    its group's still imports, and the second import of the other format changes nothing."""
    import argparse

    import httpx

    from app.cli import banlist as cli_banlist
    from app.cli import banlist_import
    from tests.api.test_live_server import start_server

    r = source.post("/v1/banlist/entries", headers=AUTH,
                    json={"scope": "org", "value": "beta", "reason": "the last line"})
    assert r.status_code == 201
    monkeypatch.setattr(banlist_import, "CHUNK", 2)  # 6 entries: the beta ban in the third chunk
    (tmp_path / "live").mkdir()
    proc, base, _ = start_server(tmp_path / "live")
    try:
        cli = {"service_url": base, "token": "t", "banlist_command": "import", "format": None,
               "mode": "all", "dry_run": False}
        for fmt, said in (("csv", "imported 6 entries, 0 already present, 0 refused, "
                                  "2 groups defined"),
                          ("ndjson", "imported 0 entries, 6 already present, 0 refused;")):
            file = tmp_path / f"live.{fmt}"
            file.write_bytes(source.get("/v1/banlist/export", params={"format": fmt}).content)
            assert cli_banlist.run(argparse.Namespace(**cli, file=file)) == 0
            assert said in capsys.readouterr().out
        with httpx.Client(base_url=base) as live:
            assert bans(live) == bans(source)
        # a file whose group the service holds with other members: refused in the dry run
        httpx.put(f"{base}/v1/banlist/groups/gamma", headers={"Authorization": "Bearer t"},
                  json={"domains": ["gamma.org"], "reason": "r"}).raise_for_status()
        file = tmp_path / "gamma.ndjson"
        file.write_text('{"scope": "group", "value": "gamma", "domains": ["gamma.net"]}\n'
                        '{"scope": "org", "value": "gamma", "reason": "r"}\n')
        assert cli_banlist.run(argparse.Namespace(**cli, file=file)) == 1
        assert "HTTP 409: group: group 'gamma' exists with other members" in (
            capsys.readouterr().err)
    finally:
        proc.terminate()
        proc.wait(10)
