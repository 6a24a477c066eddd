"""Without redis-server on PATH, a run that collected Redis tests stops before the first one
with one line saying how to install it (tests/conftest.py), not an error for each."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.redis_server import INSTALL, NO_REDIS


@pytest.mark.parametrize("n", [1, 2])
def test_a_fresh_redis_server_answers(redis_server, n):
    """Two of the smallest Redis tests: what the run below collects."""
    with redis_server.client() as r:
        assert r.ping() and r.dbsize() == 0
        r.set("n", n)


def test_without_redis_server_the_run_stops_at_once_in_one_line(tmp_path):
    bare = tmp_path / "bin"  # a PATH with nothing on it: no redis-server
    bare.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         f"{__file__}::test_a_fresh_redis_server_answers"],
        cwd=ROOT, env={**os.environ, "PATH": str(bare)}, capture_output=True, text=True,
        timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == NO_REDIS, output
    assert [line for line in output.splitlines() if "redis-server" in line] == [
        line for line in output.splitlines() if INSTALL in line]
    assert output.count(INSTALL) == 1
    assert "RuntimeError" not in output and "passed" not in output and "error" not in output
