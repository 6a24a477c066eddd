"""bench.http: the --against revision's worktree, and how many threads wrk gets."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.http import revision_tree, wrk_threads
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
        assert (tree / "app" / "pipeline.py").read_text() == _git("show", "HEAD:app/pipeline.py")
        assert str(where) in _git("worktree", "list")
    assert not where.exists() and str(where) not in _git("worktree", "list")


def test_wrk_gets_the_cores_the_workers_leave_free():
    assert wrk_threads(1, 16, cores=2) == 1  # the server keeps its core
    assert wrk_threads(2, 16, cores=2) == 1  # never none
    assert wrk_threads(1, 16, cores=8) == 2  # at most two
    assert wrk_threads(2, 16, cores=3) == 1
    assert wrk_threads(1, 1, cores=8) == 1  # wrk needs a connection per thread
