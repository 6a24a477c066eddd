"""A body or query the API's models refuse is answered in the project's words, naming the
field: never pydantic's ("Input should have timezone info", "Field required"), on a route,
on an import's line and in a config's parameter alike (issue 49)."""
from __future__ import annotations

import pytest

from app.config.load import load_bytes
from app.errors import ConfigError
from tests.conftest import AUTH

BAN = {"scope": "host", "value": "a.example", "reason": "spam"}


@pytest.mark.parametrize(("change", "field", "problem"), [
    ({"expires_at": "2026-12-31T00:00:00"}, "body.expires_at",
     'a time with its offset, such as 2026-12-31T00:00:00Z (got "2026-12-31T00:00:00")'),
    ({"expires_at": "next week"}, "body.expires_at",
     'a time with its offset, such as 2026-12-31T00:00:00Z (got "next week")'),
    ({"reason": None}, "body.reason", "a string (got null)"),
    ({"reason": ""}, "body.reason", "must not be empty"),
    ({"reason": "r" * 5000}, "body.reason", "at most 1000 characters (got 5000)"),
    ({"scope": "planet"}, "body.scope",
     "one of 'url', 'prefix', 'host', 'domain', 'org' (got \"planet\")"),
    ({"ttl_seconds": "3600"}, "body.ttl_seconds", 'a whole number (got "3600")'),
    ({"ttl_seconds": 0}, "body.ttl_seconds", "more than 0 (got 0)"),
    ({"regions": "RU"}, "body.regions", 'a list (got "RU")'),
    ({"regions": [7]}, "body.regions.0", "a string (got 7)"),
    ({"actor": "me"}, "body.actor", "unknown field"),
])
def test_a_refused_body_is_said_in_the_project_s_words(client, change, field, problem):
    r = client.post("/v1/banlist/entries", headers=AUTH, json={**BAN, **change})
    assert r.status_code == 422, r.text
    assert (r.json()["field"], r.json()["problem"]) == (field, problem)
    assert r.json()["errors"][0] == {"field": field, "problem": problem}


def test_a_missing_field_and_a_body_that_is_not_json(client):
    r = client.post("/v1/banlist/entries", headers=AUTH, json={"scope": "host"})
    assert [(e["field"], e["problem"]) for e in r.json()["errors"]] == [
        ("body.value", "required"), ("body.reason", "required")]
    r = client.post("/v1/banlist/entries", content=b'{"scope": ', headers={
        **AUTH, "Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["field"] == "body"
    assert r.json()["problem"].startswith("not valid JSON: Expecting value (at character ")
    r = client.get("/v1/banlist/changes", params={"limit": "all"}, headers=AUTH)
    assert (r.json()["field"], r.json()["problem"]) == ("query.limit",
                                                        'a whole number (got "all")')


def test_an_import_line_is_refused_as_a_single_add_is(client):
    line = b'{"scope": "host", "value": "b.example", "reason": "r", "expires_at": "2027-01-01"}'
    r = client.post("/v1/banlist/import", params={"dry_run": "true"}, content=line,
                    headers={**AUTH, "Content-Type": "application/x-ndjson"})
    assert r.status_code == 422, r.text
    (refused,) = r.json()["refused"]
    assert (refused["field"], refused["problem"]) == (
        "expires_at", 'a time with its offset, such as 2026-12-31T00:00:00Z (got "2027-01-01")')


def test_a_python_rule_s_parameter_is_refused_in_the_same_words(plugin_path):
    with pytest.raises(ConfigError) as refused:
        load_bytes(b"plugins: [rr_business]\nprofiles: {default: {rerank: [{demote_host: "
                   b"{host: a, by: 0}}]}}")
    assert refused.value.problem == "parameter 'by': more than 0 (got 0)"
