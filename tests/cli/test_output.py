"""The CLI's one table helper and one progress bar (rich), and what the offline commands
print with --json or when a file cannot be written."""
from __future__ import annotations

import io
import json
import os

from app.cli.main import main
from app.cli.progress import ProgressBar
from app.cli.tables import table
from tests.neardup.test_dupes import SEED, write_jsonl


def test_a_table_prints_cells_as_plain_text_one_row_a_line():
    out = io.StringIO()
    table([{"id": "1", "reason": "malware [bold]x[/bold] :x: [entry 2]", "regions": ["RU", "KZ"],
            "expires_at": None, "url": "https://a.example/" + "p" * 300}],
          ["id", "reason", "regions", "expires_at", "url"], out)
    header, row = out.getvalue().splitlines()
    assert header.split() == ["ID", "REASON", "REGIONS", "EXPIRES_AT", "URL"]
    assert header == header.rstrip()  # no padding after the last column
    assert "malware [bold]x[/bold] :x: [entry 2]" in row  # no markup, no emoji
    assert " RU,KZ " in row and " - " in row
    assert row.endswith("p…") and len(row.split()[-1]) == 100  # cut, not wrapped
    assert "\x1b" not in out.getvalue()  # no colour codes off a terminal


def test_the_progress_bar_is_drawn_only_on_a_terminal_unless_asked():
    assert not ProgressBar.of(None, io.StringIO()).enabled
    assert ProgressBar.of(True, io.StringIO()).enabled
    leader, follower = os.openpty()
    with os.fdopen(follower, "w") as terminal:
        assert ProgressBar.of(None, terminal).enabled
        assert not ProgressBar.of(False, terminal).enabled
    os.close(leader)


def test_each_stage_gets_a_bar_printed_as_it_ended_off_a_terminal():
    err = io.StringIO()
    with ProgressBar(err) as bar:
        for done in range(0, 1001, 100):
            bar("reading", done, 1000)
        bar("clustering", 3, 7)
    lines = err.getvalue().splitlines()
    assert [line.split()[0] for line in lines] == ["reading", "clustering"]
    assert "100% 1000/1000" in lines[0] and "43% 3/7" in lines[1]
    bar("writing csv", 1, 1)  # after close, a later stage starts another display
    bar.close()
    assert err.getvalue().splitlines()[-1].startswith("writing csv")
    off = io.StringIO()
    with ProgressBar(off, enabled=False) as bar:
        bar("reading", 1, 1)
    assert off.getvalue() == ""


def test_dupes_json_dash_prints_the_audit_instead_of_the_report(tmp_path, capsys):
    pages = write_jsonl(tmp_path / "p.jsonl", SEED)
    assert main(["dupes", str(pages), "--json", "-", "--no-progress"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["pages"] == 4 and doc["params"]["threshold"] == 0.5 and doc["clusters"]


def test_a_file_that_cannot_be_written_is_one_line_exit_1(tmp_path, capsys):
    pages = write_jsonl(tmp_path / "p.jsonl", SEED)
    missing = tmp_path / "no-such-dir" / "pairs.csv"
    assert main(["dupes", str(pages), "--csv", str(missing), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err == f"rearrange dupes: --csv {missing}: no such folder: {missing.parent}\n"


def test_a_request_file_that_is_not_there_is_one_line_exit_1(tmp_path, capsys):
    assert main(["run", str(tmp_path / "req.json")]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "", f"rearrange run: {tmp_path / 'req.json'}: No such file or directory\n")
