"""The banlist admin API: auth, actor from the token, add, look up, list, remove, history."""
from __future__ import annotations

from tests.conftest import AUTH


def test_writes_need_a_known_bearer_token(client):
    body = {"scope": "host", "value": "a.com", "reason": "malware"}
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic tns-token"}):
        r = client.post("/v1/banlist/entries", json=body, headers=headers)
        assert r.status_code == 401 and r.json()["field"] == "Authorization"
    assert client.get("/v1/banlist/entries").json()["total"] == 0


def test_actor_comes_from_the_token_not_the_body(client):
    r = client.post("/v1/banlist/entries", headers={"Authorization": "Bearer spam-token"},
                    json={"scope": "domain", "value": "Bad.COM", "reason": "link farm"})
    assert r.status_code == 201
    entry = r.json()["entry"]
    assert entry["actor"] == "antispam" and entry["value"] == "bad.com"
    assert r.json()["banlist_version"] == 1
    r = client.post("/v1/banlist/entries", headers=AUTH,
                    json={"scope": "host", "value": "x.com", "reason": "r", "actor": "ceo"})
    assert r.status_code == 422 and r.json()["field"] == "body.actor"


def test_bad_entries_name_the_field(client):
    cases = [({"scope": "site", "value": "a.com", "reason": "r"}, "body.scope"),
             ({"scope": "domain", "value": "co.uk", "reason": "r"}, "value"),
             ({"scope": "host", "value": "a.com/x", "reason": "r"}, "value"),
             ({"scope": "host", "value": "a.com"}, "body.reason"),
             ({"scope": "host", "value": "a.com", "reason": "r", "ttl_seconds": 0},
              "body.ttl_seconds"),
             ({"scope": "host", "value": "a.com", "reason": "r", "ttl_seconds": 5,
               "expires_at": "2030-01-01T00:00:00Z"}, "ttl_seconds"),
             ({"scope": "host", "value": "a.com", "reason": "r",
               "expires_at": "2001-01-01T00:00:00Z"}, "expires_at")]
    for body, field in cases:
        r = client.post("/v1/banlist/entries", json=body, headers=AUTH)
        assert r.status_code == 422 and r.json()["field"] == field, (body, r.text)


def test_a_domain_ban_holds_for_urls_that_hide_the_host_a_browser_goes_to(client):
    """Browsers go to evil.example for both URLs; unescaping before splitting saw good.example."""
    client.post("/v1/banlist/entries", headers=AUTH,
                json={"scope": "domain", "value": "evil.example", "reason": "malware"})
    urls = ["http://good.example%2F@evil.example/", "http://evil.example\\@good.example/"]
    for url in urls:
        assert client.get("/v1/banlist/lookup", params={"url": url}).json()["banned"] is True
    page = {"documents": [{"id": f"d{i}", "url": url, "score": 1.0}
                          for i, url in enumerate(urls)]}
    r = client.post("/v1/rerank", json=page).json()
    assert r["documents"] == [] and {x["id"] for x in r["removed"]} == {"d0", "d1"}


def test_lookup_explains_why_a_site_disappeared(client):
    client.post("/v1/banlist/entries", headers=AUTH,
                json={"scope": "domain", "value": "shop.com", "reason": "legal removal",
                      "regions": ["de"]})
    r = client.get("/v1/banlist/lookup", params={"url": "https://WWW.shop.com/x#y",
                                                 "region": "de"}).json()
    assert r["canonical"] == "https://www.shop.com/x" and r["banned"] is True
    assert r["matches"][0]["matched_by"] == "domain shop.com (a parent of www.shop.com)"
    assert r["matches"][0]["regions"] == ["DE"]
    other = client.get("/v1/banlist/lookup", params={"url": "https://www.shop.com/x",
                                                     "region": "FR"}).json()
    assert other["banned"] is False and other["matches"][0]["applies"] is False
    bad = client.get("/v1/banlist/lookup", params={"url": "http://"})
    assert bad.status_code == 422 and bad.json()["field"] == "url"
    for region in (" de", "DEU", "de-DE", "ＤＥ"):  # as /v1/rerank: never "does not apply"
        bad = client.get("/v1/banlist/lookup", params={"url": "http://shop.com/",
                                                       "region": region})
        assert bad.status_code == 422 and bad.json()["field"] == "query.region", region


def test_list_pages_and_remove_is_an_audited_change(client):
    ids = [client.post("/v1/banlist/entries", headers=AUTH,
                       json={"scope": "host", "value": f"h{i}.com", "reason": "r"}
                       ).json()["entry"]["id"] for i in range(5)]
    first = client.get("/v1/banlist/entries", params={"limit": 2}).json()
    assert [e["id"] for e in first["entries"]] == ids[:2] and first["next"] == ids[1]
    second = client.get("/v1/banlist/entries", params={"limit": 10, "after": first["next"]})
    assert [e["id"] for e in second.json()["entries"]] == ids[2:]
    r = client.request("DELETE", f"/v1/banlist/entries/{ids[0]}", headers=AUTH,
                       json={"reason": "appeal granted"})
    assert r.status_code == 200 and r.json()["banlist_version"] == 6
    assert client.request("DELETE", f"/v1/banlist/entries/{ids[0]}", headers=AUTH,
                          json={"reason": "again"}).status_code == 404
    assert client.request("DELETE", f"/v1/banlist/entries/{ids[1]}",
                          json={"reason": "no token"}).status_code == 401
    history = client.get("/v1/banlist/changes", params={"since": 5}).json()["changes"]
    assert history == [{"seq": 6, "op": "remove", "id": ids[0], "entry": r.json()["removed"],
                        "actor": "tns", "reason": "appeal granted", "at": history[0]["at"]}]


def test_ban_takes_effect_on_the_next_request(client):
    page = {"documents": [{"id": "a", "url": "http://x.com/1", "score": 2},
                          {"id": "b", "url": "http://y.com/1", "score": 1}]}
    assert len(client.post("/v1/rerank", json=page).json()["documents"]) == 2
    client.post("/v1/banlist/entries", headers=AUTH,
                json={"scope": "host", "value": "x.com", "reason": "malware"})
    out = client.post("/v1/rerank", json=page).json()
    assert [d["id"] for d in out["documents"]] == ["b"] and out["banlist_version"] == 1
