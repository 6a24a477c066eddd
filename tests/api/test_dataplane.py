"""The data port's writer (app/api/dataplane.py): what a request leaves behind is written
by one Python thread, and a sink that raises costs only its own writes."""
from __future__ import annotations

import logging

import httpx
import orjson
import pytest
from fastapi.testclient import TestClient

from app.api.dataplane import DataPlaneServer
from app.main import create_app
from tests.conftest import ROOT

pytestmark = pytest.mark.python_path("drives the listener itself")


def test_a_sink_that_raises_is_logged_and_counted_and_the_rest_is_written(settings, caplog,
                                                                        monkeypatch):
    app = create_app(settings)
    page = {**orjson.loads((ROOT / "config" / "request.sample.json").read_bytes()),
            "request_id": "sink"}
    with TestClient(app) as client:
        services = app.state.services
        listener = DataPlaneServer(services)
        port = listener.start("127.0.0.1", 0, 1)

        def broken(line: bytes) -> None:
            raise OSError("disk full")

        monkeypatch.setattr(services.audit_log, "emit_line", broken)
        with caplog.at_level(logging.ERROR, logger="rearrange.dataplane"):
            r = httpx.post(f"http://127.0.0.1:{port}/v1/rerank", json=page)
            assert r.status_code == 200 and r.json()["experiments"]  # an audit line is due
            listener.flush()
        assert "writing to the audit log failed" in caplog.text
        assert "disk full" in caplog.text
        metrics = client.get("/metrics").text
        assert listener.stop(5)
    assert 'rearrange_housekeeping_errors_total{task="data_plane_writer"} 1.0' in metrics
    # the response count, a later sink of the same batch, was still written
    assert 'rearrange_http_responses_total{code="200",route="/v1/rerank"} 1.0' in metrics
