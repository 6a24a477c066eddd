"""A key given twice in any object of any request body is a 400 naming it (CONTRACT.md,
strictness of the JSON bodies), never "the last one wins": /v1/rerank (the engine's
decoder), every admin body (app/api/strict.py) and every line of a banlist import."""
from __future__ import annotations

import pytest

from tests.conftest import AUTH

DUPLICATE = {"error": "invalid_request", "problem": "duplicate key"}


def refused(r, field: str) -> None:
    assert r.status_code == 400, r.text
    assert r.json() == {**DUPLICATE, "field": field}


def post(client, path: str, raw: str, method: str = "POST", **kw):
    return client.request(method, path, content=raw.encode(),
                          headers={**AUTH, "content-type": "application/json"}, **kw)


def test_a_document_with_two_urls_is_refused_not_read_by_its_last(client):
    # Issue 45: the second url was kept, so a banned first url went through.
    client.post("/v1/banlist/entries", headers=AUTH,
                json={"scope": "domain", "value": "banned.example", "reason": "malware"})
    docs = ",".join(f'{{"id":"d{i}","url":"http://h{i}.example/","score":1}}' for i in range(3))
    raw = ('{"documents":[' + docs + ',{"id":"d3","url":"http://banned.example/","score":1,'
           '"url":"http://ok.example/"}]}')
    refused(post(client, "/v1/rerank", raw), "documents[3].url")
    assert post(client, "/v1/rerank", raw.replace('"url":"http://ok.example/"',
                                                  '"text":"t"')).status_code == 200


@pytest.mark.parametrize(("raw", "field"), [
    ('{"documents":[],"query":{"region":"DE","region":"RU"}}', "query.region"),
    ('{"documents":[],"unit":{"user_id":"a","user_id":"b"}}', "unit.user_id"),
    ('{"documents":[{"id":"a","url":"http://a/","score":1,"attributes":{"k":{"x":1,"x":2}}}]}',
     "documents[0].attributes.k.x"),
    ('{"profile":"default","documents":[],"profile":"commercial"}', "profile"),
])
def test_every_object_of_a_rerank_body_refuses_a_repeat(client, raw, field):
    refused(post(client, "/v1/rerank", raw), field)


def test_an_add_with_two_scopes_is_refused_and_bans_nothing(client):
    # Issue 45: the last scope won, so this made a domain ban.
    raw = ('{"scope":"url","value":"shop.example/item/1","reason":"counterfeit",'
           '"scope":"domain"}')
    refused(post(client, "/v1/banlist/entries", raw), "scope")
    assert client.get("/v1/banlist/entries").json()["total"] == 0


@pytest.mark.parametrize(("method", "path", "raw", "field"), [
    ("PATCH", "/v1/banlist/entries/1", '{"reason":"r","regions":["RU"],"regions":[]}',
     "regions"),
    ("DELETE", "/v1/banlist/entries/1", '{"reason":"appeal","reason":"other"}', "reason"),
    ("PUT", "/v1/banlist/groups/acme", '{"domains":["acme.com"],"reason":"r","domains":[]}',
     "domains"),
    ("POST", "/v1/sanctions/scores",
     '{"observations":[{"host":"a.example","spam_score":0.1,"spam_score":0.99}]}',
     "observations[0].spam_score"),
    ("POST", "/v1/admin/config/rollback", '{"version":"a","version":"b"}', "version"),
    ("POST", "/v1/admin/config/try", '{"config":"profiles: {}","request":{"documents":'
     '[{"id":"a","url":"http://banned.example/","score":1,"url":"http://ok.example/"}]}}',
     "request.documents[0].url"),
])
def test_every_admin_body_refuses_a_repeat_naming_its_path(client, method, path, raw, field):
    client.post("/v1/banlist/entries", headers=AUTH,
                json={"scope": "domain", "value": "spam.example", "reason": "r"})
    refused(post(client, path, raw, method), field)
    assert client.get("/v1/banlist/entries").json()["total"] == 1  # nothing changed


def test_an_import_line_with_a_repeated_key_is_refused_by_line(client):
    body = ('{"scope":"host","value":"ok.example","reason":"r"}\n'
            '{"scope":"url","value":"shop.example/item/1","reason":"r","scope":"domain"}\n')
    r = client.post("/v1/banlist/import", content=body.encode(), headers=AUTH)
    assert r.status_code == 422, r.text
    assert r.json()["refused"] == [{"line": 2, "field": "scope", "problem": "duplicate key"}]
    assert client.get("/v1/banlist/entries").json()["total"] == 0
