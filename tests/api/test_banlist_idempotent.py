"""Issue 15, first stage: idempotent adds and imports, one region per item, no 5xx.

Every behaviour is checked on both stores: embedded, and Redis (a real redis-server),
where a second replica must see exactly what the first wrote.
"""
from __future__ import annotations

import http.client
import json
import sys
import time

import pytest
from fastapi.testclient import TestClient

from app.banlist.base import EntrySpec
from app.errors import BanlistError
from app.main import create_app
from tests.conftest import AUTH, app_on

DUP = {"scope": "host", "value": "dup.example", "reason": "malware"}


def until(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.02)


def _changes(c):
    return c.get("/v1/banlist/changes", params={"since": 0, "limit": 1000}).json()["changes"]


def test_an_identical_add_returns_the_active_entry_and_creates_nothing(api):
    a, b = api
    first = a.post("/v1/banlist/entries", headers=AUTH, json=DUP)
    assert first.status_code == 201 and "existing" not in first.json()
    # same ban written differently: case, trailing dot, region order and case
    for body in (DUP, {**DUP, "value": "DUP.example.", "reason": "another reason"}):
        again = b.post("/v1/banlist/entries", headers=AUTH, json=body)
        assert again.status_code == 200, again.text
        assert again.json()["existing"] is True
        assert again.json()["entry"] == first.json()["entry"]
        assert again.json()["banlist_version"] == first.json()["banlist_version"]
    regional = a.post("/v1/banlist/entries", headers=AUTH, json={**DUP, "regions": ["RU", "kz"]})
    assert regional.status_code == 201  # other regions: another ban
    same = b.post("/v1/banlist/entries", headers=AUTH, json={**DUP, "regions": ["KZ", "ru"]})
    assert same.status_code == 200 and same.json()["entry"]["id"] == regional.json()["entry"]["id"]
    for c in (a, b):
        until(lambda c=c: c.get("/v1/banlist/entries").json()["total"] == 2)
        assert [ch["op"] for ch in _changes(c)] == ["add", "add"]
    # an appeal now unbans: one removal, and the lookup agrees
    gone = a.request("DELETE", f"/v1/banlist/entries/{first.json()['entry']['id']}", headers=AUTH,
                    json={"reason": "appeal"})
    assert gone.status_code == 200 and gone.json()["still_banned_by"] == [
        regional.json()["entry"]]  # the regional ban remains, and the answer says so
    until(lambda: not b.get("/v1/banlist/lookup",
                            params={"url": "http://dup.example/", "region": "DE"}
                            ).json()["banned"])


def test_an_expired_entry_is_not_an_identical_one(settings):
    from app.banlist.embedded.store import EmbeddedStore

    now = [1000.0]
    store = EmbeddedStore(None, clock=lambda: now[0])
    old = store.add(EntrySpec("host", "t.example", "r", expires_at=1010.0), "tns")
    assert store.add(EntrySpec("host", "t.example", "r"), "tns").id == old.id
    now[0] = 1011.0
    assert store.add(EntrySpec("host", "t.example", "r"), "tns").id != old.id


CSV = (b"scope,value,reason,regions\n"
       b"host,a.example,spam,\n"
       b"domain,b.example,fraud,\"RU,KZ\"\n"
       b"url,https://c.example/x,legal,DE\n")


def test_importing_the_same_file_twice_changes_nothing_the_second_time(api):
    a, b = api
    first = a.post("/v1/banlist/import", params={"format": "csv"}, headers=AUTH, content=CSV)
    assert first.status_code == 200, first.text
    assert (first.json()["imported"], first.json()["existing"]) == (3, 0)
    version = first.json()["banlist_version"]
    second = b.post("/v1/banlist/import", params={"format": "csv"}, headers=AUTH, content=CSV)
    assert second.status_code == 200, second.text
    assert (second.json()["imported"], second.json()["existing"]) == (0, 3)
    assert second.json()["banlist_version"] == version and second.json()["first_id"] is None
    # one more line among known ones: only it is new
    more = CSV + b"host,d.example,spam,\n"
    third = a.post("/v1/banlist/import", params={"format": "csv"}, headers=AUTH, content=more)
    assert (third.json()["imported"], third.json()["existing"]) == (1, 3)
    for c in (a, b):
        until(lambda c=c: c.get("/v1/banlist/entries").json()["total"] == 4)
        assert len(_changes(c)) == 4
    entries = a.get("/v1/banlist/entries").json()["entries"]
    assert {e["value"]: e["regions"] for e in entries}["b.example"] == ["KZ", "RU"]


