"""Every route's JSON body read strictly (app/strict_json.py): a key given twice in any
object of a body is a 400 naming it (`{"field": "scope", "problem": "duplicate key"}`),
never "the last one wins". Every router is made with `route_class=StrictRoute` but
`/v1/rerank`'s, which reads its body itself (the engine refuses a repeated key there)."""
from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute

from app import strict_json


class StrictRequest(Request):
    """A request whose `json()` refuses a repeated key."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                self._json = strict_json.loads(await self.body())
            except strict_json.RepeatedKey as exc:
                # an HTTPException: FastAPI turns any other error here into a bare 400
                raise HTTPException(400, {"field": exc.path, "problem": "duplicate key"}
                                    ) from None
        return self._json


class StrictRoute(APIRoute):
    """An APIRoute whose handler reads the body through StrictRequest."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictRequest(request.scope, request.receive))

        return strict
