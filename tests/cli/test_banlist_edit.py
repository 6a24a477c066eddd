"""`rearrange banlist extend` and `edit` against real `rearrange serve` processes: on the
embedded store, and on Redis with a second replica that must see the edit; their refusals
keep the exit codes every command keeps (1 refused, 2 usage, 3 unreachable)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from app.banlist.model import parse_iso
from app.cli.main import main
from bench.replicas import free_port
from tests.cli.test_client import cli
from tests.conftest import ROOT
from tests.redis_server import RedisServer, ServeProcess, stop_all

TOKENS = "tns:t,viewer:v:read"
WRITE = {"Authorization": "Bearer t"}


@pytest.fixture(params=["embedded", pytest.param("redis", marks=pytest.mark.redis)])
def services(request, tmp_path: Path):
    """(a, b): the base URLs of two services of one banlist (the same one when embedded)."""
    config = tmp_path / "rules.yaml"
    config.write_bytes((ROOT / "config" / "rules.yaml").read_bytes())
    env = {"REARRANGE_CONFIG": str(config), "REARRANGE_ADMIN_TOKENS": TOKENS,
           "REARRANGE_CONFIG_POLL_SECONDS": "0"}
    redis = None
    if request.param == "redis":
        redis = RedisServer(tmp_path / "redis").start()
        env.update(REDIS_URL=redis.url, REARRANGE_BANLIST_BLOCK_SECONDS="0.3")
    started: list[ServeProcess] = []
    try:
        for name in ("a", "b") if redis is not None else ("a",):
            started.append(ServeProcess(ROOT, tmp_path, {
                **env, "REARRANGE_BANLIST_PATH": str(tmp_path / f"{name}.jsonl"),
                "REARRANGE_BANLIST_SNAPSHOT_PATH": str(tmp_path / f"{name}.snapshot.json")}))
        yield started[0].base, started[-1].base
    finally:
        stop_all(started)
        if redis is not None:
            redis.kill()


def until(cond, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.02)


def entry_on(base: str, entry_id: str) -> dict | None:
    entries = httpx.get(f"{base}/v1/banlist/entries").json()["entries"]
    return next((e for e in entries if e["id"] == entry_id), None)


def test_extend_and_edit_change_a_ban_in_place_on_every_replica(services):
    a, b = services
    added = httpx.post(f"{a}/v1/banlist/entries", headers=WRITE, json={
        "scope": "domain", "value": "spam.example", "reason": "doorways", "regions": ["RU"],
        "ttl_seconds": 3600}).json()["entry"]
    entry_id = added["id"]
    svc = ("banlist", "--url", a, "--token", "t")

    code, out, err = cli(*svc, "extend", entry_id, "--ttl", "7d", "--reason", "still at it")
    assert code == 0 and err == "" and f"entry {entry_id} changed; banlist version 2" in out
    week = parse_iso(entry_on(a, entry_id)["expires_at"]) - time.time()
    assert 7 * 86400 - 120 < week <= 7 * 86400
    code, out, _ = cli(*svc, "extend", entry_id, "--until", "2099-01-01", "--reason", "court")
    assert code == 0 and "2099-01-01T00:00:00.000Z" in out
    code, out, _ = cli(*svc, "extend", entry_id, "--permanent", "--reason", "court order")
    assert code == 0 and "changed; banlist version 4" in out
    code, out, _ = cli(*svc, "extend", entry_id, "--permanent", "--reason", "again")
    assert code == 0 and "already so: nothing changed; banlist version 4" in out
    code, out, _ = cli(*svc, "edit", entry_id, "--regions", "RU,by", "--reason", "and Belarus")
    assert code == 0 and "BY" in out and "changed; banlist version 5" in out
    code, out, _ = cli(*svc, "edit", entry_id, "--everywhere", "--ttl", "30d",
                       "--reason", "everywhere, for a month")
    assert code == 0 and "changed; banlist version 6" in out

    until(lambda: (entry_on(b, entry_id) or {}).get("regions") == [])
    final = entry_on(b, entry_id)
    assert final["id"] == entry_id and final["expires_at"] is not None
    assert {k: v for k, v in final.items() if k not in ("regions", "expires_at")} == {
        k: v for k, v in added.items() if k not in ("regions", "expires_at")}
    code, out, _ = cli("banlist", "--url", b, "history", "--after-seq", "0", "--value",
                       "spam.example")  # oldest first
    assert code == 0, out
    rows = [line for line in out.splitlines() if " edit " in line]
    assert len(rows) == 5
    assert "expires_at 2099-01-01T00:00:00.000Z -> permanent" in rows[2]
    assert "court order" in rows[2] and "tns" in rows[2]
    assert "regions RU -> BY,RU" in rows[3]
    assert "expires_at permanent -> 20" in rows[4]  # a table cell is cut at 100 characters
    code, out, _ = cli("banlist", "--url", b, "history", "--value", "spam.example", "--json")
    last = json.loads(out)["changes"][0]  # newest first
    assert (last["op"], last["before"]["regions"], last["after"]["regions"]) == (
        "edit", ["BY", "RU"], [])
    code, out, _ = cli("banlist", "--url", b, "lookup", "http://www.spam.example/",
                       "--region", "DE")
    assert code == 0 and "BANNED" in out


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from tests.api.test_live_server import start_server

    proc, base, _ = start_server(tmp_path_factory.mktemp("edit"), REARRANGE_ADMIN_TOKENS=TOKENS)
    yield base
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def entry_id(live):
    r = httpx.post(f"{live}/v1/banlist/entries", headers=WRITE, json={
        "scope": "host", "value": f"h{time.monotonic_ns()}.example", "reason": "r",
        "regions": ["KZ"]})
    return r.json()["entry"]["id"]


@pytest.mark.parametrize(("argv", "line"), [
    (("--token", "t", "extend", "99999", "--ttl", "1d", "--reason", "r"),
     "refused: HTTP 404: id: no active entry '99999'"),
    (("--token", "v", "extend", "{id}", "--permanent", "--reason", "r"),
     "refused: HTTP 403: Authorization: the token of viewer is read-only"),
    (("--token", "t", "extend", "{id}", "--until", "2001-01-01", "--reason", "r"),
     "refused: HTTP 422: expires_at: 2001-01-01T00:00:00.000Z is already in the past"),
    (("--token", "t", "edit", "{id}", "--regions", "RUS", "--reason", "r"),
     "refused: HTTP 422: regions[0]: 'RUS' is not an ISO 3166-1 alpha-2 code"),
    (("--token", "t", "extend", "{id}", "--permanent", "--reason", " "),
     "refused: HTTP 422: reason: a reason is required for an edit"),
])
def test_a_refused_edit_is_one_line_exit_1(live, entry_id, argv, line):
    code, out, err = cli("banlist", "--url", live, *(a.format(id=entry_id) for a in argv))
    assert code == 1 and out == "" and err.startswith(line), err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_an_edit_making_two_entries_one_ban_is_refused_naming_regions(live, entry_id):
    value = entry_on(live, entry_id)["value"]
    other = httpx.post(f"{live}/v1/banlist/entries", headers=WRITE, json={
        "scope": "host", "value": value, "reason": "r"}).json()["entry"]["id"]
    code, out, err = cli("banlist", "--url", live, "--token", "t", "edit", entry_id,
                         "--everywhere", "--reason", "r")
    assert code == 1 and out == ""
    assert err.startswith(f"refused: HTTP 409: regions: entry {other} already bans host "
                          f"{value} everywhere"), err


@pytest.mark.parametrize("argv", [
    ("extend", "7", "--reason", "r"),  # no new expiry
    ("extend", "7", "--ttl", "7d", "--permanent", "--reason", "r"),
    ("extend", "7", "--ttl", "a week", "--reason", "r"),
    ("extend", "7", "--until", "yesterday", "--reason", "r"),
    ("extend", "7", "--until", "2099-01-01T00:00:00", "--reason", "r"),  # no offset
    ("extend", "7", "--permanent"),  # no reason
    ("edit", "7", "--regions", "RU", "--everywhere", "--reason", "r"),
    ("edit", "--everywhere", "--reason", "r"),  # no id
])
def test_usage_errors_are_exit_2_before_anything_is_sent(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["banlist", "--url", "http://127.0.0.1:9", *argv])
    assert exc.value.code == 2 and "usage:" in capsys.readouterr().err


def test_an_edit_with_nothing_to_change_is_a_usage_error(live, entry_id):
    code, out, err = cli("banlist", "--url", live, "--token", "t", "edit", entry_id,
                         "--reason", "r")
    assert (code, out) == (2, "") and "nothing to change" in err


def test_no_answer_is_exit_3():
    base = f"http://127.0.0.1:{free_port()}"
    code, out, err = cli("banlist", "--url", base, "extend", "1", "--permanent",
                         "--reason", "r")
    assert (code, out, err) == (3, "", f"cannot reach {base}: connection refused\n")