def test_duplicates_from_an_old_log_keep_working_and_a_removal_says_one_remains(settings):
    # what main wrote before adds were idempotent: the same ban twice in the log
    from app.banlist.embedded.store import EmbeddedStore

    old = EmbeddedStore(settings.banlist_path)
    entries = [EntrySpec("host", "dup.example", "r"), EntrySpec("host", "dup.example", "r2")]
    prepared = [__import__("app.banlist.base", fromlist=["prepare"]).prepare(s, time.time(), {})
                for s in entries]
    made = [p.entry(str(n), "tns", time.time()) for n, p in enumerate(prepared, 1)]
    batch = [{"seq": int(e.id), "op": "add", "entry": e.as_dict(), "actor": "tns",
              "reason": e.reason, "at": "2024-01-01T00:00:00.000Z"} for e in made]
    with old._publishing(old._write(iter([batch]), 2)):
        old.index.add_many(made)
    old.close()
    del old
    with TestClient(create_app(settings)) as c:
        assert c.get("/v1/banlist/entries").json()["total"] == 2
        again = c.post("/v1/banlist/entries", headers=AUTH,
                       json={"scope": "host", "value": "dup.example", "reason": "r"})
        assert again.status_code == 200 and again.json()["entry"]["id"] == "1"
        gone = c.request("DELETE", "/v1/banlist/entries/1", headers=AUTH, json={"reason": "appeal"})
        assert gone.status_code == 200
        assert [e["id"] for e in gone.json()["still_banned_by"]] == ["2"]
        assert c.get("/v1/banlist/lookup", params={"url": "http://dup.example/"}
                     ).json()["banned"] is True
        last = c.request("DELETE", "/v1/banlist/entries/2", headers=AUTH, json={"reason": "appeal"})
        assert last.json()["still_banned_by"] == []
        assert c.get("/v1/banlist/lookup", params={"url": "http://dup.example/"}
                     ).json()["banned"] is False


def test_redis_duplicates_from_before_keep_working(redis_server, settings):
    with app_on(redis_server, settings, "a") as a:
        store = a.app.state.services.store
        payload = {"scope": "host", "value": "dup.example", "reason": "r", "actor": "tns",
                   "created_at": "2024-01-01T00:00:00.000Z", "expires_at": None, "regions": []}
        add = ["add", "", json.dumps(payload), "tns", "r", ""]
        store._run(add + add)  # the write main made for the same ban sent twice
        assert a.get("/v1/banlist/entries").json()["total"] == 2
        gone = a.request("DELETE", "/v1/banlist/entries/1", headers=AUTH, json={"reason": "appeal"})
        assert [e["id"] for e in gone.json()["still_banned_by"]] == ["2"]
        with app_on(redis_server, settings, "b") as b:
            assert b.get("/v1/banlist/lookup", params={"url": "http://dup.example/"}
                         ).json()["banned"] is True


@pytest.mark.parametrize("regions, want", [(["RU,KZ"], ["KZ", "RU"]), (["ru; kz"], ["KZ", "RU"]),
                                           (["RU", "RU KZ"], ["KZ", "RU"])])
def test_a_region_item_holding_several_codes_is_split(api, regions, want):
    a, _ = api
    r = a.post("/v1/banlist/entries", headers=AUTH, json={**DUP, "regions": regions})
    assert r.status_code == 201 and r.json()["entry"]["regions"] == want
    assert a.get("/v1/banlist/lookup", params={"url": "http://dup.example/", "region": "KZ"}
                 ).json()["banned"] is True


