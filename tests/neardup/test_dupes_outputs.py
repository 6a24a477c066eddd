"""`rearrange dupes` outputs: files checked before the run, numbers as people write them,
counts that say what they count."""
from __future__ import annotations

import csv
import json
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli.main import main
from app.neardup.dupes import histogram
from tests.corpus import corpus
from tests.neardup.test_dupes import SEED, table_rows, write_jsonl

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


# Numbers as people write them: a float printed with its binary noise (0.30000000000000004).
NOISE = re.compile(r"\d\.\d{11,}")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6),
                          st.one_of(st.integers(1, 200), st.integers(1, 10**6))),
                min_size=1, max_size=50), st.integers(1, 100))
def test_a_share_falls_in_the_bin_its_exact_value_is_in(fractions, bins):
    # shares are a count over a count, as containment is; the oracle is exact arithmetic.
    # Small counts put shares on the bounds (1/6 = 2/12), where floats go either way.
    shares = [Fraction(min(a, b), b) for a, b in fractions]
    expected = [0] * bins
    for share in shares:
        expected[min(int(share * bins), bins - 1)] += 1
    counts = histogram(np.array([s.numerator / s.denominator for s in shares]), bins)
    assert [c for _, _, c in counts] == expected
    assert [(lo, hi) for lo, hi, _ in counts] == [
        (float(round(Fraction(i, bins), 10)), float(round(Fraction(i + 1, bins), 10)))
        for i in range(bins)]


def test_a_share_on_a_bound_opens_its_bin_for_any_number_of_bins():
    for bins in range(1, 101):
        for k in (1, 3, 7):  # the share i / bins as a count over a count, several ways
            shares = np.array([i * k / (bins * k) for i in range(bins + 1)])
            assert [c for _, _, c in histogram(shares, bins)] == [1] * (bins - 1) + [2], bins


@pytest.mark.parametrize(("bins", "labels"), [
    (10, [f"0.{i}-{(i + 1) / 10:.1f}" for i in range(10)]),
    (20, [f"{i / 20:.2f}-{(i + 1) / 20:.2f}" for i in range(20)]),
    (8, [f"{i / 8:.3f}-{(i + 1) / 8:.3f}" for i in range(8)]),
    (3, ["0.000-0.333", "0.333-0.667", "0.667-1.000"]),
])
def test_histogram_bounds_print_as_people_write_them_in_every_output(tmp_path, capsys, bins,
                                                                      labels):
    # one page at exactly 0.3 of another: 3 of its 10 words' shingles (width 1)
    pages = write_jsonl(tmp_path / "p.jsonl", [
        ("/a", "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9"), ("/b", "w0 w1 w2 x3 x4 x5 x6 x7 x8 x9 y0 y1")])
    report, data = tmp_path / "r.html", tmp_path / "r.json"
    assert main(["dupes", str(pages), "--width", "1", "--bins", str(bins), "--no-progress",
                 "--html", str(report), "--json", str(data)]) == 0
    out = capsys.readouterr().out
    rows = table_rows(out, "best containment per page")
    assert [r[0] for r in rows] == labels
    doc = json.loads(data.read_bytes())
    assert [f"{h['low']:g}-{h['high']:g}" for h in doc["histogram"]] == [
        f"{float(round(Fraction(i, bins), 10)):g}-{float(round(Fraction(i + 1, bins), 10)):g}"
        for i in range(bins)]
    # both pages share 0.3 of /a, 0.25 of /b: each in the bin its exact share is in
    at = {label: int(r[1]) for label, r in zip(labels, rows, strict=True)}
    assert at[labels[int(Fraction(3, 10) * bins)]] >= 1 and sum(at.values()) == 2
    titles = re.findall(r"<title>([^<]*): (\d+) pages</title>", report.read_text())
    assert [t for t, _ in titles] == labels
    for text in (out, data.read_text(), report.read_text()):
        assert not NOISE.search(text), NOISE.search(text)


def heading(out: str, start: str) -> str:
    [line] = [line for line in out.splitlines() if line.startswith(start)]
    return line


def test_the_pair_count_says_whether_it_counts_lsh_candidates_or_every_pair(tmp_path, capsys):
    # One-word shingles: nearly every two pages share a word, few are alike enough for LSH.
    pages = write_jsonl(tmp_path / "p.jsonl", corpus(150, seed=3))
    data = tmp_path / "all.json"
    assert main(["dupes", str(pages), "--width", "1", "--method", "exact",
                 "--no-progress"]) == 0
    exact = heading(capsys.readouterr().out, "pairs sharing text: ")
    every = int(re.match(r"pairs sharing text: (\d+) of 11175 \(all compared exactly\); at "
                         r"or over the threshold: \d+", exact)[1])
    assert main(["dupes", str(pages), "--width", "1", "--method", "minhash", "--no-progress",
                 "--json", str(data), "--all-candidates"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(data.read_bytes())
    line = heading(out, "candidate pairs (LSH): ")
    over = sum(max(p["in"], p["out"]) >= 0.5 for p in doc["pairs"])
    sharing = sum(p["in"] > 0 for p in doc["pairs"])
    assert line.startswith(f"candidate pairs (LSH): {doc['lsh']['candidates']}; verified pairs "
                           f"sharing text: {sharing}; at or over the threshold: {over}")
    assert f"proposed {doc['lsh']['candidates']} candidate pairs" in out
    assert 0 < sharing < every / 2  # what LSH proposed, not every pair sharing text
    assert "pairs sharing text: " not in out.replace("verified pairs sharing text: ", "")


@pytest.mark.parametrize("method", ["exact", "minhash"])
def test_files_hold_the_pairs_at_the_threshold_and_every_scored_one_only_when_asked(
        tmp_path, capsys, method):
    pages = write_jsonl(tmp_path / "p.jsonl", corpus(150, seed=3))
    files = {}
    for flag in ([], ["--all-candidates"]):
        csv_file, json_file = tmp_path / f"p{len(flag)}.csv", tmp_path / f"p{len(flag)}.json"
        assert main(["dupes", str(pages), "--width", "1", "--method", method, "--no-progress",
                     "--csv", str(csv_file), "--json", str(json_file), *flag]) == 0
        counts = re.search(r"sharing text: (\d+)\D.*at or over the threshold: (\d+)",
                           capsys.readouterr().out)
        rows = list(csv.DictReader(csv_file.read_text(encoding="utf-8").splitlines()))
        doc = json.loads(json_file.read_bytes())
        assert [(r["url_a"], r["url_b"]) for r in rows] == [
            (p["url_a"], p["url_b"]) for p in doc["pairs"]]
        files[bool(flag)] = rows, int(counts[1]), int(counts[2])
    (over, sharing, at), (every, sharing_again, _) = files[False], files[True]
    assert len(over) == at > 0 and {r["over_threshold"] for r in over} == {"1"}
    assert all(max(float(r["in"]), float(r["out"])) >= 0.5 for r in over)
    assert len(every) == sharing == sharing_again > at  # and those below the threshold
    assert {r["over_threshold"] for r in every} == {"0", "1"}
