"""bench.http --against: the other revision is checked out, served from, and cleaned up."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.http import revision_tree
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
