"""bench.http: the --against revision's worktree, wrk's threads, the servers stopped
whatever happens; the --ceiling config (bench.http and bench.pipeline)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.config.load import load_bytes, load_file
from app.phases import Phase
from bench import pipeline as bench_pipeline
from bench.http import cores_for, revision_tree, round_ratios, serving, wrk_threads
from bench.pipeline import ceiling_config
from bench.replicas import free_port
from tests.conftest import ROOT


def _git(*argv: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *argv], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_revision_tree_is_that_revision_imported_from_itself_and_then_removed(tmp_path):
    where = tmp_path / "rev"
    # not built: what is tested is the checkout and its removal (the engine's build is
    # maturin's; a build here took 92 s of the suite's time)
    with revision_tree("HEAD", where, build=False) as tree:
        imported = subprocess.run([sys.executable, "-c", "import app; print(app.__file__)"],
                                  cwd=tree, capture_output=True, text=True, check=True).stdout
        assert Path(imported.strip()).resolve().is_relative_to(tree.resolve())
        assert (tree / "app" / "errors.py").read_text() == _git("show", "HEAD:app/errors.py")
        assert str(where) in _git("worktree", "list")
    assert not where.exists() and str(where) not in _git("worktree", "list")


def test_wrk_gets_the_cores_the_workers_leave_free():
    assert wrk_threads(1, 16, cores=2) == 1  # the server keeps its core
    assert wrk_threads(2, 16, cores=2) == 1  # never none
    assert wrk_threads(1, 16, cores=8) == 2  # at most two
    assert wrk_threads(2, 16, cores=3) == 1
    assert wrk_threads(1, 1, cores=8) == 1  # wrk needs a connection per thread


def test_ceiling_config_is_the_sample_with_only_its_depth_cut_and_its_experiments():
    sample = load_file(ROOT / "config" / "rules.yaml")
    ceiling = load_bytes(ceiling_config().encode(), "ceiling")
    (phase, step), = ceiling.profiles["default"].rules()
    sample_depth = next(s for p, s in sample.profiles["default"].rules() if s.rule.name == "depth")
    assert (phase, step.rule.name) == (Phase.TRIM, "depth")
    assert step.rule.params == sample_depth.rule.params
    assert [e.name for e in ceiling.experiments] == [e.name for e in sample.experiments] != []
    assert [e.variants for e in ceiling.experiments] == [e.variants for e in sample.experiments]


def test_ceiling_config_without_experiments_in_the_sample(tmp_path):
    sample = tmp_path / "rules.yaml"
    sample.write_text("profiles:\n  default:\n    pre-filter: [banlist]\n    trim: [depth]\n")
    ceiling = load_bytes(ceiling_config(sample).encode(), "ceiling")
    assert [s.rule.name for _, s in ceiling.profiles["default"].rules()] == ["depth"]
    assert ceiling.experiments == ()


@pytest.mark.parametrize("ceiling", [False, True])
def test_bench_pipeline_runs_the_ceiling_config_only_when_asked(tmp_path, capsys, ceiling):
    out = tmp_path / "figures.json"
    argv = ["--sizes", "5", "--iterations", "2", "--warmup", "0", "--banlist", "10",
            "--json", str(out)] + (["--ceiling"] if ceiling else [])
    assert bench_pipeline.main(argv) == 0
    report = json.loads(out.read_text())
    rules = [r["rule"] for r in report["sizes"][0]["rules"]]
    assert report["ceiling"] is ceiling
    assert (rules == ["depth"]) is ceiling and "depth" in rules
    assert ("config: the ceiling" in capsys.readouterr().out) is ceiling


def test_bench_pipeline_judges_the_engine_in_rounds_without_the_python_path(tmp_path):
    out = tmp_path / "figures.json"
    argv = ["--sizes", "5", "--iterations", "3", "--warmup", "0", "--banlist", "10",
            "--json", str(out)]
    assert bench_pipeline.main(argv) == 0
    size = json.loads(out.read_text())["sizes"][0]
    labels = {key: [m["label"][:3] for m in size[key]]
              for key in ("measurements", "with_python_path")}
    assert labels == {"measurements": ["(a)", "(c)"],
                      "with_python_path": ["(a)", "(b)", "(c)"]}
    for key in labels:  # each set divided by its own (a)
        assert size[key][0]["median_ratio"] == 1.0


# A server for `serving`: starts a child (a worker: it sleeps), writes both pids to argv[2],
# then answers /healthz on argv[1], or with argv[3] == "exit" leaves at once (its worker
# still running), as a server does that fails to start.
_SERVER = """
import http.server, os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
with open(sys.argv[2], "w") as fh:
    fh.write(f"{os.getpid()} {child.pid}")
if sys.argv[3] == "exit":
    sys.exit(1)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # reaped or not: a zombie is gone for this purpose
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "zombie" not in status.read_text()


def test_a_server_that_fails_to_start_stops_those_started_before_it_workers_and_all(
        tmp_path):
    servers, pids, ports = [], [], set()
    while len(ports) < 3:  # drawn before any binds: the system may hand one out twice
        ports.add(free_port())
    for (name, mode), port in zip([("first", "answer"), ("second", "answer"),
                                   ("third", "exit")], sorted(ports), strict=True):
        pids_file = tmp_path / name
        pids.append(pids_file)
        servers.append(([sys.executable, "-c", _SERVER, str(port), str(pids_file), mode],
                        dict(os.environ), port, tmp_path))
    with pytest.raises(SystemExit, match="did not start"), serving(servers):
        pytest.fail("the third server never answers: serving must not get here")
    started = [int(pid) for f in pids for pid in f.read_text().split()]
    assert len(started) == 6  # each server and its child ran
    assert not [pid for pid in started if _alive(pid)]


def test_serving_stops_every_server_and_its_children_on_the_way_out(tmp_path):
    port, pids_file = free_port(), tmp_path / "pids"
    server = ([sys.executable, "-c", _SERVER, str(port), str(pids_file), "answer"],
              dict(os.environ), port, tmp_path)
    with serving([server]) as (proc,):
        started = [int(pid) for pid in pids_file.read_text().split()]
        assert proc.pid == started[0] and all(_alive(pid) for pid in started)
    assert not [pid for pid in started if _alive(pid)]


def test_the_ratios_are_medians_of_each_rounds_ratio_not_of_the_best_runs():
    def run(rps, p99):
        return {"rps": rps, "p99_ms": p99, "errors": 0, "p50_ms": 1.0}
    # the machine slows down in round 2: both servers with it
    runs = {"bare": [run(1000, 10), run(500, 20), run(1000, 10)],
            "rearrange": [run(800, 12), run(400, 24), run(900, 30)],
            "against": [run(400, 10), run(200, 10), run(450, 10)]}
    ratios = round_ratios(runs)
    assert ratios["rearrange_rps_x"] == pytest.approx(0.8)  # 0.8, 0.8, 0.9
    assert ratios["rearrange_p99_x"] == pytest.approx(1.2)  # 1.2, 1.2, 3.0
    assert ratios["against_rps_x"] == pytest.approx(0.4)
    assert ratios["vs_against_x"] == pytest.approx(2.0)  # 2.0, 2.0, 2.0
    # the best runs alone would say 900 / 1000
    assert max(r["rps"] for r in runs["rearrange"]) / 1000 == pytest.approx(0.9)


def test_servers_are_pinned_only_when_wrk_keeps_a_core_of_its_own():
    assert cores_for(1, {0, 1}) == ({0}, {1})
    assert cores_for(2, {0, 1}) is None
    assert cores_for(2, {3, 5, 8, 9}) == ({3, 5}, {8, 9})
