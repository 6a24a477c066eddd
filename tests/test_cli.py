"""`rearrange check-config` and `rearrange run`."""
from __future__ import annotations

import json

from app.cli import main
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
    assert "profiles.default.rerank[0] sandbox_damping: parameter 'beta'" in err


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


def test_run_reports_bad_input(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    request = tmp_path / "req.json"
    request.write_text('{"documents": [{"id": "a", "url": "http://x/", "score": "high"}]}')
    assert main(["run", str(request)]) == 2
    assert "documents[0].score" in capsys.readouterr().err
