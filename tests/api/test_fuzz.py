"""schemathesis over every route of the OpenAPI document, with every check it has.

`schemathesis run` (its CLI, as a developer would run it) against a real `rearrange serve`:
the examples, coverage and fuzzing phases, valid and invalid requests, with a write token
(its `ignored_auth` check sends them without one too). It runs against the embedded store
and against a real redis-server, whose stores take other paths (scripts, streams, write
ids). Every check must pass: no 5xx, every status, content type and body as documented,
invalid input refused, valid input accepted. The valid-by-the-document requests the service
refuses on purpose are named, each with why, in tests/api/schemathesis.toml.

Examples are bounded (`FUZZ_EXAMPLES` per operation and phase, `FUZZ_SEED` fixed so a run
can be repeated) to keep the module well under a minute a store. Where the document gives
schemathesis nothing to generate from, inputs are written by hand at the end: the import's
body is lines the document can only call a string, and the feed's items are untyped.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from app.config.settings import Settings
from app.main import create_app
from tests.api.test_live_server import start_server
from tests.conftest import ROOT
from tests.redis_server import RedisServer

EXAMPLES = os.environ.get("FUZZ_EXAMPLES", "10")  # FUZZ_EXAMPLES=300: a deeper run
SEED = os.environ.get("FUZZ_SEED", "20260601")
WRITE = {"Authorization": "Bearer fuzz-write"}
CONFIG = Path(__file__).with_name("schemathesis.toml")


@pytest.mark.parametrize("store", ["embedded", pytest.param("redis", marks=pytest.mark.redis)])
def test_every_route_passes_every_schemathesis_check(store, tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_bytes((ROOT / "config" / "rules.yaml").read_bytes())  # experiments: QA header
    env = {"REARRANGE_CONFIG": str(rules), "REARRANGE_ADMIN_TOKENS": "fuzzer:fuzz-write",
           "REARRANGE_CONFIG_POLL_SECONDS": "0", "REARRANGE_LOG_LEVEL": "WARNING"}
    redis = None
    if store == "redis":
        redis = RedisServer(tmp_path / "redis").start()
        env.update(REDIS_URL=redis.url, REARRANGE_BANLIST_BLOCK_SECONDS="0.3",
                   REARRANGE_BANLIST_SNAPSHOT_PATH=str(tmp_path / "snapshot.json"))
    proc, base, _ = start_server(tmp_path, **env)
    try:
        run = subprocess.run(
            [str(Path(sys.executable).with_name("schemathesis")), "--config-file", str(CONFIG),
             "run", f"{base}/openapi.json", "--header", f"Authorization: {WRITE['Authorization']}",
             "--max-examples", EXAMPLES, "--seed", SEED, "--workers", "1"],
            cwd=tmp_path, capture_output=True, text=True, timeout=600)
        paths = httpx.get(f"{base}/openapi.json").json()["paths"]
    finally:
        proc.terminate()
        proc.wait(10)
        if redis is not None:
            redis.kill()
    summary = run.stdout[run.stdout.rfind("SUMMARY"):]
    assert run.returncode == 0, run.stdout[-12000:] + run.stderr[-2000:]
    operations = sum(len(ops) for ops in paths.values())
    assert f"Tested: {operations}" in summary, summary  # every documented operation
    assert re.search(r"(\d+) generated, \1 passed", summary), summary


@pytest.fixture(scope="module",
                params=["embedded", pytest.param("redis", marks=pytest.mark.redis)])
def app(request, tmp_path_factory):
    """For the hand-written inputs: one service per store kind, the embedded one and one on
    a real redis-server."""
    tmp: Path = tmp_path_factory.mktemp(f"fuzz-{request.param}")
    config = tmp / "rules.yaml"
    config.write_bytes((ROOT / "config" / "rules.yaml").read_bytes())
    settings = Settings(
        config=config, banlist_path=tmp / "banlist.jsonl", audit_log=str(tmp / "audit.jsonl"),
        admin_tokens="fuzzer:fuzz-write", config_poll_seconds=0, redis_url=None,
        banlist_seed=None, banlist_snapshot_path=None)
    if request.param == "embedded":
        yield create_app(settings)
        return
    server = RedisServer(tmp / "redis").start()
    try:
        with TestClient(create_app(settings.model_copy(update={
                "redis_url": server.url, "banlist_block_seconds": 0.3}))) as client:
            yield client.app
    finally:
        server.kill()


RAW = [b"", b"\x00\xff", b"{", b"[]", b"null", b'{"scope": null}', b'"x"', b"\xef\xbb\xbf{}",
       b"scope,value\n", b"scope,value,reason\nhost,a.example,x\n", b'{"a":' * 1000,
       b"\n" * 5000, b'{"scope":"host","value":"' + b"a" * 70_000 + b'","reason":"x"}',
       b"scope,value,reason\nhost," + b"b" * 140_000 + b",x\n"]


@pytest.mark.parametrize("body", RAW, ids=range(len(RAW)))
def test_raw_bodies_to_import_and_scores_are_never_a_server_error(app, body):
    """What the document cannot describe: import's raw body, and the feed's untyped items."""
    client = TestClient(app)  # no lifespan: its end would close the module's stores
    for fmt in ("ndjson", "csv"):
        r = client.post(f"/v1/banlist/import?format={fmt}&mode=valid", content=body,
                        headers=WRITE)
        assert r.status_code < 500, r.text
    text = body.decode("latin-1")
    for observations in (text, [text], [{"host": text, "spam_score": 0.5, "observed_at": 1}]):
        r = client.post("/v1/sanctions/scores", json={"observations": observations},
                        headers=WRITE)
        assert r.status_code < 500, r.text
