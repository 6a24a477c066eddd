"""The load test: its traffic is valid and exercises the rules, and `make load` runs end to end.

The locustfile is imported in a subprocess only: importing locust monkey-patches the
standard library with gevent, which must not happen inside the test process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from bench.load import counter_sum, memory_growth
from tests.conftest import ROOT

pytestmark = pytest.mark.python_path("tests the benchmark's own code")

DUMP_PAGES = """
import json, bench.locustfile as lf
for p in lf.PAGES_BUILT:
    body = p.body.replace(lf.UNIT.encode(), b"u-12345") if p.unit else p.body
    print(json.dumps({"name": p.name, "body": body.decode(), "unit": p.unit}))
"""


HOSTS = """
from locust.env import Environment
import bench.locustfile as lf
env = Environment(host="http://unused")
print(*(user(env).host for user in (lf.Frontend, lf.Frontend, lf.TrustAndSafety)))
"""


@pytest.mark.parametrize(("admin_url", "writer"), [("", "http://r1:8081"),
                                                   ("http://lb:8080/", "http://lb:8080")])
def test_the_writer_goes_to_the_admin_url_and_the_frontend_to_the_targets(admin_url, writer):
    """The staging compose file sends the T&S writer to the balancer's admin server
    (REARRANGE_ADMIN_URL) and the frontend's reranks to its public one."""
    env = {**os.environ, "REARRANGE_TARGETS": "http://r1:8081,http://r2:8081",
           "REARRANGE_ADMIN_URL": admin_url}
    out = subprocess.run([sys.executable, "-c", HOSTS], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=120, env=env).stdout.split()
    assert out == ["http://r1:8081", "http://r2:8081", writer]


@pytest.fixture(scope="module")
def pages() -> list[dict]:
    out = subprocess.run([sys.executable, "-c", DUMP_PAGES], cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=120).stdout
    return [json.loads(line) for line in out.splitlines()]


def test_every_page_of_the_mix_is_served_and_exercises_the_rules(client, pages):
    sizes, classes, profiles, rules = Counter(), Counter(), Counter(), Counter()
    for page in pages:
        body = json.loads(page["body"])
        sizes[len(body["documents"])] += 1
        classes[tuple(body["query"]["classes"])] += 1
        resp = client.post("/v1/rerank", content=page["body"],
                           headers={"content-type": "application/json"})
        assert resp.status_code == 200, (page["name"], resp.text[:300])
        got = resp.json()
        profiles[got["profile"]] += 1
        rules.update(r["rule"] for r in got["removed"])
        rules.update(c["rule"] for d in got["documents"] for c in d["collapsed"])
        assert bool(got["experiments"]) == page["unit"]
    assert set(sizes) == {10, 20, 50, 100}
    assert sizes[10] > sizes[20] > sizes[50] > 0 and sizes[100] > 0
    assert set(classes) == {("commercial",), ("ymyl",), ("navigational",), ()}
    assert set(profiles) == {"default", "commercial"}
    # texts with near-copies reach the near-duplicate rule; spam, adult and region filters act
    assert {"near_duplicates", "host_crowding", "safe_search", "spam_ban",
            "regional_removals"} <= set(rules), rules


def test_memory_is_flat_within_the_stated_threshold():
    assert memory_growth(400, 430, 32, 5) is None            # 30 MiB < 32 MiB
    assert memory_growth(1000, 1045, 32, 5) is None          # 45 MiB < 5 % of 1000
    assert "grew 33 MiB" in memory_growth(400, 433, 32, 5)
    assert "allowed 50 MiB" in memory_growth(1000, 1051, 32, 5)


def test_counter_sum_adds_every_labelled_sample():
    text = ("# HELP rearrange_rule_skipped_total x\n# TYPE rearrange_rule_skipped_total counter\n"
            'rearrange_rule_skipped_total{rule="near_duplicates",phase="diversify"} 3.0\n'
            'rearrange_rule_skipped_total{rule="other",phase="diversify"} 2.0\n'
            'rearrange_rule_skipped_created{rule="other"} 1.7e9\n'
            "rearrange_rule_skipped_totally 9.0\n")
    assert counter_sum(text, "rearrange_rule_skipped_total") == 5.0
    assert counter_sum("", "rearrange_rule_skipped_total") == 0.0


def test_make_load_runs_replicas_and_reports(tmp_path):
    """A short `python -m bench.load` with one replica: locust, the writer, the report."""
    run = subprocess.run(
        [sys.executable, "-m", "bench.load", "--seconds", "3", "--replicas", "1",
         "--users", "2", "--spawn-rate", "4", "--banlist", "100"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout
    assert "OK: 0 errors" in out
    rows = {line.split("  ")[0]: line.split() for line in out.splitlines()
            if line.startswith(("/v1/", "all requests"))}
    assert int(rows["all requests"][2]) > 100  # count column: the frontends did run
    assert int(rows["/v1/banlist/entries [add]"][2]) > 0  # the T&S writer wrote
    assert "RSS start" in out and "CPU over" in out and "skipped past" in out
