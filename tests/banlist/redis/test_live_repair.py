"""`rearrange serve` against a real redis-server that restarts empty: /readyz names every
structure it refuses and `rearrange banlist reseed --store …` repairs each one."""
from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

import httpx
import pytest

from app.cli.main import main as cli
from tests.conftest import ROOT
from tests.redis_server import RedisServer, ServeProcess

pytestmark = pytest.mark.redis  # every test here runs on a redis-server of its own

SPAM = {"Authorization": "Bearer t-spam"}


@pytest.fixture
def served(tmp_path: Path):
    redis = RedisServer(tmp_path / "redis").start()  # no AOF: a restart comes back empty
    config = tmp_path / "rules.yaml"
    config.write_bytes((ROOT / "config" / "rules.yaml").read_bytes())
    env = {"REDIS_URL": redis.url, "REARRANGE_CONFIG": str(config),
           "REARRANGE_ADMIN_TOKENS": "tns:t-write,antispam:t-spam",
           "REARRANGE_CONFIG_POLL_SECONDS": "0.2", "REARRANGE_BANLIST_BLOCK_SECONDS": "0.5",
           "REARRANGE_BANLIST_SNAPSHOT_PATH": str(tmp_path / "a.snapshot.json"),
           "REARRANGE_BANLIST_PATH": str(tmp_path / "a.unused.jsonl")}
    proc = ServeProcess(ROOT, tmp_path, env)
    yield redis, proc
    proc.stop()
    redis.kill()


def until(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.05)


def test_reseed_from_the_cli_repairs_each_structure_readyz_names(served):
    redis, a = served
    r = httpx.post(f"{a.base}/v1/sanctions/scores", headers=SPAM, json={"observations": [
        {"host": "grey.example", "spam_score": 0.75, "observed_at": 1}]})
    assert r.status_code == 200
    redis.restart(empty=True)

    def ready() -> dict:
        return httpx.get(f"{a.base}/readyz").json()

    until(lambda: ready()["quarantine_diverged"] and ready()["sanctions_diverged"])
    assert ready()["banlist_diverged"] is None  # it held nothing: nothing to refuse

    def reseed(store: str) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli(["banlist", "--url", a.base, "--token", "t-write", "reseed",
                        "--store", store, "--reason", "redis lost its data"])
        return code, out.getvalue() + err.getvalue()

    code, said = reseed("quarantine")
    assert code == 0 and "1 entries" in said, said
    code, said = reseed("sanctions")
    assert code == 0 and "1 host sanction states" in said, said
    until(lambda: ready()["quarantine_in_sync"] and ready()["sanctions_in_sync"])
    state = httpx.get(f"{a.base}/v1/sanctions/grey.example").json()
    assert state["state"] == "quarantine" and state["quarantine_entry_id"] == "1"
    code, said = reseed("sanctions")
    assert code == 1 and "nothing to reseed" in said
