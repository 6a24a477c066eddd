"""The CLI's friction of issue 49, against one real `rearrange serve`: the service options
before or after the command, `banlist history` newest first a page at a time with the next
page's exact command, `--since` a time, times as ISO 8601, refusals in the project's words,
and the exit codes docs/cli.md gives."""
from __future__ import annotations

import json
import re
import shlex
import time

import httpx
import pytest

from app.cli.main import main
from app.config.settings import Settings
from bench.replicas import free_port
from tests.cli.test_client import cli
from tests.conftest import ROOT
from tests.threaded import serving

EPOCH = re.compile(r"\b1\d{9}\b")  # epoch seconds of 2001 to 2286


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """The URL of a service, in this process on a thread (no server process to start),
    holding five bans by tns and a host the spam scores banned."""
    tmp = tmp_path_factory.mktemp("friction")
    settings = Settings(config=ROOT / "config" / "rules.yaml", banlist_path=tmp / "b.jsonl",
                        admin_tokens="tns:t,viewer:v:read", audit_log=None,
                        config_poll_seconds=0, redis_url=None, banlist_seed=None)
    with serving(settings) as base:
        with httpx.Client(base_url=base, headers={"Authorization": "Bearer t"}) as http:
            for i in range(5):
                http.post("/v1/banlist/entries", json={
                    "scope": "host", "value": f"h{i}.example", "reason": "spam"}
                ).raise_for_status()
            http.post("/v1/sanctions/scores", json={"observations": [
                {"host": "spam.example", "spam_score": 0.95, "observed_at": time.time()}]}
            ).raise_for_status()
        yield base


def test_the_service_options_go_before_or_after_the_command(live):
    dead = f"http://127.0.0.1:{free_port()}"
    for argv in (("--url", live, "banlist", "history"), ("banlist", "history", "--url", live),
                 ("banlist", "--url", live, "history"),
                 ("--url", dead, "banlist", "history", "--url", live, "--timeout", "5"),
                 ("sanctions", "show", "spam.example", "--url", live, "--token", "v"),
                 ("config", "versions", "--token", "v", "--url", live)):
        code, out, err = cli(*argv)
        assert code == 0 and err == "", (argv, err)
    code, out, err = cli("--token", "t", "banlist", "add", "host", "x.example", "--reason",
                         "r", "--url", live)
    assert code == 0 and "banlist version" in out, err
    code, _, err = cli("--url", live, "banlist", "lookup", "https://a.example/", "--url", dead)
    assert (code, err) == (3, f"cannot reach {dead}: connection refused\n")  # the last given


def test_json_goes_before_the_command_too_where_it_prints_json(live, capsys):
    code, out, _ = cli("--json", "banlist", "--url", live, "lookup", "https://h1.example/")
    assert code == 0 and json.loads(out)["banned"] is True
    code, out, _ = cli("banlist", "--json", "history", "--url", live, "--limit", "1")
    assert code == 0 and json.loads(out)["more"] is True
    for argv, problem in ((["--json", "banlist", "add", "host", "y.example", "--reason", "r"],
                           "--json: `rearrange banlist add` prints no JSON"),
                          (["--json", "dupes", "pages.jsonl"],
                           "--json: `rearrange dupes` takes --json FILE (or --json - for "
                           "stdout)")):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2 and capsys.readouterr().err.endswith(problem + "\n")


def test_history_shows_the_newest_page_and_the_command_of_the_one_before(live):
    argv = ["banlist", "history", "--url", live, "--limit", "2", "--actor", "tns",
            "--since", "1h"]
    seen = []
    while True:
        code, out, err = cli(*argv)
        assert code == 0, err
        *rows, footer = out.splitlines()[1:]
        seen += [int(row.split()[0]) for row in rows]
        if "; older: " not in footer:
            break
        assert footer.startswith("2 changes, newest first; older: rearrange banlist history "
                                 f"--before {seen[-1]} --url {live} --limit 2 --actor tns "
                                 "--since 20")  # the instant 1h was, the same on every page
        argv = shlex.split(footer.split("; older: ")[1])[1:]
    want = httpx.get(f"{live}/v1/banlist/changes", params={"actor": "tns"},
                     headers={"Authorization": "Bearer v"}).json()["changes"]
    assert seen == [c["seq"] for c in reversed(want)] and len(seen) > 4
    last = len(rows)
    assert footer == f"{last} change{'s' if last > 1 else ''}, newest first; none older"
    code, out, _ = cli("banlist", "history", "--url", live, "--after-seq", "4", "--limit", "1")
    assert out.splitlines()[1].split()[0] == "5"
    assert out.splitlines()[-1] == (f"1 change, oldest first; newer: rearrange banlist "
                                    f"history --after-seq 5 --url {live} --limit 1")


def test_since_is_a_time_everywhere_and_a_seq_is_after_seq(live, capsys):
    code, out, _ = cli("banlist", "history", "--url", live, "--since", "2099-01-01")
    assert (code, out) == (0, "no changes\n")
    with pytest.raises(SystemExit) as exc:
        main(["banlist", "history", "--url", live, "--since", "3"])
    assert exc.value.code == 2
    assert "the changes after a seq are --after-seq 3" in capsys.readouterr().err


def test_times_are_iso_8601_in_a_sanction_s_history(live):
    code, out, err = cli("sanctions", "--url", live, "--token", "t", "clear", "spam.example",
                         "--reason", "appeal granted", "--pin", "7d")
    assert code == 0, err
    code, out, _ = cli("sanctions", "--url", live, "show", "spam.example", "--token", "v")
    assert code == 0 and "spam_score 0.95 at 20" in out and "pinned clean until 20" in out
    assert not EPOCH.search(out), out


def test_a_refusal_is_in_the_project_s_words_naming_the_option_s_field(live):
    code, out, err = cli("banlist", "add", "host", "z.example", "--reason", "r", "--expires-at",
                         "2026-12-31T00:00:00", "--url", live, "--token", "t")
    assert (code, out) == (1, "")
    assert err == ("refused: HTTP 422: expires_at: a time with its offset, such as "
                   "2026-12-31T00:00:00Z (got \"2026-12-31T00:00:00\")\n")
    code, _, err = cli("banlist", "add", "host", "z.example", "--reason", "r", "--url", live)
    assert (code, err) == (1, "refused: HTTP 401: Authorization: Bearer token required\n")


@pytest.mark.parametrize(("argv", "env", "problem"), [
    (["banlist", "history", "--url", "http://[::1"], None,
     "argument --url: 'http://[::1' is not a URL: "),
    (["--url", "127.0.0.1:8080", "config", "show"], None,
     "argument --url: '127.0.0.1:8080' is not a URL such as http://127.0.0.1:8080 (http or "
     "https, and a host)"),
    (["sanctions", "show", "a.example"], "localhost:8080",
     "REARRANGE_URL: 'localhost:8080' is not a URL such as "),
])
def test_a_url_that_is_none_is_a_usage_error_not_a_service_unreachable(argv, env, problem,
                                                                       capsys, monkeypatch):
    if env is not None:
        monkeypatch.setenv("REARRANGE_URL", env)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and problem in err and "Traceback" not in err

