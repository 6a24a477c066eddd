"""Issue 44: a ban edited in place (`PATCH /v1/banlist/entries/{id}`): extended, made
permanent, its regions changed, the id kept and the change in the history; the refusals
name their field.

Every behaviour is checked on both stores: embedded, and Redis (a real redis-server), where
the edit goes through one replica and a second one must see exactly what it wrote.
"""
from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from app.banlist.model import iso, parse_iso
from app.main import create_app
from tests.conftest import AUTH, app_on

DAY = 86400


def until(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.02)


def add(c, **body):
    r = c.post("/v1/banlist/entries", headers=AUTH,
               json={"scope": "host", "value": "x.example", "reason": "doorways", **body})
    assert r.status_code == 201, r.text
    return r.json()["entry"]


def edit(c, entry_id, **body):
    return c.patch(f"/v1/banlist/entries/{entry_id}", headers=AUTH, json=body)


def version(c):
    return c.get("/v1/banlist/entries").json()["banlist_version"]


def matches(c, url="http://x.example/", region=None):
    params = {"url": url, **({"region": region} if region else {})}
    return c.get("/v1/banlist/lookup", params=params).json()["matches"]


def changes(c, since=0):
    return c.get("/v1/banlist/changes", params={"since": since}).json()["changes"]


def test_extending_a_ban_keeps_its_id_and_every_replica_sees_the_new_expiry(api):
    a, b = api
    entry = add(a, ttl_seconds=3600)
    r = edit(a, entry["id"], reason="still spamming", ttl_seconds=7 * DAY)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["changed"] is True and got["banlist_version"] == 2
    assert got["entry"] == {**entry, "expires_at": got["entry"]["expires_at"]}  # all else kept
    assert abs(parse_iso(got["entry"]["expires_at"]) - (time.time() + 7 * DAY)) < 60
    until(lambda: [m["expires_at"] for m in matches(b)] == [got["entry"]["expires_at"]])
    assert b.get("/v1/banlist/entries").json()["total"] == 1
    again = b.post("/v1/banlist/entries", headers=AUTH,
                   json={"scope": "host", "value": "x.example", "reason": "r"})
    assert again.status_code == 200 and again.json()["entry"] == got["entry"]  # the same ban
    until_at = iso(time.time() + 30 * DAY)
    r = edit(b, entry["id"], reason="court order", expires_at=until_at)
    assert r.status_code == 200 and r.json()["entry"]["expires_at"] == until_at
    until(lambda: [m["expires_at"] for m in matches(a)] == [until_at])


def test_making_a_ban_permanent_is_recorded_with_who_what_and_why(api):
    a, b = api
    entry = add(a, ttl_seconds=3600)
    r = a.patch(f"/v1/banlist/entries/{entry['id']}", json={"reason": "court order",
                                                           "expires_at": None},
                headers={"Authorization": "Bearer spam-token"})
    assert r.status_code == 200 and r.json()["entry"]["expires_at"] is None
    assert r.json()["entry"]["actor"] == "tns"  # who banned it; the edit is antispam's
    until(lambda: len(changes(b)) == 2)
    edited = changes(b)[1]
    assert edited == {"seq": 2, "op": "edit", "id": entry["id"], "entry": r.json()["entry"],
                      "before": {"expires_at": entry["expires_at"]},
                      "after": {"expires_at": None}, "actor": "antispam",
                      "reason": "court order", "at": edited["at"]}
    assert parse_iso(edited["at"]) >= parse_iso(entry["created_at"])
    # the entry's history: by its value, by its host, by the actor who edited it
    for params in ({"value": "x.example"}, {"host": "x.example"}, {"actor": "antispam"}):
        found = b.get("/v1/banlist/changes", params=params).json()["changes"]
        assert edited in found, params
    lookup = b.get("/v1/banlist/lookup", params={"url": "http://x.example/"}).json()
    assert lookup["banned"] and lookup["matches"][0]["expires_at"] is None


def test_a_regions_edit_moves_the_ban_and_empty_regions_mean_everywhere(api):
    a, b = api
    entry = add(a, scope="domain", value="spam.example", regions=["RU"])
    url = "http://www.spam.example/"
    r = edit(a, entry["id"], reason="also in Belarus", regions=["ru, by"])
    assert r.status_code == 200 and r.json()["entry"]["regions"] == ["BY", "RU"]
    until(lambda: matches(b, url, "BY")[0]["applies"])
    assert not matches(b, url, "DE")[0]["applies"]
    r = edit(b, entry["id"], reason="everywhere now", regions=[])
    assert r.status_code == 200 and r.json()["entry"]["regions"] == []
    until(lambda: matches(a, url, "DE")[0]["applies"])
    page = {"query": {"region": "FR"},
            "documents": [{"id": "d", "url": url, "score": 1}]}
    assert a.post("/v1/rerank", json=page).json()["documents"] == []
    found = [(c["before"], c["after"]) for c in changes(a) if c["op"] == "edit"]
    assert found == [({"regions": ["RU"]}, {"regions": ["BY", "RU"]}),
                     ({"regions": ["BY", "RU"]}, {"regions": []})]
    both = edit(a, entry["id"], reason="temporary again", regions=["KZ"], ttl_seconds=DAY)
    assert both.status_code == 200
    last = changes(a)[-1]
    assert set(last["before"]) == set(last["after"]) == {"expires_at", "regions"}