def test_regions_that_are_not_alpha_2_codes_are_refused_by_add_and_import(api):
    a, _ = api
    for bad in (["RUS"], ["R1"], [","], ["RU,KZX"], ["ß"], ["ＲＵ"]):  # ß is SS upper-cased
        r = a.post("/v1/banlist/entries", headers=AUTH, json={**DUP, "regions": bad})
        assert r.status_code == 422 and r.json()["field"].startswith("regions"), r.text
    body = b"scope,value,reason,regions\nhost,a.example,spam,\"RU,KZX\"\n"
    r = a.post("/v1/banlist/import", params={"format": "csv"}, headers=AUTH, content=body)
    assert r.status_code == 422
    assert r.json()["refused"] == [{"line": 2, "field": "regions[0]", "problem":
                                    "'KZX' is not an ISO 3166-1 alpha-2 code (two letters, "
                                    "such as RU or KZ)"}]


def test_regions_no_country_holds_are_refused_and_gb_is_the_united_kingdom(api):
    a, _ = api
    for bad in (["UK"], ["XX"], ["EU"], ["RU,ZZ"]):  # the shape of a code, assigned to none
        r = a.post("/v1/banlist/entries", headers=AUTH, json={**DUP, "regions": bad})
        assert r.status_code == 422 and r.json()["field"] == "regions[0]", r.text
        assert "not an assigned ISO 3166-1 alpha-2 code" in r.json()["problem"]
    r = a.post("/v1/banlist/entries", headers=AUTH, json={**DUP, "regions": ["gb"]})
    assert r.status_code == 201 and r.json()["entry"]["regions"] == ["GB"]


@pytest.mark.parametrize("ttl", ["60", 60.0, True])
def test_ttl_seconds_is_a_json_integer_not_a_string_or_a_float(api, ttl):
    a, _ = api
    r = a.post("/v1/banlist/entries", headers=AUTH, json={**DUP, "ttl_seconds": ttl})
    assert r.status_code == 422 and r.json()["field"] == "body.ttl_seconds", r.text
    assert a.get("/v1/banlist/entries").json()["entries"] == []


def test_every_limit_of_the_single_add_holds_for_import_lines(api):
    a, _ = api
    lines = [
        ({"scope": "host", "value": "a.example", "reason": "x" * 1001}, "reason"),
        ({"scope": "url", "value": "http://a.example/" + "p" * 8200, "reason": "r"}, "value"),
        ({"scope": "host", "value": "a.example", "reason": "r", "regions": ["X" * 17]},
         "regions[0]"),
        ({"scope": "host", "value": "a.example", "reason": "r", "ttl_seconds": 10**12},
         "ttl_seconds"),
        ({"scope": "host", "value": "a.example", "reason": "r",
          "expires_at": "2999-01-01T00:00:00"}, "expires_at"),  # no offset: refused by add
    ]
    for item, field in lines:
        single = a.post("/v1/banlist/entries", headers=AUTH, json=item)
        assert single.status_code == 422, (item, single.text)
        body = b"# a comment\n" + json.dumps(item).encode() + b"\n"
        r = a.post("/v1/banlist/import", headers=AUTH, content=body)
        assert r.status_code == 422, (field, r.text)
        assert [(x["line"], x["field"]) for x in r.json()["refused"]] == [(2, field)], r.text


def test_changes_since_a_huge_seq_is_an_empty_answer_not_a_500(api):
    a, _ = api
    a.post("/v1/banlist/entries", headers=AUTH, json=DUP)
    for since in (str(2**63 - 1), str(2**64), str(sys.maxsize - 5), "1" + "0" * 40):
        r = a.get("/v1/banlist/changes", params={"since": since})
        assert r.status_code == 200 and r.json()["changes"] == [], (since, r.text)
    r = a.get("/v1/banlist/changes", params={"since": "9" * 5000})
    assert 400 <= r.status_code < 500 and "since" in r.text
    for after in (str(2**64), "9" * 40):
        r = a.get("/v1/banlist/entries", params={"after": after})
        assert r.status_code in (200, 422) and (r.status_code == 200 or "after" in r.text)


