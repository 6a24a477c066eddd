"""The HTTP limit for comparison: a bare ASGI app that parses the body with orjson and echoes it.

Served by the same uvicorn settings as Rearrange (`uvicorn bench.bare_app:app --loop uvloop
--http httptools`), it is what any Python service on this machine can do at most with the
same body; bench/http.py reports Rearrange as a ratio to it.
"""
from __future__ import annotations

import orjson


async def app(scope, receive, send):  # noqa: ANN001, ANN201 (raw ASGI signature)
    """Read the whole body, parse it, encode it back."""
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    out = orjson.dumps(orjson.loads(body)) if body else b"{}"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": out})
