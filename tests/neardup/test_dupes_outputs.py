"""`rearrange dupes` files: checked before the run, and holding what they say they hold."""
from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.main import main
from tests.neardup.test_dupes import SEED, write_jsonl

TARGETS = ("--csv", "--json", "--html", "--signatures")


def unreadable_pages(tmp_path: Path) -> Path:
    """Pages whose first line is not JSON: a run that read them would say so and stop."""
    pages = tmp_path / "pages.jsonl"
    pages.write_text('not json\n{"url": "/a", "text": "x"}\n')
    return pages


@pytest.mark.parametrize("option", TARGETS)
@pytest.mark.parametrize(("target", "problem"), [
    ("{tmp}/nope/out.txt", "no such folder: {tmp}/nope"),
    ("{tmp}", "is a folder"),
    ("{tmp}/pages.jsonl/out.txt", "not a folder: {tmp}/pages.jsonl"),
    ("/proc/rearrange-dupes-out.txt", "cannot write: "),  # procfs takes no new file, root's
], ids=["missing folder", "a folder", "under a file", "procfs"])
def test_a_target_that_cannot_be_written_fails_before_the_pages_are_read(
        tmp_path, capsys, option, target, problem):
    pages = unreadable_pages(tmp_path)
    path, problem = (s.format(tmp=tmp_path) for s in (target, problem))
    code = main(["dupes", str(pages), option, path, "--progress"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"rearrange dupes: {option} {path}: {problem}" in err
    # Had the pages been read, the first line would have stopped the run; no stage started.
    assert "not valid JSON" not in err and "reading" not in err


def test_the_check_leaves_the_writable_targets_as_they_were(tmp_path, capsys):
    pages = unreadable_pages(tmp_path)
    kept = tmp_path / "old.csv"
    kept.write_text("last month's pairs\n")
    code = main(["dupes", str(pages), "--csv", str(kept), "--json", str(tmp_path / "new.json"),
                 "--signatures", str(tmp_path / "sig.jsonl"),
                 "--html", str(tmp_path / "missing" / "r.html"), "--no-progress"])
    assert code == 1
    assert f"--html {tmp_path / 'missing' / 'r.html'}: no such folder" in capsys.readouterr().err
    assert kept.read_text() == "last month's pairs\n"  # opened to check, not truncated
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.csv", "pages.jsonl"]


def test_two_options_naming_one_file_is_a_usage_error(tmp_path, capsys):
    pages = write_jsonl(tmp_path / "p.jsonl", SEED)
    same = tmp_path / "out"
    code = main(["dupes", str(pages), "--csv", str(same), "--html", f"{tmp_path}/./out",
                 "--no-progress"])
    assert code == 2
    assert "rearrange dupes: --csv and --html name the same file" in capsys.readouterr().err
    assert not same.exists()


def test_json_on_stdout_is_not_a_file_to_check(tmp_path, capsys):
    pages = write_jsonl(tmp_path / "p.jsonl", SEED)
    assert main(["dupes", str(pages), "--json", "-", "--no-progress"]) == 0
    assert '"pages": 4' in capsys.readouterr().out