def test_a_csv_field_past_the_csv_limit_is_a_4xx_naming_the_line(api):
    a, _ = api
    body = (b"scope,value,reason\nhost,a.example,spam\nhost,b.example,"
            + b"x" * 140_000 + b"\n")
    r = a.post("/v1/banlist/import", params={"format": "csv"}, headers=AUTH, content=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "body" and "line 3" in r.json()["problem"]
    assert a.get("/v1/banlist/entries").json()["total"] == 0  # nothing imported
    unclosed = b'scope,value,reason\nhost,a.example,"spam\n'
    r = a.post("/v1/banlist/import", params={"format": "csv"}, headers=AUTH, content=unclosed)
    assert 400 <= r.status_code < 500, r.text


def test_live_huge_csv_field_keeps_the_connection_and_the_cli_says_what_it_did(
        tmp_path, capsys):
    """Over a real socket (`rearrange serve`): the refusal is a 4xx and the same connection
    serves the next request; the real CLI says when an add or an import found the ban."""
    import argparse
    from urllib.parse import urlparse

    from app.cli import banlist as cli_banlist
    from tests.api.test_live_server import start_server

    proc, base, _ = start_server(tmp_path)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", urlparse(base).port, timeout=10)
        body = b"scope,value,reason\nhost,b.example," + b"x" * 140_000 + b"\n"
        conn.request("POST", "/v1/banlist/import?format=csv", body=body,
                     headers={"Authorization": "Bearer t"})
        resp = conn.getresponse()
        assert resp.status == 422 and b"line 2" in resp.read()
        conn.request("GET", "/healthz")
        resp = conn.getresponse()
        assert resp.status == 200
        resp.read()
        conn.close()

        cli = {"service_url": base, "token": "t"}
        add = argparse.Namespace(**cli, banlist_command="add", scope="host",
                                 value="dup.example", reason="r", regions="", ttl=None,
                                 expires_at=None, urgent=False)
        assert cli_banlist.run(add) == 0 and cli_banlist.run(add) == 0
        assert "already banned by entry 1: nothing added" in capsys.readouterr().out
        csv_file = tmp_path / "bans.csv"
        csv_file.write_bytes(CSV)
        imp = argparse.Namespace(**cli, banlist_command="import", file=csv_file, format=None,
                                 mode="all", dry_run=False)
        assert cli_banlist.run(imp) == 0 and cli_banlist.run(imp) == 0
        assert "imported 0 entries, 3 already present" in capsys.readouterr().out
        huge = tmp_path / "huge.csv"
        huge.write_bytes(b"scope,value,reason\nhost,b.example," + b"x" * 140_000 + b"\n")
        assert cli_banlist.run(argparse.Namespace(**{**vars(imp), "file": huge})) == 1
        assert "line 2: not CSV" in capsys.readouterr().err
        rm = argparse.Namespace(**cli, banlist_command="remove", id="1", reason="appeal")
        assert cli_banlist.run(rm) == 0
        assert "STILL BANNED" not in capsys.readouterr().out
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_replica_whose_copy_lags_cannot_add_a_ban_another_just_added(redis_server, settings):
    # b decided on a copy without a's add (stream id 0-0): its script is refused, and put_many
    # decides again on the caught-up copy and finds a's entry
    with app_on(redis_server, settings, "a") as a, app_on(redis_server, settings, "b") as b:
        first = a.post("/v1/banlist/entries", headers=AUTH, json=DUP).json()["entry"]
        sb = b.app.state.services.store
        payload = {"scope": "host", "value": "dup.example", "reason": "r", "actor": "tns",
                   "created_at": "2024-01-01T00:00:00.000Z", "expires_at": None, "regions": []}
        with pytest.raises(BanlistError) as info:
            sb._run(["add", "", json.dumps(payload), "tns", "r", ""], decided_on="0-0")
        assert info.value.field == "conflict"
        other = {**payload, "value": "other.example"}  # another ban is not held up
        assert sb._run(["add", "", json.dumps(other), "tns", "r", ""], decided_on="0-0")
        assert sb.add(EntrySpec("host", "dup.example", "r"), "tns").id == first["id"]
