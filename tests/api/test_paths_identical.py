"""The two request paths answer alike, byte for byte: on random configs, banlists and pages
(tests/strategies.py), `POST /v1/rerank` on the app (the Python path) and on its data-plane
listener (the native path) give the same status and the same body, with and without the
QA explain header. One app serves every example: its config is reloaded from the drawn YAML and
its banlist holds the drawn bans, as an operator would change them. (The audit lines of
both paths are compared by the suite's audit tests, which run on both.)"""
from __future__ import annotations

import contextlib

import httpx
import orjson
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.api.dataplane import DataPlaneServer
from app.banlist.base import EntrySpec
from app.errors import BanlistError, ConfigError
from app.main import create_app
from tests.strategies import bans, bodies, configs

pytestmark = pytest.mark.python_path("compares the two paths itself")


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """(the app's client, a client of its listener, the app's services)."""
    from tests.conftest import service_settings

    tmp = tmp_path_factory.mktemp("paths")
    settings = service_settings(tmp)
    config = settings.config
    app = create_app(settings)
    with TestClient(app) as client:
        listener = DataPlaneServer(app.state.services)
        port = listener.start("127.0.0.1", 0, 2)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as native:
            yield client, native, app.state.services, config, listener
        assert listener.stop(5)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(yaml_text=configs(), specs=bans(), body=bodies(("default", "commercial")),
       explain=st.booleans())
def test_both_paths_give_the_same_bytes(both, yaml_text, specs, body, explain):
    client, native, services, config, listener = both
    config.write_text(yaml_text, "utf-8")
    # a config re-bucketing the experiment of the one before is refused: that one serves on
    with contextlib.suppress(ConfigError):
        services.config.reload()
    store = services.store
    added = []
    for spec in specs:
        try:
            added.append(store.add(EntrySpec(spec["scope"], spec["value"], spec["reason"],
                                             tuple(spec.get("regions", ()))), "tns"))
        except BanlistError:
            continue  # refused by the store, as by the API
    try:
        raw = orjson.dumps({**body, "request_id": "same"})
        headers = {"content-type": "application/json"}
        if explain:
            headers |= {"X-Rearrange-Explain": "true", "Authorization": "Bearer tns-token"}
        python = client.post("/v1/rerank", content=raw, headers=headers)
        ours = native.post("/v1/rerank", content=raw, headers=headers)
        assert (ours.status_code, ours.content) == (python.status_code, python.content)
        assert ours.headers["content-type"] == python.headers["content-type"]
    finally:
        for entry_id in {entry.id for entry in added}:  # a spec drawn twice is one entry
            store.remove(entry_id, "tns", "example done")
