"""`rearrange replay`: the diff of two answers, the report, bad input, and end to end on what
a real `rearrange serve` captured."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest

from app.cli.main import main
from app.replay.run import Captured, Report, diff, parse_ban
from tests.api.test_live_server import start_server, wait_for_new_version, write_atomically
from tests.conftest import ROOT


def page(*ids: str) -> list[dict]:
    return [{"id": i, "url": f"https://{i}.example/p", "position": n}
            for n, i in enumerate(ids, 1)]


def record(rule: str, doc_id: str, action: str = "remove", mode: str = "applied") -> dict:
    return {"rule": rule, "phase": "pre-filter", "doc_id": doc_id, "action": action,
            "reason": "…", "delta": None, "mode": mode}


def answer(docs: list[dict], audit: list[dict], profile: str = "default") -> tuple[int, dict]:
    return 200, {"profile": profile, "documents": docs, "audit": audit}


def test_diff_names_what_is_removed_added_and_moved_and_the_rules_that_differ():
    served = answer(page("a", "b", "c"), [record("banlist", "x")])
    candidate = answer(page("a", "c", "e"), [record("banlist", "x"), record("banlist", "b"),
                                             record("spam_demotion", "a", "rescore", "shadow")])
    d = diff(served, candidate)
    assert d.removed == [{"id": "b", "url": "https://b.example/p", "host": "b.example",
                          "position": 2}]
    assert d.added == [{"id": "e", "url": "https://e.example/p", "host": "e.example",
                        "position": 3}]
    assert d.moved == [{"id": "c", "url": "https://c.example/p", "from": 3, "to": 2}]
    assert d.rules == [
        {"rule": "banlist", "phase": "pre-filter", "action": "remove", "mode": "applied",
         "served": 1, "candidate": 2},
        {"rule": "spam_demotion", "phase": "pre-filter", "action": "rescore", "mode": "shadow",
         "served": 0, "candidate": 1}]
    assert d.changed


def test_the_same_answer_is_no_change_and_a_record_on_another_document_is_one():
    same = answer(page("a", "b"), [record("banlist", "x")])
    assert not diff(same, same).changed
    other = answer(page("a", "b"), [record("banlist", "y")])
    assert [(r["served"], r["candidate"]) for r in diff(same, other).rules] == [(1, 1)]


def test_a_status_change_empties_the_page_and_counts_as_a_change():
    failed = (503, {"error": "rule_failed", "rule": "r", "phase": "pre-filter", "problem": "p"})
    d = diff(answer(page("a"), []), failed)
    assert d.status == (200, 503) and [r["id"] for r in d.removed] == ["a"]
    assert Report().totals()["requests"] == 0


def test_the_report_sums_hosts_and_rules_over_requests():
    report = Report()
    served = answer(page("a", "b", "c"), [])
    banned = answer(page("a", "c"), [record("banlist", "b")])
    for n in (1, 2):
        report.add(Captured("f", n, 0.0, b"{}"), "q", diff(served, banned))
    report.add(Captured("f", 3, 0.0, b"{}"), "q", diff(served, served))
    assert report.totals() == {"requests": 3, "changed": 2, "removed": 2, "added": 0,
                               "moved": 2, "status_changed": 0}
    assert report.host_rows() == [{"host": "b.example", "lost": 2, "gained": 0, "requests": 2}]
    assert report.rule_rows() == [{"rule": "banlist", "phase": "pre-filter", "action": "remove",
                                   "mode": "applied", "served": 0, "candidate": 2,
                                   "requests": 2}]


def test_a_ban_is_scope_value_and_regions():
    spec = parse_ban("host m.example.com RU,KZ")
    assert (spec.scope, spec.value, spec.regions) == ("host", "m.example.com", ("RU", "KZ"))
    with pytest.raises(ValueError, match="expected 'SCOPE VALUE"):
        parse_ban("example.com")


@pytest.fixture
def served_config(tmp_path: Path) -> Path:
    path = tmp_path / "served.yaml"
    path.write_text("profiles: {default: {pre-filter: [banlist], trim: [{depth: {k: 5}}]}}\n")
    return path


def capture_line(request: dict) -> bytes:
    return orjson.dumps({"capture": 1, "ts": 1.0, "status": 200, "config_version": "v",
                         "banlist_version": 0, "request": request}) + b"\n"


@pytest.mark.parametrize("line, named", [
    (b"{not json\n", "c.jsonl:2: line: not JSON"),
    (b'{"capture": 1, "ts": 1.0, "request": [1]}\n', "c.jsonl:2: request: expected the "
     "request body, a JSON object"),
    (b'{"capture": 1, "ts": "noon", "request": {}}\n', "c.jsonl:2: ts: expected a number"),
    (b'{"ts": 1.0, "request": {}}\n', "c.jsonl:2: capture: expected 1"),
])
def test_a_bad_capture_line_is_one_line_naming_file_line_and_field(tmp_path, served_config,
                                                                   capsys, line, named):
    capture = tmp_path / "c.jsonl"
    capture.write_bytes(capture_line({"documents": []}) + line)
    assert main(["replay", "--served", str(served_config), str(capture)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err, err


def test_a_bad_ban_or_config_is_refused_before_any_replay(tmp_path, served_config, capsys):
    capture = tmp_path / "c.jsonl"
    capture.write_bytes(capture_line({"documents": []}))
    assert main(["replay", "--served", str(served_config), "--ban", "planet mars",
                 str(capture)]) == 1
    assert "--ban planet mars: scope: unknown scope 'planet'" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles: {default: {trim: [{depth: {k: 0}}]}}\n")
    assert main(["replay", "--served", str(served_config), "--config", str(bad),
                 str(capture)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}: invalid: profiles.default.trim[0] depth" in err


def test_a_candidate_imports_no_plugin_the_served_config_did_not_load(
        tmp_path, served_config, capsys, plugin_path):
    capture = tmp_path / "c.jsonl"
    capture.write_bytes(capture_line({"documents": []}))
    candidate = tmp_path / "candidate.yaml"
    candidate.write_text("plugins: [rr_import_marker]\n" + served_config.read_text())
    assert main(["replay", "--served", str(served_config), "--config", str(candidate),
                 str(capture)]) == 1
    err = capsys.readouterr().err
    assert "plugins[0] rr_import_marker: not a module the served config loaded (it loaded: " \
        "none)" in err
    assert "rr_import_marker" not in sys.modules


DOCS = [{"id": f"d{i}", "url": f"https://h{i}.example/{i}", "score": 10 - i} for i in range(8)]


def test_replay_of_what_a_real_service_captured(tmp_path, served_config):
    capture = tmp_path / "capture.jsonl"
    proc, base, config = start_server(tmp_path, REARRANGE_CAPTURE_PATH=str(capture),
                                      REARRANGE_CAPTURE_RATE="1")
    try:
        old = httpx.get(f"{base}/readyz").json()["config_version"]
        write_atomically(config, served_config.read_text())
        wait_for_new_version(base, old)
        ban = {"scope": "domain", "value": "h7.example", "reason": "legal removal"}
        assert httpx.post(f"{base}/v1/banlist/entries", json=ban,
                          headers={"Authorization": "Bearer t"}).status_code == 201
        for user in ("u1", "u2", "u3"):
            body = {"query": {"text": f"sofa {user}"}, "unit": {"user_id": user},
                    "documents": DOCS}
            r = httpx.post(f"{base}/v1/rerank", json=body, headers={"Authorization": "Bearer t"})
            assert r.status_code == 200 and len(r.json()["documents"]) == 5
        export = httpx.get(f"{base}/v1/banlist/export", params={"format": "ndjson"}).content
    finally:
        proc.terminate()  # the capture is written whole at shutdown
        proc.wait(10)
    assert len(capture.read_bytes().splitlines()) == 3
    assert b"Bearer" not in capture.read_bytes()
    bans = tmp_path / "served-bans.ndjson"
    bans.write_bytes(export)
    candidate = tmp_path / "candidate.yaml"
    candidate.write_text("profiles: {default: {pre-filter: [banlist], trim: [{depth: {k: 4}}]}}")
    replay = [sys.executable, "-m", "app.cli", "replay", "--served", str(config),
              "--served-banlist", str(bans), "--config", str(candidate),
              "--ban", "domain h1.example", str(capture)]
    done = subprocess.run([*replay, "--json"], cwd=ROOT, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["summary"] == {"requests": 3, "changed": 3, "removed": 3, "added": 0,
                                 "moved": 9, "status_changed": 0}
    assert report["hosts"] == [{"host": "h1.example", "lost": 3, "gained": 0, "requests": 3}]
    assert [(r["rule"], r["action"], r["served"], r["candidate"]) for r in report["rules"]] == [
        ("banlist", "remove", 3, 6)]  # h7 on both sides, h1 on the candidate's only
    first = report["requests"][0]
    assert (first["line"], first["query"]) == (1, "sofa u1")
    assert [(m["id"], m["from"], m["to"]) for m in first["moved"]] == [
        ("d2", 3, 2), ("d3", 4, 3), ("d4", 5, 4)]
    table = subprocess.run([*replay, "--no-progress"], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    assert "3 requests replayed, 3 would change: 3 results removed" in table.stdout
    assert "h1.example" in table.stdout and "By rule" in table.stdout


def test_the_progress_bar_counts_the_requests_on_stderr(tmp_path, served_config, capsys):
    capture = tmp_path / "c.jsonl"
    capture.write_bytes(capture_line({"documents": DOCS}) * 3)
    assert main(["replay", "--served", str(served_config), "--progress", "--json",
                 str(capture)]) == 0
    captured = capsys.readouterr()
    assert "3/3" in captured.err
    assert json.loads(captured.out)["summary"]["requests"] == 3
