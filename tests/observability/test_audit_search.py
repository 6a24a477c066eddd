"""`rearrange audit search`: a site's records found in the audit log the service wrote,
across the files logrotate rotated out of it."""
from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.banlist.model import iso
from app.cli.main import main
from app.main import create_app
from tests.conftest import AUTH


def serve(settings, bodies: list[dict]) -> None:
    """One run of the service (its lifespan closes the audit log): these requests."""
    with TestClient(create_app(settings)) as client:
        for body in bodies:
            assert client.post("/v1/rerank", json=body).status_code == 200


def request(rid: str, *urls: str, spam: float = 0.0) -> dict:
    docs = [{"id": f"d{i}", "url": url, "score": 10.0 - i, "spam_score": spam}
            for i, url in enumerate(urls)]
    return {"request_id": rid, "query": {"text": "sofa", "region": "RU"}, "documents": docs}


@pytest.fixture
def log(settings, tmp_path: Path) -> dict:
    """Three runs of the service, rotated as logrotate does between them (`.2.gz`, `.1`,
    live), with a domain ban from the first run on and spam from the second."""
    path = Path(settings.audit_log)
    with TestClient(create_app(settings)) as client:
        assert client.post("/v1/banlist/entries", headers=AUTH, json={
            "scope": "domain", "value": "shop.example", "reason": "counterfeit"}).status_code == 201
        for n in range(3):
            assert client.post("/v1/rerank", json=request(
                f"old{n}", f"https://www.shop.example/{n}", "https://fine.example/")
            ).status_code == 200
    path.with_name(path.name + ".2.gz").write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()
    serve(settings, [request("mid", "https://other.example/", "https://Shop.Example/sofa?id=3")])
    path.rename(path.with_name(path.name + ".1"))
    later = time.time()
    time.sleep(0.01)
    serve(settings, [request("new", "https://x.shop.example/", "https://fine.example/",
                             spam=0.99),
                     request("none", "https://fine.example/")])
    with path.open("ab") as fh:  # a write cut short (disk full) left half a line
        fh.write(b'{"ts":' + str(time.time()).encode() + b',"request_id":"torn","audit":[{'
                 b'"host":"www.shop.example","ur')
    return {"path": path, "later": later}


def search(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["audit", "search", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_site_is_found_in_every_rotated_file_with_a_summary(log, capsys):
    code, out, err = search(capsys, "--host", "SHOP.example", "--log", str(log["path"]))
    assert code == 0 and err == ""  # no terminal: no progress bar
    head = out.splitlines()[0]
    assert head.startswith("shop.example: 5 records in 5 requests, ")
    assert "applied: banlist remove 5" in out
    assert "read 3 file(s)" in out and "1 unreadable" in out
    for rid in ("old0", "old2", "mid", "new"):
        assert rid in out
    assert "fine.example" not in out and "none" not in out.split("\n", 1)[1]


def test_json_gives_every_record_with_its_request_and_versions(log, capsys):
    code, out, _ = search(capsys, "--host", "shop.example", "--log", str(log["path"]),
                          "--json")
    found = json.loads(out)
    assert code == 0 and found["summary"]["records"] == len(found["records"]) == 5
    assert [r["request_id"] for r in found["records"]] == ["old0", "old1", "old2", "mid", "new"]
    for r in found["records"]:
        assert r["host"].endswith("shop.example") and r["rule"] == "banlist"
        assert r["config_version"] and r["banlist_version"] == 1 and r["query"] == "sofa"
    assert found["summary"]["read"]["files"][0].endswith(".2.gz")
    assert found["summary"]["config_versions"] == {found["records"][0]["config_version"]: 5}


def test_time_rule_and_url_narrow_the_search(log, capsys):
    path = str(log["path"])
    since = iso(log["later"])
    code, out, _ = search(capsys, "--host", "shop.example", "--log", path, "--since", since,
                          "--json")
    assert code == 0 and [r["request_id"] for r in json.loads(out)["records"]] == ["new"]
    code, out, _ = search(capsys, "--host", "shop.example", "--log", path, "--until", since,
                          "--rule", "banlist", "--json")
    assert [r["request_id"] for r in json.loads(out)["records"]] == ["old0", "old1", "old2",
                                                                     "mid"]
    code, out, _ = search(capsys, "--url", "http://shop.example:80/sofa?id=3", "--log", path,
                          "--json")
    assert code == 0 and [r["request_id"] for r in json.loads(out)["records"]] == ["mid"]
    code, out, _ = search(capsys, "--host", "shop.example", "--log", path, "--rule",
                          "spam_ban")
    assert code == 1 and out.startswith("shop.example: 0 records in 0 requests\n")


def test_every_action_takes_records_that_did_not_hurt(settings, capsys):
    serve(settings, [{"documents": [{"id": "a", "url": "https://ads.example/", "score": 1.0,
                                     "is_ad": True}]}])
    path = settings.audit_log
    assert search(capsys, "--host", "ads.example", "--log", path)[0] == 1
    code, out, _ = search(capsys, "--host", "ads.example", "--log", path, "--every-action",
                          "--json")
    assert code == 0 and [r["action"] for r in json.loads(out)["records"]] == ["annotate"]


def test_the_progress_bar_is_drawn_on_request(log, capsys):
    code, _, err = search(capsys, "--host", "shop.example", "--log", str(log["path"]),
                          "--progress")
    assert code == 0 and "reading" in err and "100%" in err


@pytest.mark.parametrize(("args", "problem"), [
    (["--since", "yesterday"], "'yesterday' is not an ISO 8601 time"),
    (["--since", "2025-03-01T00:00:00"], "with an offset"),
    (["--since", "2d", "--until", "3d"], "--since must be before --until"),
    ([], "give --host or --url"),
    (["--host", "http://"], "is not a host name or URL"),
])
def test_bad_arguments_are_named(args, problem, settings, capsys):
    Path(settings.audit_log).write_bytes(b"")
    argv = [*args, "--log", settings.audit_log]
    if args[:1] != ["--host"] and args:
        argv += ["--host", "a.example"]
    code, _, err = search(capsys, *argv)
    assert code == 2 and problem in err


def test_no_log_to_read_is_said(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("REARRANGE_AUDIT_LOG", raising=False)
    code, _, err = search(capsys, "--host", "a.example")
    assert code == 2 and "no audit log: give --log PATH" in err
    code, _, err = search(capsys, "--host", "a.example", "--log", str(tmp_path / "none.jsonl"))
    assert code == 1 and "no such audit log" in err
    monkeypatch.setenv("REARRANGE_AUDIT_LOG", str(tmp_path / "env.jsonl"))
    (tmp_path / "env.jsonl").write_bytes(b"")
    assert search(capsys, "--host", "a.example")[0] == 1
