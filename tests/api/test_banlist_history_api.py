"""History and lookup over HTTP, for T&S: filters that filter, or a 422 naming the
parameter."""
from __future__ import annotations

import time

import pytest

from app.banlist.model import iso
from tests.conftest import AUTH


def ban(client, scope: str, value: str, reason: str, headers=AUTH, **extra) -> str:
    r = client.post("/v1/banlist/entries", headers=headers,
                    json={"scope": scope, "value": value, "reason": reason, **extra})
    assert r.status_code == 201, r.text
    return r.json()["entry"]["id"]


def lift(client, entry_id: str, reason: str) -> None:
    r = client.request("DELETE", f"/v1/banlist/entries/{entry_id}", headers=AUTH,
                       json={"reason": reason})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(("route", "params"), [
    ("/v1/banlist/changes", {"since": 0, "actorr": "tns"}),
    ("/v1/banlist/changes", {"host_name": "a.example"}),
    ("/v1/banlist/lookup", {"url": "http://a.example/", "regoin": "RU"}),
])
def test_an_unknown_query_parameter_is_a_422_naming_it(client, route, params):
    r = client.get(route, params=params)
    unknown = next(k for k in params if k not in ("since", "url"))
    assert r.status_code == 422 and r.json()["field"] == f"query.{unknown}"
    assert r.json()["problem"].startswith("unknown query parameter (this route takes: ")


def test_history_filters_over_http(client):
    first = ban(client, "domain", "example.com", "court order")
    ban(client, "host", "other.org", "spam")
    ban(client, "url", "https://www.example.com/x", "dmca")
    lift(client, first, "appeal granted")

    def seqs(**params) -> list[int]:
        r = client.get("/v1/banlist/changes", params=params)
        assert r.status_code == 200, r.text
        return [c["seq"] for c in r.json()["changes"]]

    assert seqs(host="www.example.com") == [1, 3, 4]
    assert seqs(value="other.org") == [2] and seqs(actor="tns") == [1, 2, 3, 4]
    assert seqs(actor="nobody") == []
    now = time.time()
    assert seqs(**{"from": iso(now - 3600), "until": iso(now + 3600)}) == [1, 2, 3, 4]
    assert seqs(**{"from": iso(now + 3600)}) == []
    assert seqs(host="example.com", since=1, limit=1) == [3]
    r = client.get("/v1/banlist/changes", params={"from": "last tuesday"})
    assert r.status_code == 422 and r.json()["field"] == "query.from"
