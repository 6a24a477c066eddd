"""No admin input gets a 5xx: schemathesis over every admin route, from the OpenAPI document.

Every operation under /v1/banlist, /v1/sanctions, /v1/experiments and /v1/admin gets
generated requests, valid and invalid (schemathesis's positive and negative modes), each
sent twice: with a write token, and as generated (no token, or a random one). Only
`not_a_server_error` is checked: the document is not precise enough yet to hold every
answer to its schema, but whatever it says, no input may produce a 5xx. It runs against
the embedded stores and against a real redis-server; one service per store serves the
whole module, so state builds up as it would (entries to delete, groups, host states).

Examples are bounded (`EXAMPLES` per operation and mode) to keep the module well under a
minute. Where the document gives schemathesis nothing to generate from, the inputs are
written by hand at the end: `POST /v1/banlist/import` reads its body raw (the document
declares none), and the feed's items are untyped (`{}`), so generated ones are almost
never observations.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode

from app.main import create_app
from app.settings import Settings
from tests.conftest import ROOT
from tests.redis_server import RedisServer

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "20"))  # FUZZ_EXAMPLES=300: a deeper run
WRITE = {"Authorization": "Bearer fuzz-write"}
ADMIN_PATHS = "^/v1/(banlist|sanctions|experiments|admin)/?"


@pytest.fixture(scope="module", params=["embedded", "redis"])
def app(request, tmp_path_factory):
    """One service per store kind: the embedded one, and one on a real redis-server (its
    stores take other paths: scripts, streams, write ids)."""
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


@pytest.fixture(scope="module")
def admin_schema(app):
    return schemathesis.openapi.from_asgi("/openapi.json", app).include(path_regex=ADMIN_PATHS)


# Listed here rather than taken from the schema at collection time (the app is a fixture);
# the next test holds this list to the app's routes. (schemathesis's own lazy
# `from_fixture` loader does not run under pytest 9.2: it sets a node attribute pytest
# no longer has.)
OPERATIONS = [
    "POST /v1/banlist/entries", "GET /v1/banlist/entries", "DELETE /v1/banlist/entries/{entry_id}",
    "GET /v1/banlist/lookup", "GET /v1/banlist/changes", "GET /v1/banlist/writes/{write_id}",
    "POST /v1/banlist/import", "GET /v1/banlist/export", "PUT /v1/banlist/groups/{name}",
    "GET /v1/banlist/groups", "POST /v1/sanctions/scores", "GET /v1/sanctions/{host}",
    "POST /v1/sanctions/{host}/clear", "POST /v1/admin/config/reload",
    "GET /v1/admin/config", "GET /v1/admin/config/versions",
    "GET /v1/admin/config/versions/{version}", "POST /v1/admin/config/rollback",
    "POST /v1/admin/config/try",
    "POST /v1/admin/{structure}/reseed", "POST /v1/admin/{structure}/adopt",
    "GET /v1/experiments", "GET /v1/experiments/srm",
]


NOT_ADMIN = {"POST /v1/rerank", "GET /healthz", "GET /readyz", "GET /metrics"}


def test_the_fuzzed_operations_are_every_admin_route(admin_schema, app):
    """A new route is fuzzed too (or named as not admin), else this fails."""
    documented = {f"{method.upper()} {path}" for path, ops in app.openapi()["paths"].items()
                  for method in ops}
    assert set(OPERATIONS) == documented - NOT_ADMIN
    assert {op.ok().label for op in admin_schema.get_all_operations()} == set(OPERATIONS)


# Operations whose every input the document allows: nothing to make invalid (schemathesis's
# negative mode finds no case to generate), so they get valid inputs only.
NO_NEGATIVE = {"GET /v1/banlist/writes/{write_id}", "GET /v1/banlist/groups",
               "GET /v1/sanctions/{host}", "POST /v1/admin/config/reload",
               "GET /v1/admin/config", "GET /v1/admin/config/versions",
               "GET /v1/admin/config/versions/{version}",
               "GET /v1/experiments", "GET /v1/experiments/srm"}
CASES = [(label, mode) for label in OPERATIONS for mode in GenerationMode
         if mode is GenerationMode.POSITIVE or label not in NO_NEGATIVE]


@pytest.mark.parametrize(("label", "mode"), CASES,
                         ids=[f"{label}-{mode.value}" for label, mode in CASES])
def test_no_admin_input_is_a_server_error(admin_schema, label, mode):
    method, path = label.split(" ")
    operation = admin_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case):
        case.call_and_validate(headers=WRITE, checks=[not_a_server_error])
        case.call_and_validate(checks=[not_a_server_error])

    check()


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
