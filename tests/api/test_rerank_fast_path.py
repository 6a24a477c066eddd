"""The fast path (rerank.FastPath) answers exactly what the routed endpoint answers."""
from __future__ import annotations

import json

import pytest

from tests.api.test_rerank import BAD, page
from tests.conftest import AUTH

pytestmark = pytest.mark.python_path(
    "compares the Python path's two ways of answering")


def _both(client, *args, **kwargs):
    """(fast, routed) responses to the same request."""
    app = client.app
    fast = client.post(*args, **kwargs)
    app.fast_rerank = False
    try:
        routed = client.post(*args, **kwargs)
    finally:
        app.fast_rerank = True
    return fast, routed


def _same(fast, routed):
    assert fast.status_code == routed.status_code, (fast.text, routed.text)
    assert fast.content == routed.content
    for name in ("content-type", "content-length", "www-authenticate"):
        assert fast.headers.get(name) == routed.headers.get(name), name


BODIES = [page(6, request_id="r-1"), page(1, request_id="r-2", profile="default")]
BODIES += [dict(m(page(5, request_id=f"bad-{n}"))) for n, (_, m, _, _) in enumerate(BAD)]


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_the_same_answer_for_good_and_bad_pages(client, body):
    _same(*_both(client, "/v1/rerank", json=body))


@pytest.mark.parametrize("raw", [b'{"documents": [', b"", b"[]", b"\xff\xfe",
                                 b'{"documents": [{"id": "a", "url": "http://a/", "score": NaN}]}'])
def test_the_same_answer_for_malformed_bodies(client, raw):
    _same(*_both(client, "/v1/rerank", content=raw,
                 headers={"content-type": "application/json"}))


def test_the_same_answer_for_the_qa_header_with_and_without_a_token(client):
    body = page(3, request_id="qa", unit={"user_id": "u-1"})
    head = {"X-Rearrange-Force-Variant": "antispam_v7=treatment"}
    fast, routed = _both(client, "/v1/rerank", json=body, headers=head)
    _same(fast, routed)
    assert fast.status_code == 401 and fast.json()["field"] == "X-Rearrange-Force-Variant"
    fast, routed = _both(client, "/v1/rerank", json=body, headers={**head, **AUTH})
    _same(fast, routed)
    assert fast.status_code == 200
    bad = {"X-Rearrange-Force-Variant": "antispam_v7", **AUTH}
    _same(*_both(client, "/v1/rerank", json=body, headers=bad))


def test_the_same_body_limit_declared_and_streamed(client):
    service = client.app.state.services.rearranger
    service.settings = service.settings.model_copy(update={"max_body_bytes": 2048})
    big = json.dumps(page(40)).encode()
    fast, routed = _both(client, "/v1/rerank", content=big,
                         headers={"content-type": "application/json"})
    _same(fast, routed)
    assert fast.status_code == 413 and fast.json()["field"] == "body"

    def chunks():  # no Content-Length: the cap is applied as the body arrives
        yield from (big[i:i + 512] for i in range(0, len(big), 512))

    head = {"content-type": "application/json"}
    fast = client.post("/v1/rerank", content=chunks(), headers=head)
    client.app.fast_rerank = False
    try:
        routed = client.post("/v1/rerank", content=chunks(), headers=head)
    finally:
        client.app.fast_rerank = True
    _same(fast, routed)
    assert fast.status_code == 413 and fast.json()["field"] == "body"


def test_fast_responses_are_counted_under_the_route(client):
    client.post("/v1/rerank", json=page(2))
    client.post("/v1/rerank", json={"documents": 1})
    text = client.get("/metrics").text
    assert 'rearrange_http_responses_total{code="200",route="/v1/rerank"} 1.0' in text
    assert 'rearrange_http_responses_total{code="422",route="/v1/rerank"} 1.0' in text


def test_other_methods_and_paths_still_go_through_the_router(client):
    assert client.get("/v1/rerank").status_code == 405
    assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize("fast", [True, False])
