"""`rearrange check-config`, `rearrange run`, and what a stopped `banlist import` reports."""
from __future__ import annotations

import json
import sys

import pytest

from app.cli.main import main
from tests.conftest import ROOT


def test_check_config_ok(capsys):
    assert main(["check-config", str(ROOT / "config" / "rules.yaml")]) == 0
    out = capsys.readouterr().out
    assert "profile commercial: pre-filter:banlist" in out and ": ok, config_version " in out


def test_check_config_names_the_place(tmp_path, capsys):
    bad = tmp_path / "rules.yaml"
    bad.write_text("profiles:\n  default:\n    rerank: [{sandbox_damping: {beta: 2}}]\n")
    assert main(["check-config", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "profiles.default.rerank[0] sandbox_damping: beta: 2 is outside [0, 1]" in err


@pytest.mark.parametrize(("content", "problem"), [
    (None, "cannot read: No such file or directory"),
    (b"profiles: [", "not valid YAML: "),
])
def test_check_config_names_an_unreadable_file_once(tmp_path, capsys, content, problem):
    path = tmp_path / "rules.yaml"
    if content is not None:
        path.write_bytes(content)
    assert main(["check-config", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}: invalid: {problem}") and err.count(str(path)) == 1
    against = tmp_path / "old.yaml"  # the other file is named, as the place of its problem
    assert main(["check-config", str(ROOT / "config" / "rules.yaml"), "--against",
                 str(against)]) == 1
    assert f"rules.yaml: invalid: {against}: cannot read" in capsys.readouterr().err


def test_run_offline_with_a_banlist(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    request = tmp_path / "req.json"
    request.write_text(json.dumps({"request_id": "offline", "documents": [
        {"id": "a", "url": "http://www.spam-farm.example/x", "score": 2},
        {"id": "b", "url": "http://ok.example/x", "score": 1, "is_ad": True}]}))
    banlist = ROOT / "config" / "banlist.sample.jsonl"
    assert main(["run", str(request), "--banlist", str(banlist)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["request_id"] == "offline" and [d["id"] for d in out["documents"]] == ["b"]
    assert out["removed"][0]["rule"] == "banlist" and out["documents"][0]["annotations"] == ["ad"]
    assert not (tmp_path / "var").exists()


@pytest.fixture
def exports(settings, tmp_path):
    """A service's export in each format, as `rearrange banlist export` writes it, and the
    request of a page with a document on a member of its org group."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from tests.conftest import AUTH

    with TestClient(create_app(settings)) as c:
        c.put("/v1/banlist/groups/acme", headers=AUTH,
              json={"domains": ["acme.com", "acme-shop.net"], "reason": "one owner"})
        for body in ({"scope": "org", "value": "acme", "reason": "court order"},
                     {"scope": "host", "value": "x.example", "reason": "malware",
                      "regions": ["RU", "KZ"], "ttl_seconds": 3600}):
            assert c.post("/v1/banlist/entries", headers=AUTH, json=body).status_code == 201
        files = {}
        for name, fmt in (("live.ndjson", "ndjson"), ("live.csv", "csv"),
                          ("export-ndjson", "ndjson"), ("export-csv", "csv")):
            files[name] = tmp_path / name
            files[name].write_bytes(c.get("/v1/banlist/export", params={"format": fmt}).content)
    request = tmp_path / "req.json"
    request.write_text(json.dumps({"request_id": "offline", "documents": [
        {"id": "a", "url": "https://shop.acme-shop.net/x", "score": 2},
        {"id": "b", "url": "http://ok.example/x", "score": 1}]}))
    return files, request


@pytest.mark.parametrize("name", ["live.ndjson", "live.csv", "export-ndjson", "export-csv"])
def test_run_takes_an_export_in_either_format(exports, name, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    files, request = exports
    assert main(["run", str(request), "--banlist", str(files[name])]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [d["id"] for d in out["documents"]] == ["b"]
    assert "org acme banned (court order)" in out["removed"][0]["reason"]


@pytest.mark.parametrize(("name", "edit", "where"), [
    ("live.csv", lambda t: t.replace(",org,", ",orgg,"), "live.csv:3: scope: unknown scope"),
    ("live.ndjson", lambda t: t.replace('"scope":"org",', '"scope":"org",,'),
     "live.ndjson:2: line: not JSON"),
    ("live.ndjson", lambda t: "\n".join(t.splitlines()[1:] + t.splitlines()[:1]),
     "live.ndjson:1: value: no org group named 'acme'"),
    ("live.csv", lambda t: t + 'host,"unclosed\n', "live.csv:5: not CSV: unexpected end"),
    ("missing.ndjson", None, "missing.ndjson: cannot read: No such file or directory"),
])
def test_run_names_the_file_and_line_of_a_bad_banlist(exports, name, edit, where, capsys,
                                                      monkeypatch):
    monkeypatch.chdir(ROOT)
    files, request = exports
    path = files.get(name, request.with_name(name))
    if edit is not None:
        path.write_text(edit(path.read_text()))
    assert main(["run", str(request), "--banlist", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"banlist: {request.parent}/{where}"), captured.err
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err


def test_run_reports_bad_input(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    request = tmp_path / "req.json"
    request.write_text('{"documents": [{"id": "a", "url": "http://x/", "score": "high"}]}')
    assert main(["run", str(request)]) == 1  # refused, as the service's 422
    assert "documents[0].score" in capsys.readouterr().err


def _exposition(control: int, treatment: int) -> str:
    return ("# TYPE rearrange_experiment_assignments_total counter\n"
            f'rearrange_experiment_assignments_total{{experiment="antispam_v7",'
            f'variant="control"}} {control}.0\n'
            f'rearrange_experiment_assignments_total{{experiment="antispam_v7",'
            f'variant="treatment"}} {treatment}.0\n')


def test_experiments_srm_from_files(tmp_path, capsys):
    config = str(ROOT / "config" / "rules.yaml")
    fair = tmp_path / "fair.prom"
    fair.write_text(_exposition(5030, 4970))
    assert main(["experiments", "srm", "--file", str(fair), "--config", config]) == 0
    out = capsys.readouterr().out
    assert "antispam_v7: control 5030 (expected 5000), treatment 4970 (expected 5000)" in out
    assert "ok" in out
    # two replicas are summed: 5030+5400 vs 4970+4600 is a mismatch
    skewed = tmp_path / "skewed.prom"
    skewed.write_text(_exposition(5400, 4600))
    assert main(["experiments", "srm", "--file", str(fair), "--file", str(skewed),
                 "--config", config, "--json"]) == 1  # a finding
    report = json.loads(capsys.readouterr().out)
    exp = report["experiments"][0]
    assert exp["observed"] == {"control": 10430.0, "treatment": 9570.0} and exp["flagged"]
    assert exp["p_value"] < 0.001


def test_experiments_srm_bad_source(tmp_path, capsys):
    config = str(ROOT / "config" / "rules.yaml")
    assert main(["experiments", "srm", "--file", str(tmp_path / "none"), "--config",
                 config]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_the_example_experiments_config_is_valid(capsys):
    assert main(["check-config", str(ROOT / "config" / "experiments.example.yaml")]) == 0
    out = capsys.readouterr().out
    assert "experiment sandbox_v2: unit user_id, layer ranking slots [3000, 6000]" in out
    assert "holdout: unit user_id, buckets [0, 200)" in out


def test_check_config_against_the_running_file_refuses_rebucketing(tmp_path, capsys):
    old = tmp_path / "old.yaml"
    new = tmp_path / "new.yaml"
    old.write_text("profiles: {default: {rerank: [spam_demotion]}}\nexperiments: [{name: e, "
                   "unit: user_id, variants: {control: 10, treatment: 10}, "
                   "rules: [spam_demotion]}]\n")
    new.write_text(old.read_text().replace("control: 10", "control: 20"))
    assert main(["check-config", str(new), "--against", str(old)]) == 1
    err = capsys.readouterr().err
    assert "experiments[0] e: would re-bucket units of the running experiment" in err
    assert main(["check-config", str(new)]) == 0  # valid on its own


def test_check_config_against_a_file_imports_no_plugin_that_file_did_not_load(
        tmp_path, capsys, plugin_path):
    old = tmp_path / "old.yaml"
    new = tmp_path / "new.yaml"
    old.write_text("plugins: [rr_business]\nprofiles: {default: {rerank: [spam_demotion]}}\n")
    new.write_text(old.read_text().replace("rr_business", "rr_business, rr_import_marker"))
    assert main(["check-config", str(new), "--against", str(old)]) == 1
    assert ("plugins[1] rr_import_marker: not a module the served config loaded"
            in capsys.readouterr().err)
    assert "rr_import_marker" not in sys.modules
    assert main(["check-config", str(old), "--against", str(old)]) == 0


@pytest.mark.parametrize(("exc", "fate"), [
    ("refused", "not imported"),
    ("redis-down-before", "not imported"),
    ("in-doubt", "unknown (all or nothing): `GET /v1/banlist/writes/" + "ab" * 16),
    ("gateway", "unknown (the service did not answer)"),
    ("bare-500", "unknown (the service did not answer)"),
    ("cut-off", "unknown (the service did not answer)"),
])
def test_a_stopped_import_says_not_imported_only_when_the_service_refused(exc, fate):
    import io

    from app.cli.banlist_import import _stopped
    from app.cli.client import Refused

    errors = {
        "refused": Refused(422, {"error": "invalid_request", "field": "x", "problem": "p"}),
        "redis-down-before": Refused(503, {"error": "error", "field": "banlist",
                                            "problem": "Redis unreachable, not made"}),
        "in-doubt": Refused(503, {"error": "error", "field": "banlist", "problem": "?",
                                   "outcome": "unknown", "write_id": "ab" * 16}),
        "gateway": Refused(502, {"field": None, "problem": "Bad Gateway"}),
        "bare-500": Refused(500, {"field": None, "problem": "Internal Server Error"}),
        "cut-off": ValueError("Expecting ',' delimiter"),
    }
    err = io.StringIO()
    _stopped(1000, [(1001, "{}"), (1999, "{}")], 1000, errors[exc], err)
    assert f"lines 1001-1999: {fate}" in err.getvalue()
