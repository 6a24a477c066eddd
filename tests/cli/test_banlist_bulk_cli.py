"""`rearrange banlist remove` with a filter (the count and a sample first, then a question)
and `banlist list` with filters, streamed as tab-separated lines, against a real service."""
from __future__ import annotations

import io
import json

import httpx
import pytest

from tests.api.test_live_server import start_server
from tests.cli.test_client import cli

WRITE = {"Authorization": "Bearer t"}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    proc, base, _ = start_server(tmp_path_factory.mktemp("bulk-cli"),
                                 REARRANGE_ADMIN_TOKENS="tns:t,viewer:v:read")
    yield base
    proc.terminate()
    proc.wait(10)


def wave(base: str, name: str, n: int) -> list[str]:
    """n bans of campaign `name` (hosts under NAME.example), in one import; their ids."""
    lines = b"".join(json.dumps({"scope": "host", "value": f"h{i}.{name}.example",
                                 "reason": f"campaign {name}"}).encode() + b"\n"
                     for i in range(n))
    got = httpx.post(f"{base}/v1/banlist/import", headers=WRITE, content=lines).json()
    return [str(i) for i in range(int(got["first_id"]), int(got["last_id"]) + 1)]


def count(base: str, **query: str) -> int:
    got: int = httpx.get(f"{base}/v1/banlist/entries", params=query).json()["total"]
    return got


def test_remove_shows_the_count_and_a_sample_then_asks(live, monkeypatch):
    ids = wave(live, "alpha", 25)
    svc = ("banlist", "--url", live, "--token", "t", "remove", "--reason-contains",
           "Campaign Alpha", "--reason", "undo alpha")
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    code, out, err = cli(*svc)
    assert code == 1 and err.endswith("refused: not confirmed: nothing removed (--yes "
                                      "removes without asking)\n"), err
    lines = out.splitlines()
    assert lines[0] == ("25 active entries match reason_contains='Campaign Alpha' (banlist "
                        f"version {ids[-1]})")
    assert lines[1].split() == ["ID", "SCOPE", "VALUE", "CREATED_AT", "ACTOR", "REASON"]
    assert [line.split()[0] for line in lines[2:22]] == ids[:20] and lines[22] == "… and 5 more"
    assert "remove these 25 entries? [y/N] " in err and count(live, actor="tns") >= 25
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    code, out, err = cli(*svc)
    assert code == 0, err
    assert out.splitlines()[-1] == ("removed 25 entries as one batch; banlist version "
                                    f"{int(ids[-1]) + 25}")
    assert count(live, reason_contains="campaign alpha") == 0


def test_dry_run_removes_nothing_and_yes_does_not_ask(live):
    wave(live, "beta", 3)
    svc = ("banlist", "--url", live, "--token", "t", "remove", "--value-suffix",
           ".beta.example", "--created-after", "1h", "--reason", "undo beta")
    code, out, err = cli(*svc, "--dry-run")
    assert (code, err) == (0, "") and out.startswith("3 active entries match value_suffix=")
    assert out.splitlines()[-1] == "nothing removed (--dry-run)"
    assert count(live, value_suffix=".beta.example") == 3
    code, out, err = cli(*svc, "--yes")
    assert (code, err) == (0, "") and "removed 3 entries as one batch" in out
    code, out, _ = cli(*svc, "--yes")  # nothing left: nothing asked, nothing removed
    assert code == 0 and out.startswith("0 active entries match") and "nothing removed" in out


def test_the_single_remove_stays_and_the_two_forms_do_not_mix(live):
    entry = wave(live, "gamma", 1)[0]
    base = ("banlist", "--url", live, "--token", "t", "remove")
    for argv in ((*base, "--reason", "r"), (*base, entry, "--actor", "tns", "--reason", "r"),
                 (*base, entry, "--reason", "r", "--yes")):
        code, out, err = cli(*argv)
        assert code == 2 and out == "" and ("not both" in err or "with a filter" in err), err
    with pytest.raises(SystemExit) as usage:  # argparse's own: the time is checked first
        cli(*base, "--created-before", "yesterday", "--reason", "r")
    assert usage.value.code == 2
    code, out, err = cli(*base, entry, "--reason", "appeal")
    assert code == 0 and out.startswith(f"removed entry {entry} (host h0.gamma.example)"), err


def test_list_streams_filtered_lines_and_keeps_json(live):
    ids = wave(live, "delta", 1200)  # two pages of the API
    svc = ("banlist", "--url", live, "--token", "v", "list", "--value-suffix", ".delta.example")
    code, out, err = cli(*svc, "--limit", "0")
    assert code == 0 and err == f"1200 of 1200 entries; banlist version {ids[-1]}\n"
    header, *rows = out.splitlines()
    assert header.split("\t") == ["ID", "SCOPE", "VALUE", "REGIONS", "CREATED_AT",
                                  "EXPIRES_AT", "ACTOR", "REASON"]
    assert [r.split("\t")[0] for r in rows] == ids
    assert rows[0].split("\t")[1:4] == ["host", "h0.delta.example", "-"]
    assert rows[0].split("\t")[5:] == ["-", "tns", "campaign delta"]
    code, out, err = cli(*svc, "--limit", "5", "--scope", "host")
    assert code == 0 and len(out.splitlines()) == 6
    assert err == (f"5 of 1200 entries; banlist version {ids[-1]}; more after {ids[4]} "
                   f"(--after {ids[4]})\n")
    code, out, _ = cli(*svc, "--limit", "2", "--after", ids[-2], "--json")
    got = json.loads(out)
    assert [e["id"] for e in got["entries"]] == ids[-1:] and got["total"] == 1200
    code, out, err = cli(*svc, "--scope", "url")
    assert code == 0 and out.count("\n") == 1 and err.startswith("0 of 0 entries")
