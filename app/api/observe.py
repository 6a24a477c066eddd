"""ASGI middleware: response counts by route, and one body-size cap for every route."""
from __future__ import annotations

import asyncio
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import FieldError
from app.metrics import Metrics


class ResponseCounter:
    """Counts every response in `rearrange_http_responses_total{route, code}`.

    The route label is the matched route's template (`/v1/banlist/entries/{entry_id}`),
    never the raw path, so request data cannot grow the label set; unmatched is `other`.
    An exception escaping the app is counted as 5xx before it propagates.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def send_counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_counted)
        finally:
            route = scope.get("route")
            self.metrics.http_response(getattr(route, "path", "other"), status)


class BodyLimit:
    """Refuses a body over `limit` bytes on every route, before routing, auth or parsing.

    A declared Content-Length over the cap is answered at once, without reading the body
    (the HTTP parser holds a client to the length it declared). A body without one
    (chunked) is read here, up to the cap, then replayed to the app. Either way the
    answer is the API's own 413 (`{"error", "field": "body", "problem"}`): an admin
    endpoint never reads and parses 64 MiB only to answer 401, and `/v1/rerank` keeps its
    documented error shape.
    """

    def __init__(self, app: ASGIApp, limit: int, timeout: float) -> None:
        self.app = app
        self.limit = limit
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunked = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                if value.isdigit() and int(value) > self.limit:
                    await _refuse(send, 413, f"{int(value)} bytes, over the limit of {self.limit}")
                    return
                await self.app(scope, receive, send)
                return
            if name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        if not chunked:
            await self.app(scope, receive, send)
            return
        try:
            body = await read_capped(receive, self.limit, self.timeout)
        except ClientGone:
            return
        except FieldError as exc:
            await _refuse(send, exc.status, exc.problem)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


class ClientGone(Exception):
    """The client disconnected before its body arrived: there is no one to answer."""


async def read_capped(receive: Receive, limit: int, timeout: float) -> bytearray:
    """The whole request body; FieldError (`body`) past `limit` bytes (413) or `timeout`
    seconds (408: a client trickling its body must not hold a worker's slot)."""
    body = bytearray()
    try:
        async with asyncio.timeout(timeout):
            more = True
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    raise ClientGone
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > limit:
                    raise FieldError("body", f"over the limit of {limit} bytes", 413)
    except TimeoutError:
        raise FieldError("body", f"not received within {timeout:g} s", 408) from None
    return body


async def _refuse(send: Send, status: int, problem: str) -> None:
    body = json.dumps({"error": "invalid_request", "field": "body", "problem": problem},
                      ensure_ascii=False, separators=(",", ":")).encode()  # as JSONResponse
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
