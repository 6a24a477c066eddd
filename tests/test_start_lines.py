"""CONTRACT.md's start line `uvicorn app.main:app`: a real uvicorn process, reading its
settings from the environment, answers /healthz and serves a page."""
from __future__ import annotations

import os
import subprocess
import sys

import httpx

from bench.replicas import free_port
from tests.conftest import ROOT
from tests.helpers import answers


def test_uvicorn_app_main_app_starts_from_the_environment(tmp_path):
    port = free_port()
    env = {**os.environ, "REARRANGE_CONFIG": str(ROOT / "config" / "rules.yaml"),
           "REARRANGE_BANLIST_PATH": str(tmp_path / "banlist.jsonl"),
           "REARRANGE_BANLIST_SEED": str(ROOT / "config" / "banlist.sample.jsonl")}
    env.pop("REDIS_URL", None)
    log = tmp_path / "uvicorn.log"
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "app.main:app", "--port",
                                 str(port)], cwd=ROOT, env=env, stderr=err)
    try:
        base = f"http://127.0.0.1:{port}"
        assert answers(f"{base}/healthz", 60), log.read_text()[-2000:]
        page = (ROOT / "config" / "request.sample.json").read_bytes()
        r = httpx.post(f"{base}/v1/rerank", content=page,
                       headers={"content-type": "application/json"})
        assert r.status_code == 200 and r.json()["documents"]
    finally:
        proc.terminate()
        proc.wait(15)
