"""bench.http: the --against revision's worktree, wrk's threads; the --ceiling config
(bench.http and bench.pipeline)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.config.load import load_bytes, load_file
from app.config.pipeline import Phase
from bench import pipeline as bench_pipeline
from bench.http import revision_tree, wrk_threads
from bench.pipeline import ceiling_config
from tests.conftest import ROOT


def _git(*argv: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *argv], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_revision_tree_is_that_revision_imported_from_itself_and_then_removed(tmp_path):
    where = tmp_path / "rev"
    with revision_tree("HEAD", where) as tree:
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
