"""POST /v1/banlist/remove and the filters of GET /v1/banlist/entries, on the embedded store
and on Redis (a second replica must see the batch)."""
from __future__ import annotations

import pytest

from tests.conftest import AUTH
from tests.helpers import until

SPAM = {"Authorization": "Bearer spam-token"}  # actor antispam


def ban(client, scope: str, value: str, reason: str, headers=AUTH, **more) -> str:
    r = client.post("/v1/banlist/entries", headers=headers,
                    json={"scope": scope, "value": value, "reason": reason, **more})
    assert r.status_code == 201, r.text
    return r.json()["entry"]["id"]


@pytest.fixture
def campaign(api):
    """Ten hosts of campaign 7 by tns, one by antispam, and three other bans."""
    a, b = api
    ids = {"camp": [ban(a, "host", f"h{i}.camp.example", "Campaign 7 doorways")
                    for i in range(10)],
           "spam": ban(a, "host", "s.camp.example", "campaign 7", SPAM),
           "domain": ban(a, "domain", "camp.example", "court order"),
           "url": ban(a, "url", "https://shop.example/Promo?x=1", "phishing",
                      ttl_seconds=3600),
           "prefix": ban(a, "prefix", "shop.example/deals/", "phishing")}
    return a, b, ids


def listed(client, **query) -> tuple[list[str], int]:
    got = client.get("/v1/banlist/entries", params={"limit": 1000, **query})
    assert got.status_code == 200, got.text
    return [e["id"] for e in got.json()["entries"]], got.json()["total"]


def test_each_filter_field_takes_what_it_says(campaign):
    a, _, ids = campaign
    camp, spam = ids["camp"], ids["spam"]
    cases = [({"actor": "antispam"}, [spam]),
             ({"reason_contains": "CAMPAIGN 7"}, [*camp, spam]),
             ({"scope": "domain"}, [ids["domain"]]),
             ({"value_suffix": ".Camp.Example"}, [*camp, spam]),
             ({"value_suffix": "/Promo?x=1"}, [ids["url"]]),
             ({"expires_before": "2100-01-01"}, [ids["url"]]),
             ({"created_after": "2000-01-01", "actor": "tns", "scope": "prefix"},
              [ids["prefix"]]),
             ({"created_before": "2000-01-01T00:00:00Z"}, [])]
    for query, want in cases:
        assert listed(a, **query) == (want, len(want)), query
    assert listed(a)[1] == 14  # no filter: every active entry
    page = a.get("/v1/banlist/entries", params={"reason_contains": "campaign", "limit": 4})
    assert [e["id"] for e in page.json()["entries"]] == camp[:4]
    assert page.json()["next"] == camp[3] and page.json()["total"] == 11
    rest = a.get("/v1/banlist/entries", params={"reason_contains": "campaign", "limit": 100,
                                                "after": camp[3]}).json()
    assert [e["id"] for e in rest["entries"]] == [*camp[4:], spam] and rest["next"] is None


@pytest.mark.parametrize(("query", "field"), [
    ({"scope": "site"}, "query.scope"), ({"created_after": "last week"}, "query.created_after"),
    ({"expires_before": "2026-01-01T00:00:00"}, "query.expires_before"),
    ({"actr": "tns"}, "query.actr"),  # a misspelt filter would list everything
])
def test_a_bad_filter_of_the_list_names_the_parameter(client, query, field):
    r = client.get("/v1/banlist/entries", params=query)
    assert r.status_code == 422 and r.json()["field"] == field, r.text


def test_a_dry_run_counts_and_shows_and_changes_nothing(campaign):
    a, _, ids = campaign
    version = a.get("/v1/banlist/entries").json()["banlist_version"]
    r = a.post("/v1/banlist/remove", headers=AUTH, json={
        "filter": {"value_suffix": ".camp.example"}, "reason": "undo", "dry_run": True})
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["matched"] == 11 and got["dry_run"] is True
    assert [e["id"] for e in got["sample"]] == [*ids["camp"], ids["spam"]]
    assert got["filter"] == {"value_suffix": ".camp.example"}
    assert got["banlist_version"] == version and listed(a)[1] == 14


def test_an_empty_filter_and_bad_bodies_are_refused_by_field(client):
    ban(client, "host", "a.example", "r")
    cases = [({"filter": {}, "reason": "oops"}, "filter"),
             ({"filter": {"actor": None}, "reason": "oops"}, "filter"),
             ({"reason": "oops"}, "body.filter"),
             ({"filter": {"actor": "tns"}}, "body.reason"),
             ({"filter": {"actor": "tns"}, "reason": "r", "dry_run": "yes"}, "body.dry_run"),
             ({"filter": {"actr": "tns"}, "reason": "r"}, "body.filter.actr"),
             ({"filter": {"created_before": "tomorrow"}, "reason": "r"},
              "filter.created_before")]
    for body, field in cases:
        r = client.post("/v1/banlist/remove", headers=AUTH, json=body)
        assert r.status_code == 422 and r.json()["field"] == field, (body, r.text)
    assert listed(client)[1] == 1
    r = client.post("/v1/banlist/remove", json={"filter": {"actor": "tns"}, "reason": "r"})
    assert r.status_code == 401


def test_a_removal_lifts_every_match_as_one_batch_seen_by_the_other_replica(campaign):
    a, b, ids = campaign
    version = a.get("/v1/banlist/entries").json()["banlist_version"]
    r = a.post("/v1/banlist/remove", headers=SPAM, json={
        "filter": {"actor": "tns", "reason_contains": "campaign 7"},
        "reason": "undo campaign 7"})
    assert r.status_code == 200, r.text
    assert r.json() == {"removed": 10, "banlist_version": version + 10,
                        "filter": {"actor": "tns", "reason_contains": "campaign 7"}}
    seen = set()

    def b_has_it() -> bool:  # on Redis, b applies the batch within its block
        got = b.get("/v1/banlist/entries", params={"limit": 1000}).json()
        seen.add((got["banlist_version"], got["total"]))
        return got["banlist_version"] == version + 10

    until(b_has_it)
    assert seen <= {(version, 14), (version + 10, 4)}  # the list before, or after: never half
    for client in (a, b):
        assert sorted(listed(client)[0]) == sorted(
            [ids["spam"], ids["domain"], ids["url"], ids["prefix"]])
    hits = b.get("/v1/banlist/lookup", params={"url": "https://h0.camp.example/"}).json()
    assert hits["former"][0]["ended"]["actor"] == "antispam"
    changes = a.get("/v1/banlist/changes", params={"since": version, "limit": 100}).json()
    assert [(c["op"], c["actor"], c["reason"]) for c in changes["changes"]] == [
        ("remove", "antispam", "undo campaign 7")] * 10
    again = a.post("/v1/banlist/remove", headers=AUTH, json={
        "filter": {"actor": "tns", "reason_contains": "campaign 7"}, "reason": "again"})
    assert again.json()["removed"] == 0 and again.json()["banlist_version"] == version + 10