def test_a_client_gone_before_its_body_gets_nothing_and_is_counted(client, fast):
    import asyncio

    app = client.app
    app.fast_rerank = fast
    sent = []

    async def receive():
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/rerank", "root_path": "",
             "headers": [(b"content-type", b"application/json")], "query_string": b"",
             "http_version": "1.1", "scheme": "http", "server": ("t", 80),
             "client": ("c", 1)}
    try:
        asyncio.run(app(scope, receive, send))
    finally:
        app.fast_rerank = True
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] in ([], [499])
    assert 'rearrange_http_responses_total{code="499",route="/v1/rerank"} 1.0' in \
        client.get("/metrics").text


def test_behind_a_root_path_the_fast_path_still_answers(client, monkeypatch):
    from fastapi.testclient import TestClient

    from app.api import rerank

    served, real = [], rerank.serve

    async def counted(*args):  # the real endpoint, called through
        served.append(args[1]["path"])
        await real(*args)

    monkeypatch.setattr(rerank, "serve", counted)
    with TestClient(client.app, root_path="/api") as behind:
        r = behind.post("/api/v1/rerank", json=page(2, request_id="rp"))
        assert behind.post("/api/rerank", json=page(1)).status_code == 404
    assert r.status_code == 200 and r.json()["request_id"] == "rp"
    assert served == ["/api/v1/rerank"]


def _invalid(client) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith('rearrange_requests_total{outcome="invalid",profile=""}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_every_refused_request_counts_as_invalid(client):
    """Each refusal the frontend or QA can cause is one invalid request, whatever refused
    it: the body's size, the body's content or the QA header."""
    service = client.app.state.services.rearranger
    service.settings = service.settings.model_copy(update={"max_body_bytes": 2048})
    json_head = {"content-type": "application/json"}
    refusals = [
        ({"content": json.dumps(page(40)).encode(), "headers": json_head}, 413),
        ({"json": {"documents": 1}}, 422),
        ({"json": page(2), "headers": {"X-Rearrange-Force-Variant": "antispam_v7=treatment"}},
         401),
        ({"json": page(2), "headers": {"X-Rearrange-Force-Variant": "antispam_v7", **AUTH}},
         422),
    ]
    for n, (request, status) in enumerate(refusals, 1):
        assert client.post("/v1/rerank", **request).status_code == status
        assert _invalid(client) == n, (n, status)
    assert client.post("/v1/rerank", json=page(2)).status_code == 200
    assert _invalid(client) == len(refusals)


@pytest.mark.parametrize("method,path,body,route,code", [
    ("POST", "/v1/rerank", page(2), "/v1/rerank", "200"),
    ("POST", "/v1/rerank", {"documents": 1}, "/v1/rerank", "422"),
    ("GET", "/healthz", None, "/healthz", "200"),
])
@pytest.mark.parametrize("fast", [True, False])
def test_a_response_is_counted_before_its_last_byte_goes_out(client, fast, method, path,
                                                             body, route, code):
    """A client that has read its whole answer and then scrapes sees it counted: the
    count is made before the last body message reaches the server, not after the app
    returns (then two workers' scrapes after N answers could say N - 1)."""
    import asyncio

    app = client.app
    app.fast_rerank = fast
    registry = app.state.services.metrics.registry
    labels = {"route": route, "code": code}

    def counted() -> float:
        return registry.get_sample_value("rearrange_http_responses_total", labels) or 0.0

    before, seen = counted(), []
    raw = json.dumps(body).encode() if body is not None else b""
    messages = [{"type": "http.request", "body": raw, "more_body": False}]

    async def receive():
        return messages.pop() if messages else {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.body" and not message.get("more_body"):
            seen.append(counted())

    scope = {"type": "http", "method": method, "path": path, "root_path": "",
             "headers": [(b"content-type", b"application/json"),
                         (b"content-length", str(len(raw)).encode())],
             "query_string": b"", "http_version": "1.1", "scheme": "http",
             "server": ("t", 80), "client": ("c", 1)}
    try:
        asyncio.run(app(scope, receive, send))
    finally:
        app.fast_rerank = True
    assert seen == [before + 1]
    assert counted() == before + 1
