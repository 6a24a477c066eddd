"""bench.mix: the locust pages reach Rearrange in process, and a figure comes out."""
from __future__ import annotations

import json
import re
import subprocess
import sys

from bench.mix import dump_pages
from tests.conftest import ROOT


def test_pages_are_the_locust_mix_with_a_user_per_request(tmp_path):
    pages = tmp_path / "pages.jsonl"
    dump_pages(pages, 200)
    bodies = [json.loads(line) for line in pages.read_bytes().splitlines()]
    assert len(bodies) == 200
    assert {len(b["documents"]) for b in bodies} <= {10, 20, 50, 100}
    users = [b["unit"]["user_id"] for b in bodies if "unit" in b]
    assert users and all(re.fullmatch(r"u-\d{5,6}", u) for u in users)
    assert len(set(users)) > 1  # the placeholder is replaced per request


def test_a_short_run_reports_microseconds_per_request():
    out = subprocess.run([sys.executable, "-m", "bench.mix", "--requests", "40", "--passes",
                          "1", "--rounds", "1", "--banlist", "1000"],
                         cwd=ROOT, capture_output=True, text=True, check=True, timeout=120).stdout
    row = re.search(r"this checkout\s+([\d.]+)\s+([\d.]+)", out)
    assert row is not None, out
    assert 0 < float(row[2]) <= float(row[1])
