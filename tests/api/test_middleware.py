"""/v1/rerank inside the app's middleware stack: middleware added to the app sees it like any
route, and its refusals are the routed endpoints' (one renderer, one body reader, one
mapping of exceptions)."""
from __future__ import annotations

import asyncio
import json

import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient
from starlette.middleware.cors import CORSMiddleware

from app.api import errors, rerank
from app.api.auth import WRITE
from app.api.errors import BodyTooLarge, BodyTooSlow, refusal
from app.engine.service import EXPLAIN_HEADER, FORCE_HEADER
from app.main import create_app
from tests.api.test_rerank import page
from tests.conftest import AUTH

pytestmark = pytest.mark.python_path(
    "middleware added to the FastAPI app wraps its routes, not the data port's listener")

ORIGIN = "https://front.example"
JSON = {"content-type": "application/json"}
BAN = {"scope": "host", "value": "a.example", "reason": "spam"}


@pytest.fixture
def capped(settings):
    """Settings with a small body cap and a short body deadline."""
    return settings.model_copy(update={"max_body_bytes": 2048, "body_timeout_seconds": 0.2})


@pytest.fixture
def fast_calls(monkeypatch):
    """The paths `rerank.serve` (the fast path) answered, called through."""
    served, real = [], rerank.serve

    async def counted(service, scope, receive, send):
        served.append(scope["path"])
        await real(service, scope, receive, send)

    monkeypatch.setattr(rerank, "serve", counted)
    return served


def test_cors_added_to_the_app_answers_for_rerank(settings, fast_calls):
    app = create_app(settings)
    app.add_middleware(CORSMiddleware, allow_origins=[ORIGIN], allow_methods=["POST"],
                       allow_headers=["content-type", "authorization", EXPLAIN_HEADER])
    with TestClient(app) as client:
        pre = client.options("/v1/rerank", headers={
            "Origin": ORIGIN, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": f"content-type, {EXPLAIN_HEADER}"})
        assert pre.status_code == 200, pre.text
        assert pre.headers["access-control-allow-origin"] == ORIGIN
        assert "POST" in pre.headers["access-control-allow-methods"]
        assert EXPLAIN_HEADER.lower() in pre.headers["access-control-allow-headers"].lower()
        ok = client.post("/v1/rerank", json=page(3, request_id="cors"), headers={"Origin": ORIGIN})
        assert ok.status_code == 200 and ok.json()["request_id"] == "cors"
        assert ok.headers["access-control-allow-origin"] == ORIGIN
        refused = client.post("/v1/rerank", json={"documents": 1}, headers={"Origin": ORIGIN})
        assert refused.status_code == 422
        assert refused.headers["access-control-allow-origin"] == ORIGIN
        other = client.post("/v1/rerank", json=page(1),
                            headers={"Origin": "https://elsewhere.example"})
        assert other.status_code == 200 and "access-control-allow-origin" not in other.headers
    assert fast_calls == ["/v1/rerank"] * 3  # the fast path answered, inside CORS


class Recorder:
    """A pure ASGI middleware as a tracer is one: it relays the body (counting its bytes),
    reads the status and the route and adds a header to every response."""

    def __init__(self, app, seen: list[dict]) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        record = {"method": scope["method"], "path": scope["path"], "body_bytes": 0}

        async def relayed():
            message = await receive()
            record["body_bytes"] += len(message.get("body", b""))
            return message

        async def traced(message):
            if message["type"] == "http.response.start":
                record["status"] = message["status"]
                message = {**message, "headers": [*message["headers"], (b"x-trace", b"t-1")]}
            await send(message)

        await self.app(scope, relayed, traced)
        record["route"] = getattr(scope.get("route"), "path", None)
        self.seen.append(record)


@pytest.mark.parametrize("fast", [True, False])
def test_a_middleware_added_to_the_app_sees_every_rerank_request(capped, fast_calls, fast):
    app = create_app(capped)
    seen: list[dict] = []
    app.add_middleware(Recorder, seen=seen)
    app.fast_rerank = fast
    good = json.dumps(page(4, request_id="traced")).encode()
    with TestClient(app) as client:
        answers = [
            client.post("/v1/rerank", content=good, headers=JSON),
            client.post("/v1/rerank", content=good, headers={**JSON, FORCE_HEADER: "a=b"}),
            client.post("/v1/rerank", content=b"x" * 3000, headers=JSON),
        ]
    assert [r.status_code for r in answers] == [200, 401, 413]
    assert all(r.headers["x-trace"] == "t-1" for r in answers)
    assert answers[0].json()["request_id"] == "traced"
    rerank_seen = [s for s in seen if s["path"] == "/v1/rerank"]
    capped_route = "/v1/rerank" if fast else None  # routed, the cap answers before routing
    assert [(s["method"], s["status"], s["route"]) for s in rerank_seen] == [
        ("POST", 200, "/v1/rerank"), ("POST", 401, "/v1/rerank"), ("POST", 413, capped_route)]
    # the first two bodies were read through the middleware's receive; the 413 was not read
    assert [s["body_bytes"] for s in rerank_seen] == [len(good), len(good), 0]
    assert fast_calls == (["/v1/rerank"] * 3 if fast else [])


def _both(client, *args, **kwargs):
    """(fast, routed) answers to one request."""
    fast = client.post(*args, **kwargs)
    client.app.fast_rerank = False
    try:
        return fast, client.post(*args, **kwargs)
    finally:
        client.app.fast_rerank = True


def test_an_oversize_body_gets_one_refusal_on_every_route(capped):
    declared = refusal(BodyTooLarge("3000 bytes, over the limit of 2048"))
    streamed = refusal(BodyTooLarge("over the limit of 2048 bytes"))

    def chunks():  # no Content-Length: the cap is applied as the body arrives
        yield from (b"x" * 500 for _ in range(6))

    with TestClient(create_app(capped)) as client:
        for fast in (True, False):
            client.app.fast_rerank = fast
            for path in ("/v1/rerank", "/v1/banlist/entries", "/v1/sanctions/scores"):
                r = client.post(path, content=b"x" * 3000, headers={**JSON, **AUTH})
                assert (r.status_code, r.content) == (413, declared.body), (path, r.text)
                assert r.headers["connection"] == "close"
                r = client.post(path, content=chunks(), headers={**JSON, **AUTH})
                assert (r.status_code, r.content) == (413, streamed.body), (path, r.text)
                assert r.headers["connection"] == "close"


def _call(app, path: str) -> list[dict]:
    """The messages the app sends for a POST whose body starts and never ends."""
    sent: list[dict] = []
    first = True

    async def receive():
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b'{"documents": [', "more_body": True}
        await asyncio.Event().wait()  # the rest never comes

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "root_path": "",
             "headers": [(b"content-type", b"application/json"), (b"content-length", b"900"),
                         (b"authorization", AUTH["Authorization"].encode())],
             "query_string": b"", "http_version": "1.1", "scheme": "http",
             "server": ("t", 80), "client": ("c", 1)}
    asyncio.run(app(scope, receive, send))
    return sent


