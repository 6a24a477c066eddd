"""`rearrange dupes --compare previous.json`: clusters matched across two runs by their pages."""
from __future__ import annotations

import json
import random
import re

import pytest

from app.cli.main import main
from app.errors import InputFileError
from app.neardup.compare import compare, differences, load, summary
from tests.corpus import audit_site
from tests.neardup.test_dupes import table_rows, write_jsonl


def test_clusters_are_matched_by_their_pages_not_their_representative():
    before = [["/a1", "/a2", "/a3", "/a4"], ["/b1", "/b2"], ["/c1", "/c2", "/c3"]]
    after = [["/a3", "/a2", "/a4"],  # a1 fixed: a new representative, one page fewer
             ["/b1", "/b2", "/b3", "/b4"],  # grew
             ["/d1", "/d2"],  # appeared; c went away
             ["/c3", "/x1", "/x2", "/x3"]]  # shares 1 of 3 of c's: under MATCH, appeared
    changes = compare(before, after)
    kinds = {(c.kind, c.representative) for c in changes}
    assert kinds == {("appeared", "/d1"), ("appeared", "/c3"), ("went away", "/c1"),
                     ("grew", "/b1"), ("shrank", "/a3")}
    [shrank] = [c for c in changes if c.kind == "shrank"]
    assert shrank.as_json()["left"] == ["/a1"] and shrank.as_json()["joined"] == []
    assert summary(changes) == {"appeared": 2, "went away": 1, "grew": 1, "shrank": 1,
                                "changed": 0, "same": 0, "pages_before": 9, "pages_after": 13}
    assert [c.kind for c in changes] == ["appeared", "appeared", "went away", "grew", "shrank"]


def test_a_cluster_split_in_two_matches_one_half_and_the_other_appears():
    before = [["/p1", "/p2", "/p3", "/p4", "/p5", "/p6"]]
    after = [["/p1", "/p2", "/p3", "/p4"], ["/p5", "/p6"]]
    changes = compare(before, after)
    assert sorted((c.kind, len(c.before), len(c.after)) for c in changes) == [
        ("appeared", 0, 2), ("shrank", 6, 4)]


@pytest.mark.parametrize(("content", "message"), [
    (b"{", "not JSON"),
    (b'{"pages": 3}', 'no "clusters" list'),
    (b'{"clusters": [{"pages": "/a"}]}', "clusters[0].pages is not a list of urls"),
])
def test_a_file_that_is_not_an_audit_is_refused_with_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "old.json"
    path.write_bytes(content)
    with pytest.raises(InputFileError, match=re.escape(message)):
        load(path)


def test_same_size_other_pages_is_a_change_and_unlike_runs_are_named():
    [change] = compare([["/a", "/b", "/c"]], [["/a", "/b", "/d"]])
    assert (change.kind, change.as_json()["left"], change.as_json()["joined"]) == (
        "changed", ["/c"], ["/d"])
    assert summary([change])["changed"] == 1
    then = {"threshold": 0.5, "measure": "containment", "width": 10, "reworded": False}
    now = {**then, "width": 1, "reworded": True}
    assert differences(then, now) == ["width 10 then, 1 now", "reworded False then, True now"]
    assert differences({}, now) == []  # an older file that does not say


def test_two_runs_say_which_clusters_the_fixes_shrank(tmp_path, capsys):
    site, _ = audit_site()
    first = write_jsonl(tmp_path / "before.jsonl", site)
    assert main(["dupes", str(first), "--json", str(tmp_path / "before.json"),
                 "--no-progress"]) == 0
    rng = random.Random(1)  # six pages of one template rewritten: no text of it left
    fixed = [(u, " ".join(rng.sample(t.split(), len(t.split())))
              if u in {f"/t0/p{i}" for i in range(6)} else t) for u, t in site]
    second = write_jsonl(tmp_path / "after.jsonl", fixed)
    capsys.readouterr()
    assert main(["dupes", str(second), "--compare", str(tmp_path / "before.json"),
                 "--json", str(tmp_path / "after.json"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "0 appeared, 0 went away, 0 grew, 1 shrank, 0 changed pages, 7 the same" in out
    [row] = table_rows(out, "clusters against")
    assert row[:3] == ["shrank", "13", "7"]
    doc = json.loads((tmp_path / "after.json").read_bytes())
    [shrank] = [c for c in doc["comparison"]["clusters"] if c["change"] == "shrank"]
    assert shrank["left"] == [f"/t0/p{i}" for i in range(6)]
    # a run made otherwise is compared, with a warning that says how it differs
    assert main(["dupes", str(second), "--compare", str(tmp_path / "before.json"),
                 "--reworded", "--no-progress"]) == 0
    assert "was made with threshold 0.5 then, 0.25 now; width 10 then, 1 now" in (
        capsys.readouterr().err)
    # a missing file is refused before any page is read
    assert main(["dupes", str(second), "--compare", str(tmp_path / "nope.json"),
                 "--no-progress"]) == 1
    assert "--compare" in capsys.readouterr().err
