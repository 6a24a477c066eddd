"""History and lookup over HTTP and the CLI, for T&S: filters that filter (or a 422 naming
the parameter), and what used to match a URL, with both stores."""
from __future__ import annotations

import time

import pytest

from app.banlist.model import iso
from app.cli.main import main
from tests.api.test_live_server import start_server
from tests.conftest import AUTH, app_on


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


def test_lookup_shows_what_used_to_match(client):
    gone = ban(client, "domain", "example.com", "court order")
    lift(client, gone, "appeal granted")
    ban(client, "host", "www.example.com", "malware", ttl_seconds=1)
    time.sleep(1.05)  # past the ttl; the sweeper (not run here) has not logged it yet
    got = client.get("/v1/banlist/lookup", params={"url": "https://www.example.com/a"}).json()
    assert got["banned"] is False
    (expired,) = got["matches"]
    assert expired["why_not"] == "expired" and expired["was"].startswith(
        f"was banned until {expired['expires_at']}, by tns, reason malware")
    (former,) = got["former"]
    assert former["id"] == gone and former["ended"]["op"] == "remove"
    assert former["was"].endswith(", by tns, reason court order (removed by tns: appeal "
                                  "granted)")
    assert got["history_since"] == client.get("/v1/banlist/changes").json()[
        "changes"][0]["at"]
    assert client.app.state.services.store.sweep() == 1
    got = client.get("/v1/banlist/lookup", params={"url": "https://www.example.com/a"}).json()
    assert got["matches"] == [] and [f["ended"]["op"] for f in got["former"]] == [
        "expire", "remove"]


def test_lookup_on_redis_shows_what_used_to_match_and_degrades_without_it(redis_server,
                                                                          settings):
    with app_on(redis_server, settings, "a") as client:
        gone = ban(client, "domain", "example.com", "court order")
        ban(client, "host", "www.example.com", "malware")
        lift(client, gone, "appeal granted")
        store = client.app.state.services.store
        # the adds leave the changelog (its retention); the history keeps them for a year
        store.client.xtrim(store.keys.stream, maxlen=1, approximate=False)
        got = client.get("/v1/banlist/lookup", params={"url": "https://www.example.com/"}
                         ).json()
        assert got["banned"] is True and [m["scope"] for m in got["matches"]] == ["host"]
        (former,) = got["former"]
        assert former["id"] == gone and former["value"] == "example.com"
        assert former["was"].endswith("reason court order (removed by tns: appeal granted)")
        changes = client.get("/v1/banlist/changes", params={"host": "example.com"}).json()
        assert [(c["op"], c["entry"]["value"]) for c in changes["changes"]] == [
            ("add", "example.com"), ("add", "www.example.com"), ("remove", "example.com")]
        redis_server.kill()
        got = client.get("/v1/banlist/lookup", params={"url": "https://www.example.com/"})
        assert got.status_code == 200 and got.json()["banned"] is True  # from the copy
        assert got.json()["former"] is None and "Redis unreachable" in got.json()[
            "former_problem"]
        errors = store.events.registry.get_sample_value(
            "rearrange_banlist_redis_errors_total", {"op": "history"})
        assert errors and errors >= 1
        r = client.get("/v1/banlist/changes", params={"host": "example.com"})
        assert r.status_code == 503 and r.json()["field"] == "banlist"


def test_the_cli_answers_from_the_records(tmp_path, capsys):
    proc, base, _ = start_server(tmp_path)
    try:
        cli = ["banlist", "--url", base, "--token", "t"]
        assert main([*cli, "add", "domain", "gone.example", "--reason", "court order"]) == 0
        assert main([*cli, "add", "host", "kept.example", "--reason", "spam"]) == 0
        assert main([*cli, "remove", "1", "--reason", "appeal granted"]) == 0
        capsys.readouterr()
        assert main([*cli, "lookup", "http://www.gone.example/page"]) == 0
        out = capsys.readouterr().out
        assert "not banned" in out and "formerly matched (1;" in out
        assert ("entry 1 (domain gone.example (a parent of www.gone.example)) was banned "
                "until ") in out
        assert "by tns, reason court order (removed by tns: appeal granted)" in out
        assert main([*cli, "history", "--host", "gone.example", "--from", "1h"]) == 0
        *rows, footer = capsys.readouterr().out.splitlines()[1:]
        assert [r.split()[0] for r in rows] == ["3", "1"]  # newest first
        assert "domain gone.example [entry 1]" in rows[1]
        assert footer == "2 changes, newest first; none older"
        assert main([*cli, "history", "--actor", "nobody"]) == 0
        assert capsys.readouterr().out == "no changes\n"
        with pytest.raises(SystemExit) as exc:
            main([*cli, "history", "--until", "soon"])
        assert exc.value.code == 2 and "'soon' is not an ISO 8601 time" in capsys.readouterr(
            ).err
    finally:
        proc.terminate()
        proc.wait(10)