def test_a_body_too_slow_gets_one_refusal_on_every_route(capped):
    expected = refusal(BodyTooSlow("not received within 0.2 s"))
    with TestClient(create_app(capped)) as client:
        app = client.app
        answers = [_call(app, "/v1/rerank"), _call(app, "/v1/banlist/entries")]
        app.fast_rerank = False
        try:
            answers.append(_call(app, "/v1/rerank"))
        finally:
            app.fast_rerank = True
    for start, body in answers:
        assert start["status"] == 408 and (b"connection", b"close") in start["headers"]
        assert body["body"] == expected.body


def test_a_qa_header_without_a_token_is_refused_as_the_shared_check_refuses(client):
    auth = client.app.state.services.auth
    with pytest.raises(HTTPException) as qa:
        auth.holder(None, FORCE_HEADER, WRITE)
    with pytest.raises(HTTPException) as admin:
        auth.holder(None, "Authorization", WRITE)
    fast, routed = _both(client, "/v1/rerank", json=page(2),
                         headers={FORCE_HEADER: "antispam_v7=treatment"})
    for r in (fast, routed):
        assert (r.status_code, r.content) == (401, refusal(qa.value).body)
        assert r.headers["www-authenticate"] == "Bearer"
    r = client.post("/v1/banlist/entries", json=BAN)
    assert (r.status_code, r.content) == (401, refusal(admin.value).body)
    assert r.headers["www-authenticate"] == "Bearer"


def test_every_refusal_is_rendered_by_the_one_renderer(capped, monkeypatch):
    """Refusals of the fast path, the body cap and the routed endpoints' handlers, of each
    kind, all come out of `errors.body` (called through here)."""
    rendered: list[tuple[int, str | None]] = []
    real = errors.body

    def spied(status, field, problem, **extra):
        rendered.append((status, field))
        return real(status, field, problem, **extra)

    monkeypatch.setattr(errors, "body", spied)
    requests = [
        ("/v1/rerank", {"content": b"x" * 3000, "headers": JSON}),  # fast path: the cap
        ("/v1/rerank", {"json": page(1), "headers": {FORCE_HEADER: "x=y"}}),  # fast: QA
        ("/v1/rerank", {"json": page(1), "headers": {FORCE_HEADER: "x", **AUTH}}),
        ("/v1/rerank", {"json": page(1), "headers": {EXPLAIN_HEADER: "maybe", **AUTH}}),
        ("/v1/banlist/entries", {"content": b"x" * 3000, "headers": JSON}),  # BodyLimit
        ("/v1/banlist/entries", {"json": BAN}),  # no token: HTTPException
        ("/v1/banlist/entries", {"content": b"{", "headers": {**JSON, **AUTH}}),  # bad JSON
        ("/v1/banlist/entries", {"content": json.dumps(BAN),  # wrong content type
                                 "headers": {"content-type": "text/plain", **AUTH}}),
        ("/v1/banlist/entries", {"json": {**BAN, "scope": "planet"}, "headers": AUTH}),
    ]
    with TestClient(create_app(capped)) as client:
        for path, request in requests:
            before = len(rendered)
            r = client.post(path, **request)
            assert 400 <= r.status_code < 500, (path, r.status_code, r.text)
            assert rendered[before:] == [(r.status_code, r.json()["field"])], (path, r.text)
            assert r.json()["field"] and r.json()["problem"]  # each names the field


def test_without_an_opentelemetry_provider_the_app_does_not_ask_per_request(client):
    """No provider is configured here: the start-up probe says so, and every request still
    goes through the whole stack (the tests above)."""
    assert client.app.telemetry is False
    assert client.post("/v1/rerank", json=page(1)).status_code == 200
