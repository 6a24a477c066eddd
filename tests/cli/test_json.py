"""Every read command's --json, parsed, and the exit codes every command keeps (0 ok, 1 a
finding or a refusal, 2 usage, 3 the service unreachable), against a real `rearrange serve`."""
from __future__ import annotations

import json
import time

import httpx
import pytest

from app.cli.main import main
from bench.replicas import free_port
from tests.api.test_live_server import start_server
from tests.cli.test_client import cli
from tests.conftest import ROOT

WRITE, READ = {"Authorization": "Bearer t"}, {"Authorization": "Bearer v"}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A service with two bans (one of an org group) and a sanctioned host."""
    proc, base, _ = start_server(tmp_path_factory.mktemp("cli-json"),
                                 REARRANGE_ADMIN_TOKENS="tns:t,viewer:v:read")
    with httpx.Client(base_url=base, headers=WRITE) as http:
        http.put("/v1/banlist/groups/acme", json={"domains": ["acme.com", "acme-shop.net"],
                                                  "reason": "one owner"}).raise_for_status()
        for body in ({"scope": "host", "value": "b.example", "reason": "malware [manual]"},
                     {"scope": "org", "value": "acme", "reason": "court order"}):
            http.post("/v1/banlist/entries", json=body).raise_for_status()
        http.post("/v1/sanctions/scores", json={"observations": [
            {"host": "spam.example", "spam_score": 0.95, "observed_at": time.time()}]}
        ).raise_for_status()
    yield base
    proc.terminate()
    proc.wait(10)




def as_json(*argv: str) -> dict:
    code, out, err = cli(*argv, "--json")
    assert code == 0 and err == "", err
    return json.loads(out)


def test_banlist_reads_print_the_service_s_answer(live):
    svc = ("banlist", "--url", live, "--token", "v")
    got = as_json(*svc, "lookup", "https://b.example/x")
    assert got["banned"] and got["matches"][0]["reason"] == "malware [manual]"
    got = as_json(*svc, "history")
    assert [c["op"] for c in got["changes"]] == ["add", "add", "add", "group"]  # newest first
    assert got["changes"][0]["entry"]["actor"] == "antispam"  # the sanction's ban
    assert got["more"] is False
    got = as_json(*svc, "list")
    assert got["total"] == 3 and got["next"] is None
    assert [e["value"] for e in got["entries"]] == ["b.example", "acme", "spam.example"]
    assert as_json(*svc, "groups")["groups"] == {"acme": ["acme.com", "acme-shop.net"]}


def test_banlist_list_pages_on_and_stops_at_limit(live):
    svc = ("banlist", "--url", live, "--token", "v", "list")
    first = as_json(*svc, "--limit", "1")
    assert [e["value"] for e in first["entries"]] == ["b.example"] and first["next"]
    rest = as_json(*svc, "--after", first["next"])
    assert [e["value"] for e in rest["entries"]] == ["acme", "spam.example"]
    assert rest["next"] is None
    code, out, err = cli(*svc)
    assert code == 0 and out.splitlines()[0].split()[:3] == ["ID", "SCOPE", "VALUE"]
    assert "malware [manual]" in out  # a cell is text, never rich markup
    assert "3 of 3 entries" in err  # the count on stderr: stdout is the entries alone


def test_config_reads(live):
    svc = ("config", "--url", live, "--token", "v")
    shown = as_json(*svc, "show")
    assert shown["source"].startswith("profiles:") and len(shown["version"]) == 16
    versions = as_json(*svc, "versions")["versions"]
    assert versions[0]["version"] == shown["version"]


def test_sanctions_show(live):
    got = as_json("sanctions", "--url", live, "--token", "v", "show", "spam.example")
    assert got["state"] == "banned" and got["history"][-1]["to"] == "banned"
    code, out, _ = cli("sanctions", "--url", live, "--token", "v", "show", "spam.example")
    assert code == 0 and out.startswith("spam.example (host): banned, score 0.95") and "AT" in out


@pytest.mark.parametrize(("argv", "line"), [
    (("banlist", "lookup", "http://"), "refused: HTTP 422: url: "),
    (("banlist", "list", "--after", "x"), "refused: HTTP 422: after: must be an entry id"),
    (("banlist", "history", "--limit", "5000"), "refused: HTTP 422: query.limit: "),
    (("config", "show"), "refused: HTTP 401: Authorization: "),
    (("config", "versions"), "refused: HTTP 401: Authorization: "),
    (("sanctions", "show", "not a host"), "refused: HTTP 422: host: "),
])
def test_a_refusal_is_exit_1_in_one_line(live, argv, line):
    group, *rest = argv
    code, out, err = cli(group, "--url", live, *rest, "--json")  # no token
    assert (code, out) == (1, "") and err.startswith(line), err
    assert err.count("\n") == 1


@pytest.mark.parametrize("argv", [
    ("banlist", "lookup", "https://a.example/"), ("banlist", "history"), ("banlist", "list"),
    ("banlist", "groups"), ("config", "show"), ("config", "versions"),
    ("sanctions", "show", "a.example"), ("sanctions", "clear", "a.example", "--reason", "r"),
])
def test_no_answer_is_exit_3(argv):
    base = f"http://127.0.0.1:{free_port()}"
    group, *rest = argv
    code, out, err = cli(group, "--url", base, *rest)
    assert (code, out, err) == (3, "", f"cannot reach {base}: connection refused\n")


def test_srm_flagged_is_a_finding_and_an_unreachable_service_exit_3(tmp_path):
    skewed = tmp_path / "skewed.prom"
    skewed.write_text(
        "# TYPE rearrange_experiment_assignments_total counter\n"
        "rearrange_experiment_assignments_total{experiment=\"antispam_v7\","
        "variant=\"control\"} 5400.0\nrearrange_experiment_assignments_total{"
        "experiment=\"antispam_v7\",variant=\"treatment\"} 4600.0\n")
    config = str(ROOT / "config" / "rules.yaml")
    code, out, _ = cli("experiments", "srm", "--file", str(skewed), "--config", config, "--json")
    assert code == 1 and json.loads(out)["flagged"] == ["antispam_v7"]
    url = f"http://127.0.0.1:{free_port()}/metrics"
    code, out, err = cli("experiments", "srm", "--url", url, "--config", config)
    assert (code, out) == (3, "") and err == f"cannot reach {url}: connection refused\n"


def test_check_config_json(tmp_path):
    doc = as_json("check-config", str(ROOT / "config" / "rules.yaml"))
    assert doc["valid"] and doc["profiles"]["commercial"][0] == {
        "phase": "pre-filter", "rule": "banlist", "python": False, "enabled": True,
        "windowed": False}
    assert doc["experiments"][0]["name"] == "antispam_v7"
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles:\n  default:\n    rerank: [{sandbox_damping: {beta: 2}}]\n")
    code, out, err = cli("check-config", str(bad), "--json")
    got = json.loads(out)
    assert code == 1 and got["valid"] is False and "sandbox_damping" in got["problem"]
    assert err.count("\n") == 1


def test_run_json_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    request = tmp_path / "req.json"
    request.write_text(json.dumps({"request_id": "r", "documents": [
        {"id": "a", "url": "http://ok.example/x", "score": 1}]}))
    code, out, _ = cli("run", str(request), "--json")
    assert code == 0 and out.count("\n") == 1 and json.loads(out)["request_id"] == "r"


def test_usage_errors_are_exit_2(capsys):
    for argv in (["banlist", "history", "--from", "yesterday"], ["banlist", "lookup"],
                 ["config", "show", "--jsn"], ["sanctions"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2


def test_an_appeal_pins_the_host_clean_for_a_duration(live):
    """Near the end: it clears the host test_sanctions_show reads."""
    svc = ("sanctions", "--url", live)
    code, _, err = cli(*svc, "--token", "v", "clear", "spam.example", "--reason", "appeal")
    assert code == 1 and err.startswith("refused: HTTP 403: ")
    with pytest.raises(SystemExit) as exc:
        main([*svc, "clear", "spam.example", "--reason", "appeal", "--pin", "7 days"])
    assert exc.value.code == 2
    code, out, _ = cli(*svc, "--token", "t", "clear", "spam.example", "--reason", "appeal",
                       "--pin", "7d")
    assert code == 0 and out.startswith("spam.example: clean") and "pinned clean until" in out
    got = as_json(*svc, "show", "spam.example")
    assert got["ban_entry_id"] is None
    assert 7 * 86400 - 60 < got["pinned_until"] - time.time() <= 7 * 86400


def test_clearing_a_host_never_observed_needs_force(live):
    svc = ("sanctions", "--url", live, "--token", "t")
    code, out, err = cli(*svc, "clear", "never-seen.example", "--reason", "appeal")
    assert (code, out) == (1, "") and err.startswith(
        "refused: HTTP 409: host: never-seen.example has no observation"), err
    assert "--force" in err and err.count("\n") == 1
    code, out, _ = cli(*svc, "clear", "never-seen.example", "--reason", "r", "--force")
    assert code == 0 and out.startswith("never-seen.example: clean, no score yet; pinned "
                                        "clean until "), out
    until = as_json(*svc, "show", "never-seen.example")["pinned_until"]
    assert 90 * 86400 - 60 < until - time.time() <= 90 * 86400  # the default immunity
    code, out, _ = cli(*svc, "clear", "never-seen.example", "--reason", "r", "--permanent")
    assert code == 0 and "pinned clean for good" in out
    with pytest.raises(SystemExit) as exc:
        main([*svc, "clear", "x.example", "--reason", "r", "--pin", "7d", "--permanent"])
    assert exc.value.code == 2


def test_lookup_and_show_name_a_parent_s_quarantine(live):
    with httpx.Client(base_url=live, headers=WRITE) as http:
        http.post("/v1/sanctions/scores", json={"observations": [
            {"domain": "yellow.example", "spam_score": 0.75, "observed_at": time.time()}]}
        ).raise_for_status()
    code, out, _ = cli("banlist", "--url", live, "lookup", "www.yellow.example")
    first, second = out.splitlines()[:2]
    assert code == 0 and first.startswith(
        "http://www.yellow.example/: not banned, QUARANTINED via yellow.example"), out
    assert second.startswith("quarantine entry ") and "demoted, by antispam" in second
    code, out, _ = cli("sanctions", "--url", live, "show", "www.yellow.example")
    assert code == 0 and out.startswith("www.yellow.example (host): clean, no score yet; "
                                        "but quarantined via yellow.example\n"), out


def test_an_import_draws_its_bars_on_request_only(live, tmp_path):
    """Last: it adds entries the reads above do not expect."""
    lines = tmp_path / "bans.ndjson"
    lines.write_text("".join(json.dumps({"scope": "host", "value": f"i{n}.example",
                                         "reason": "r"}) + "\n" for n in range(3)))
    svc = ("banlist", "--url", live, "--token", "t", "import", str(lines))
    code, out, err = cli(*svc, "--dry-run")
    assert (code, err) == (0, "") and "3 of 3 lines valid (dry run)" in out
    code, out, err = cli(*svc, "--progress")
    assert code == 0 and "imported 3 entries" in out
    validate, imported = err.splitlines()
    assert validate.startswith("validate") and " 3/3 " in validate
    assert imported.startswith("import") and " 3/3 " in imported
