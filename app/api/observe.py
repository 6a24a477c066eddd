"""ASGI middleware: response counts by route, and one body-size cap for every route."""
from __future__ import annotations

import asyncio
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

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
        body = bytearray()
        try:
            async with asyncio.timeout(self.timeout):
                more = True
                while more:
                    message = await receive()
                    if message["type"] != "http.request":
                        return  # the client went away
                    body += message.get("body", b"")
                    more = message.get("more_body", False)
                    if len(body) > self.limit:
                        await _refuse(send, 413, f"over the limit of {self.limit} bytes")
                        return
        except TimeoutError:
            await _refuse(send, 408, f"not received within {self.timeout:g} s")
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


async def _refuse(send: Send, status: int, problem: str) -> None:
    body = json.dumps({"error": "invalid_request", "field": "body", "problem": problem},
                      ensure_ascii=False, separators=(",", ":")).encode()  # as JSONResponse
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
