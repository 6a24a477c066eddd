"""bench.pgo's training run: the instrumented engine loaded in place of app._engine, every
training page served whole (a refusal would train the error paths instead of the pages)."""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_the_training_run_serves_every_page_through_the_engine_it_is_given():
    (engine,) = (ROOT / "app").glob("_engine*.so")
    run = subprocess.run([sys.executable, "-m", "bench.pgo", "--train", str(engine)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stdout.splitlines() if line.startswith("bench.pgo:")]
    assert len(lines) == 1 and lines[0].startswith("bench.pgo: trained on "), run.stdout
    assert lines[0].endswith("responses of status 200"), run.stdout
    assert int(lines[0].split()[3]) >= 2 * 5 * 2 * 10  # profiles x sizes x texts x calls


def test_the_training_run_refuses_an_engine_that_is_not_one(tmp_path):
    fake = tmp_path / "_engine.cpython-311-x86_64-linux-gnu.so"
    fake.write_bytes(b"not a shared object")
    run = subprocess.run([sys.executable, "-m", "bench.pgo", "--train", str(fake)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "trained on" not in run.stdout