def test_an_edit_that_changes_nothing_answers_changed_false_and_records_nothing(api):
    a, b = api
    entry = add(a, regions=["DE"], expires_at="2099-01-01T00:00:00Z")
    for body in ({"regions": ["de"]}, {"expires_at": "2099-01-01T01:00:00+01:00"},
                 {"regions": ["DE"], "expires_at": "2099-01-01T00:00:00.000Z"}):
        r = edit(b, entry["id"], reason="same again", **body)
        assert r.status_code == 200, r.text
        assert r.json() == {"entry": entry, "changed": False, "banlist_version": 1}
    assert [c["op"] for c in changes(a)] == ["add"] and version(a) == 1


def test_refusals_name_the_field_and_change_nothing(api):
    a, b = api
    entry = add(a, regions=["RU"], ttl_seconds=3600)
    other = add(a, regions=["KZ"])
    gone = add(a, value="gone.example")
    assert a.request("DELETE", f"/v1/banlist/entries/{gone['id']}", headers=AUTH,
                     json={"reason": "appeal"}).status_code == 200
    until(lambda: version(b) == 4)
    cases = [
        ({"ttl_seconds": DAY}, 422, "body.reason"),
        ({"reason": " \t", "ttl_seconds": DAY}, 422, "reason"),
        ({"reason": "r", "ttl_seconds": DAY, "expires_at": "2099-01-01T00:00:00Z"}, 422,
         "ttl_seconds"),
        ({"reason": "r", "ttl_seconds": DAY, "expires_at": None}, 422, "ttl_seconds"),
        ({"reason": "r", "expires_at": "2001-01-01T00:00:00Z"}, 422, "expires_at"),
        ({"reason": "r", "expires_at": "2099-01-01T00:00:00"}, 422, "body.expires_at"),
        ({"reason": "r", "ttl_seconds": 0}, 422, "body.ttl_seconds"),
        ({"reason": "r", "regions": ["RUS"]}, 422, "regions[0]"),
        ({"reason": "r", "regions": ["RU", "B1"]}, 422, "regions[1]"),
        ({"reason": "r", "regions": [""]}, 422, "body.regions.0"),
        ({"reason": "r", "scope": "domain"}, 422, "body.scope"),
        # the same ban as `other`: one ban, one entry
        ({"reason": "r", "regions": ["kz"]}, 409, "regions"),
    ]
    for body, status, field in cases:
        for c in (a, b):
            r = edit(c, entry["id"], **body)
            assert (r.status_code, r.json()["field"]) == (status, field), (body, r.text)
    r = edit(b, entry["id"], reason="r", regions=["KZ"])
    assert r.json()["identical_to"] == other["id"] and "already bans" in r.json()["problem"]
    for missing in ("999", gone["id"], "x"):
        r = edit(b, missing, reason="r", ttl_seconds=DAY)
        assert (r.status_code, r.json()["field"]) == (404, "id"), r.text
    r = b.patch(f"/v1/banlist/entries/{entry['id']}", json={"reason": "r", "ttl_seconds": 5})
    assert r.status_code == 401
    r = b.patch(f"/v1/banlist/entries/{entry['id']}", json={"reason": "r", "ttl_seconds": 5},
                headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401
    assert version(a) == version(b) == 4 and [c["op"] for c in changes(a)][-1] == "remove"
    assert matches(a)[0]["expires_at"] == entry["expires_at"]


@pytest.mark.python_path("sends no /v1/rerank: edits and lookups")
def test_an_entry_that_expired_but_is_not_swept_yet_cannot_be_edited(settings):
    with TestClient(create_app(settings)) as c:
        entry = add(c, ttl_seconds=1)
        time.sleep(1.05)
        r = edit(c, entry["id"], reason="too late", expires_at=None)
        assert r.status_code == 404 and "expired at" in r.json()["problem"]
        assert version(c) == 1


def test_an_edit_survives_a_restart_of_the_embedded_store(settings):
    with TestClient(create_app(settings)) as c:
        entry = add(c, ttl_seconds=3600, regions=["RU"])
        assert edit(c, entry["id"], reason="court order", expires_at=None).status_code == 200
        edited = edit(c, entry["id"], reason="and Belarus", regions=["RU", "BY"]).json()
        before = changes(c)
    log = [line for line in settings.banlist_path.read_text().splitlines() if '"edit"' in line]
    assert len(log) == 2
    with TestClient(create_app(settings)) as c:  # the change log replayed
        assert c.get("/v1/banlist/entries").json()["entries"] == [edited["entry"]]
        assert changes(c) == before and version(c) == 3
        assert matches(c, region="BY")[0]["applies"]
        # and an edit after the restart goes on from there
        r = edit(c, entry["id"], reason="lift Russia", regions=["BY"])
        assert r.status_code == 200 and r.json()["banlist_version"] == 4
        gone = c.request("DELETE", f"/v1/banlist/entries/{entry['id']}", headers=AUTH,
                         json={"reason": "appeal"})
        assert gone.json()["removed"] == r.json()["entry"]
    with TestClient(create_app(settings)) as c:
        former = c.get("/v1/banlist/lookup", params={"url": "http://x.example/"}).json()
        assert former["matches"] == [] and former["former"][0]["regions"] == ["BY"]
        assert "by tns, reason doorways (removed by tns: appeal)" in former["former"][0]["was"]


@pytest.mark.redis
@pytest.mark.python_path("sends no /v1/rerank: edits and lookups")
def test_a_replica_started_after_an_edit_loads_the_edited_entry(redis_server, settings):
    with app_on(redis_server, settings, "a") as a:
        entry = add(a, ttl_seconds=3600)
        edited = edit(a, entry["id"], reason="court order", expires_at=None,
                      regions=["RU"]).json()
        with app_on(redis_server, settings, "late") as late:  # a full load, from Redis
            assert late.get("/v1/banlist/entries").json()["entries"] == [edited["entry"]]
            assert changes(late) == changes(a)
            assert late.get("/readyz").json()["banlist_version"] == 2
