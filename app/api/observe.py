"""ASGI middleware: response counts by route, and one body reader with its size cap and
deadline for every route (the routed ones through BodyLimit, /v1/rerank's fast path
directly)."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Generator
from types import CoroutineType
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import BodyTooLarge, BodyTooSlow, refusal
from app.errors import FieldError
from app.observability.metrics import Metrics


class ResponseCounter:
    """Counts every response in `rearrange_http_responses_total{route, code}`.

    The route label is the matched route's template (`/v1/banlist/entries/{entry_id}`),
    never the raw path, so request data cannot grow the label set; unmatched is `other`.
    A response is counted just before its last body message is handed to the server, so
    a scrape made after a client has read its whole answer counts it (counted after the
    app returned, a client could read the answer and scrape before the count). An
    exception escaping the app is counted as 5xx before it propagates, unless the whole
    answer had already gone.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status, counted = 500, False

        def count() -> None:
            nonlocal counted
            counted = True
            route = scope.get("route")
            self.metrics.http_response(getattr(route, "path", "other"), status)

        async def send_counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                count()
            await send(message)

        try:
            await self.app(scope, receive, send_counted)
        finally:
            if not counted:
                count()


class BodyLimit:
    """Every request body, on every route, read whole before routing, auth or parsing: at
    most `limit` bytes and within `timeout` seconds, else the API's own 413 or 408
    (`{"error", "field": "body", "problem"}`), after which the connection is closed.

    A declared Content-Length over the cap is answered at once, without reading the body
    (the HTTP parser holds a client to the length it declared). Any other body, declared
    or chunked, is read here under the deadline and then replayed to the app, so no route
    waits on a client trickling its body: the app is called with the body there. An admin
    endpoint never reads 64 MiB only to answer 401, and every route keeps the documented
    error shape.
    """

    def __init__(self, app: ASGIApp, limit: int, timeout: float) -> None:
        self.app = app
        self.limit = limit
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared, has_body = None, False
        for name, value in scope["headers"]:
            if name == b"content-length":
                declared = value
                has_body = has_body or value.strip(b"0") != b""
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                has_body = True
        if not has_body:
            await self.app(scope, receive, send)
            return
        try:
            body = await read_body(declared, receive, self.limit, self.timeout)
        except ClientGone:
            return
        except FieldError as exc:
            refused = refusal(exc)
            await send_json(send, refused.status, refused.body, refused.raw_headers())
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


async def read_body(declared: bytes | None, receive: Receive, limit: int,
                    timeout: float) -> bytes | bytearray:
    """The whole request body, every route's: a `declared` Content-Length over `limit` is
    refused at once, unread (the HTTP parser holds a client to the length it declared),
    any other body as it arrives (`read_capped`)."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"{int(declared)} bytes, over the limit of {limit}")
    return await read_capped(receive, limit, timeout)


async def read_capped(receive: Receive, limit: int, timeout: float) -> bytes | bytearray:
    """The whole request body; BodyTooLarge past `limit` bytes (413) or BodyTooSlow past
    `timeout` seconds (408: a client trickling its body must not hold a worker's slot).

    The timer is armed only if the body is not there yet: a page usually arrives in the
    packet of its headers, so the first `receive()` answers without waiting, and arming
    and cancelling an asyncio timer cost more than the rest of this function (~10 µs
    with uvloop, bench/http.py's 20-document page spends ~80 µs in all). A body that
    comes in one message is that message's bytes, not copied.
    """
    body = bytearray()
    first = _run_until_it_waits(receive())
    waiting: Waiting | None = None
    if isinstance(first, Waiting):
        waiting = first
    else:
        if first["type"] == "http.request" and not first.get("more_body", False):
            whole: bytes = first.get("body", b"")
            if len(whole) > limit:
                raise BodyTooLarge(f"over the limit of {limit} bytes")
            return whole
        _add(body, first, limit)  # more follows (or the client left: ClientGone)
    try:
        async with asyncio.timeout(timeout):
            more = True
            while more:
                message = await (waiting if waiting is not None else receive())
                waiting = None
                more = _add(body, message, limit)
    except TimeoutError:
        raise BodyTooSlow(f"not received within {timeout:g} s") from None
    return body


def _add(body: bytearray, message: Message, limit: int) -> bool:
    """Append one ASGI message's bytes to `body`; whether more follow."""
    if message["type"] != "http.request":
        raise ClientGone
    body += message.get("body", b"")
    if len(body) > limit:
        raise BodyTooLarge(f"over the limit of {limit} bytes")
    return bool(message.get("more_body", False))


class Waiting:
    """A coroutine run up to its first wait: awaiting this carries on from there, exactly
    as if it had been awaited from the start (what it waits on is handed to the task;
    what the task sends or throws in, cancellation included, is handed back to it)."""

    __slots__ = ("coro", "waits_on")

    def __init__(self, coro: Coroutine[Any, Any, Message], waits_on: Any) -> None:
        self.coro = coro
        self.waits_on = waits_on

    def __await__(self) -> Generator[Any, Any, Message]:
        coro, waits_on = self.coro, self.waits_on
        returned: Message  # what the coroutine returns at last
        while True:
            try:
                sent = yield waits_on
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # handed to the coroutine, which decides
                try:
                    waits_on = coro.throw(exc)
                except StopIteration as done:
                    returned = done.value
                    return returned
            else:
                try:
                    waits_on = coro.send(sent)
                except StopIteration as done:
                    returned = done.value
                    return returned


def _run_until_it_waits(awaitable: Awaitable[Message]) -> Message | Waiting:
    """The message, if `receive()` had it without waiting; else a `Waiting` to await."""
    # the type first: an ABC's isinstance costs more than the rest of this function
    coro = (awaitable if type(awaitable) is CoroutineType or isinstance(awaitable, Coroutine)
            else _awaited(awaitable))
    try:
        waits_on = coro.send(None)
    except StopIteration as done:
        message: Message = done.value
        return message
    return Waiting(coro, waits_on)


async def _awaited(awaitable: Awaitable[Message]) -> Message:
    return await awaitable


async def send_json(send: Send, status: int, body: bytes,
                    headers: list[tuple[bytes, bytes]]) -> None:
    """One JSON response on bare ASGI, as Starlette's Response would send it."""
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})
