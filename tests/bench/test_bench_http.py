"""bench.http: the --against revision's worktree, wrk's threads, the servers stopped
whatever happens, the native server's missing data port, the rounds and the scaling summed
up; the --ceiling config (bench.http and bench.pipeline)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.config.load import load_bytes, load_file
from app.phases import Phase
from bench import http as bench_http
from bench import pipeline as bench_pipeline
from bench.http import distinct_ports, revision_tree
from bench.http_load import wrk_threads
from bench.http_report import scaling, summarize
from bench.http_servers import Server, cores_for, make, serving
from bench.pipeline import ceiling_config
from bench.replicas import free_port
from tests.conftest import ROOT

pytestmark = pytest.mark.python_path("tests the benchmark's own code")


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
        servers.append(Server(name, [sys.executable, "-c", _SERVER, str(port), str(pids_file),
                                     mode], dict(os.environ), port, cwd=tmp_path))
    with pytest.raises(SystemExit, match="did not start"), serving(servers):
        pytest.fail("the third server never answers: serving must not get here")
    started = [int(pid) for f in pids for pid in f.read_text().split()]
    assert len(started) == 6  # each server and its child ran
    assert not [pid for pid in started if _alive(pid)]


def test_serving_stops_every_server_and_its_children_on_the_way_out(tmp_path):
    port, pids_file = free_port(), tmp_path / "pids"
    server = Server("one", [sys.executable, "-c", _SERVER, str(port), str(pids_file), "answer"],
                    dict(os.environ), port, cwd=tmp_path)
    with serving([server]) as (proc,):
        started = [int(pid) for pid in pids_file.read_text().split()]
        assert proc.pid == started[0] and all(_alive(pid) for pid in started)
    assert not [pid for pid in started if _alive(pid)]


def _run(rps, p99, cpu_us=100.0):
    return {"rps": rps, "p99_ms": p99, "errors": 0, "p50_ms": 1.0, "requests": rps * 4,
            "cpu_us": cpu_us, "server_cores": 1.0, "load_cpu_us": 10.0, "load_cores": 0.3}


def test_the_ratios_are_medians_of_each_rounds_ratio_not_of_the_best_runs():
    # the machine slows down in round 2: both servers with it
    runs = {"echo": [_run(1000, 10, 30), _run(500, 20, 40), _run(1000, 10, 30)],
            "python": [_run(800, 12, 60), _run(400, 24, 100), _run(900, 30, 90)],
            "against": [_run(400, 10), _run(200, 10), _run(450, 10)]}
    figures = summarize(runs, reference="echo")
    assert figures["python"]["rps_x"] == pytest.approx(0.8)  # 0.8, 0.8, 0.9
    assert figures["python"]["p99_x"] == pytest.approx(1.2)  # 1.2, 1.2, 3.0
    assert figures["python"]["cpu_x"] == pytest.approx(2.5)  # 2.0, 2.5, 3.0
    assert figures["against"]["rps_x"] == pytest.approx(0.4)
    assert figures["python"]["vs_against_x"] == pytest.approx(2.0)  # 2.0, 2.0, 2.0
    assert figures["echo"]["rps_x"] == figures["echo"]["cpu_x"] == 1.0
    # absolute figures: the best run's req/s and p99, the median run's CPU per request
    assert (figures["python"]["rps"], figures["python"]["p99_ms"]) == (900, 30)
    assert figures["python"]["cpu_us"] == 90
    assert figures["python"]["rps_median"] == 800
    assert figures["python"]["server_cores_median"] == 1.0
    # the best runs alone would say 900 / 1000
    assert max(r["rps"] for r in runs["python"]) / 1000 == pytest.approx(0.9)


def test_a_server_that_served_nothing_has_no_ratio_rather_than_a_crash():
    figures = summarize({"echo": [_run(0, 0, float("nan"))], "python": [_run(500, 3)]},
                        reference="echo")
    assert math.isnan(figures["python"]["rps_x"]) and math.isnan(figures["python"]["p99_x"])


def test_scaling_is_the_most_threads_over_the_fewest_for_each_server_and_page():
    def row(threads, docs, servers):  # the best run 10 % above the median one
        return {"threads": threads, "profile": "default", "documents": docs,
                "servers": {name: {**_run(rps * 1.1, 5, cpu), "rps_median": rps,
                                   "load_cores": load + 0.1, "load_cores_median": load,
                                   "server_cores_median": 0.9}
                            for name, (rps, cpu, load) in servers.items()}}
    rows = [row(1, 20, {"echo": (1000, 30, 0.4), "python": (300, 100, 0.2)}),
            row(1, 100, {"echo": (500, 60, 0.3)}),
            row(2, 20, {"echo": (1900, 33, 0.7), "python": (500, 120, 0.3)})]
    got = {(s["server"], s["documents"]): s for s in scaling(rows)}
    assert set(got) == {("echo", 20), ("python", 20)}  # 100 docs: one thread count only
    assert got["echo", 20]["threads"] == [1, 2]
    assert got["echo", 20]["rps"] == [1000, 1900]  # the median runs', not the best ones'
    assert got["echo", 20]["rps_x"] == pytest.approx(1.9)
    assert got["echo", 20]["cpu_x"] == pytest.approx(1.1)
    assert got["echo", 20]["load_cores"] == [0.4, 0.7]  # the median runs', too
    assert got["echo", 20]["server_cores"] == [0.9, 0.9]
    assert got["python", 20]["rps_x"] == pytest.approx(500 / 300)


def test_the_native_server_is_rearrange_serve_with_its_data_port_set():
    native = make("native", 2, 9001, {"X": "1"}, echo=None, control_port=9002)
    assert native.argv[-4:] == ["--workers", "2", "--port", "9002"]
    assert native.env == {"X": "1", "REARRANGE_DATA_PORT": "9001"}
    assert (native.port, native.control_port, native.path) == (9001, 9002, "/v1/rerank")
    python = make("python", 1, 9003, {"X": "1"}, echo=None)
    assert python.argv[-4:] == ["--workers", "1", "--port", "9003"]
    # its data port anywhere free: the control port is measured
    assert (python.control_port, python.env) == (None, {"X": "1", "REARRANGE_DATA_PORT": "0"})
    # several: uvicorn's worker processes (`serve --workers N` is N data-port threads)
    processes = make("python", 2, 9006, {"X": "1"}, echo=None)
    assert processes.argv[-5:] == ["--workers", "2", "--port", "9006", "app.main:app"]
    echo = make("echo-serde", 2, 9004, {}, echo=Path("/bin/echo-floor"))
    assert echo.argv == ["/bin/echo-floor", "--port", "9004", "--threads", "2", "--serde"]
    pgo = make("echo-pgo", 1, 9007, {}, echo=Path("/bin/echo-floor"),
               echo_pgo=Path("/bin/echo-pgo"))
    assert pgo.argv == ["/bin/echo-pgo", "--port", "9007", "--threads", "1"]
    with pytest.raises(ValueError, match="echo-pgo needs its build"):
        make("echo-pgo", 1, 9008, {}, echo=Path("/bin/echo-floor"))
    with pytest.raises(SystemExit, match="unknown server 'granian'"):
        make("granian", 1, 9005, {}, echo=None)


def test_a_native_server_whose_data_port_never_answers_is_stopped_with_a_clear_error(tmp_path):
    control, data = distinct_ports(2)
    pids_file = tmp_path / "pids"
    # answers /healthz on its control port only, as `rearrange serve` without the listener
    server = Server("native", [sys.executable, "-c", _SERVER, str(control), str(pids_file),
                               "answer"], dict(os.environ), data, cwd=tmp_path,
                    control_port=control, data_timeout=1.0)
    with pytest.raises(SystemExit, match=f"answered on its control port {control} but not "
                                         f"on its data port {data}.*no native data-plane"), \
            serving([server]):
        pytest.fail("the data port never answers: serving must not get here")
    started = [int(pid) for pid in pids_file.read_text().split()]
    assert len(started) == 2 and not [pid for pid in started if _alive(pid)]


@pytest.mark.parametrize("argv, message", [
    (["--servers", "echo,granian"], "unknown granian"),
    (["--fixed-rate", "70"], "a fraction of the maximum"),
    (["--quota", "1.5"], "--quota: a fraction of one core"),
    (["--quota", "0"], "--quota: a fraction of one core"),
])
def test_a_bad_command_line_fails_before_anything_is_built_or_started(capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        bench_http.main(argv)
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_distinct_ports_are_distinct():
    ports = distinct_ports(6)
    assert len(set(ports)) == 6


def test_servers_are_pinned_only_when_wrk_keeps_a_core_of_its_own():
    assert cores_for(1, {0, 1}) == ({0}, {1})
    assert cores_for(2, {0, 1}) is None
    assert cores_for(2, {3, 5, 8, 9}) == ({3, 5}, {8, 9})


def test_engine_adds_a_native_server_on_that_build_with_its_own_banlist_copy(tmp_path):
    log = tmp_path / "banlist.jsonl"
    log.write_text("{}\n")
    tree = tmp_path / "engine"
    args = bench_http.argparse.Namespace(engine=tmp_path / "_engine.so", ceiling=False)
    ((name, kind, env, cwd),) = bench_http.extra_servers(
        args, tmp_path, {"REARRANGE_BANLIST_PATH": str(log)}, log, against=None,
        engine_tree=tree)
    assert (name, kind, cwd) == ("engine", "native", tree)
    # its own copy: an embedded store appends to its log
    assert Path(env["REARRANGE_BANLIST_PATH"]) != log
    assert Path(env["REARRANGE_BANLIST_PATH"]).read_text() == "{}\n"
    server = make(kind, 1, 9101, env, echo=None, control_port=9102, cwd=cwd)
    assert (server.cwd, server.port, server.control_port) == (tree, 9101, 9102)
