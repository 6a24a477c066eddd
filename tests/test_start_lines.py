"""CONTRACT.md's start lines, `uvicorn app.main:app` and `rearrange serve`: a real process,
reading its settings from the environment, answers /healthz and serves a page (`rearrange
serve` on both its ports, the same bytes on each) and stops on SIGTERM."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import orjson
import pytest

from bench.replicas import free_port
from tests.conftest import ROOT
from tests.helpers import answers


def environment(tmp_path):
    env = {**os.environ, "REARRANGE_CONFIG": str(ROOT / "config" / "rules.yaml"),
           "REARRANGE_BANLIST_PATH": str(tmp_path / "banlist.jsonl"),
           "REARRANGE_BANLIST_SEED": str(ROOT / "config" / "banlist.sample.jsonl")}
    env.pop("REDIS_URL", None)
    return env


@pytest.mark.python_path("uvicorn app.main:app serves no data port")
def test_uvicorn_app_main_app_starts_from_the_environment(tmp_path):
    port = free_port()
    env = environment(tmp_path)
    log = tmp_path / "uvicorn.log"
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "app.main:app", "--port",
                                 str(port)], cwd=ROOT, env=env, stderr=err)
    try:
        base = f"http://127.0.0.1:{port}"
        assert answers(f"{base}/healthz", 60, proc), log.read_text()[-2000:]
        page = (ROOT / "config" / "request.sample.json").read_bytes()
        r = httpx.post(f"{base}/v1/rerank", content=page,
                       headers={"content-type": "application/json"})
        assert r.status_code == 200 and r.json()["documents"]
    finally:
        proc.terminate()
        proc.wait(15)


@pytest.mark.python_path("tries both of its ports itself")
def test_rearrange_serve_starts_both_ports_from_the_environment(tmp_path):
    port, data = free_port(), free_port()
    env = {**environment(tmp_path), "REARRANGE_PORT": str(port),
           "REARRANGE_DATA_PORT": str(data), "REARRANGE_DRAIN_SECONDS": "0"}
    log = tmp_path / "serve.log"
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--workers", "2"],
                                cwd=ROOT, env=env, stderr=err)
    try:
        control, native = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{data}"
        assert answers(f"{control}/healthz", 60, proc), log.read_text()[-2000:]
        assert answers(f"{native}/healthz", 10, proc), log.read_text()[-2000:]
        assert httpx.get(f"{native}/healthz").json() == httpx.get(f"{control}/healthz").json()
        page = {**orjson.loads((ROOT / "config" / "request.sample.json").read_bytes()),
                "request_id": "start-line"}
        answers_ = [httpx.post(f"{base}/v1/rerank", json=page) for base in (control, native)]
        assert [r.status_code for r in answers_] == [200, 200]
        assert answers_[0].content == answers_[1].content and answers_[1].json()["documents"]
        elsewhere = httpx.get(f"{native}/v1/banlist/entries")  # the admin API: not here
        assert elsewhere.status_code == 404 and "control port" in elsewhere.json()["problem"]
        proc.terminate()  # uvicorn re-raises the signal it stopped on, once stopped
        assert proc.wait(30) in (0, -signal.SIGTERM), log.read_text()[-2000:]
        assert "Traceback" not in log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(15)
