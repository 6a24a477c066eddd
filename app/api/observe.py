"""ASGI middleware counting HTTP responses by route template and status class."""
from __future__ import annotations

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
