"""`POST /v1/feedback`: what a user clicked on an interleaved page, credited to its teams.

Open like `/v1/rerank` (the frontend sends it), on both ports: the control port's route
below and the data port's listener (crates/engine/src/serve/) call the same `answer`, so
both say the same bytes. The body is checked here, field by field, in the API's error
shape; the page and the tallies are the impression store's (app/experiments/feedback.py).
"""
from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from app import strict_json
from app.api import errors
from app.api.deps import Wired
from app.api.openapi import refusals
from app.api.services import Services
from app.api.strict import StrictRoute
from app.errors import FieldError, Malformed

router = APIRouter(tags=["experiments"], route_class=StrictRoute)
ROUTE = "/v1/feedback"
MAX_IDS = 1000  # clicks or skips in one feedback (a page holds no more documents)
MAX_REQUEST_ID = 200  # characters
_KEYS = ("request_id", "clicks", "skips")


class FeedbackBody(BaseModel):
    """What the user did on one interleaved page (the OpenAPI document's; `answer` reads it)."""

    model_config = ConfigDict(extra="forbid")
    request_id: str = Field(min_length=1, max_length=MAX_REQUEST_ID,
                            description="the request_id of the /v1/rerank answer")
    clicks: list[str] = Field(max_length=MAX_IDS,
                              description="ids of the documents clicked (a set: once each)")
    skips: list[str] = Field(default_factory=list, max_length=MAX_IDS,
                             description="ids of documents seen and not clicked; checked, "
                                         "not counted")


class FeedbackTaken(BaseModel):
    """A feedback taken: the page's outcome now, and the one it replaced."""

    request_id: str
    experiment: str
    outcome: str | None = Field(description="control, treatment, tie, or null (no clicks)")
    replaced: str | None = Field(description="the outcome of an earlier feedback for the "
                                             "page, which this one replaces (null: none)")


def _ids(doc: dict[str, Any], key: str, required: bool) -> list[str]:
    raw = doc.get(key)
    if raw is None:
        if required or key in doc:
            raise FieldError(key, "required: a list of document ids" if required
                             else "a list of document ids (or leave it out)")
        return []
    if not isinstance(raw, list):
        raise FieldError(key, "a list of document ids")
    if len(raw) > MAX_IDS:
        raise FieldError(key, f"at most {MAX_IDS} items (got {len(raw)})")
    for i, item in enumerate(raw):
        if not isinstance(item, str):
            raise FieldError(f"{key}[{i}]", "a string (a document id)")
        _unicode(f"{key}[{i}]", item)
    return raw


def parse(body: bytes) -> tuple[str, list[str], list[str]]:
    """(request_id, clicks, skips) of a feedback body; Malformed or FieldError naming the
    field."""
    try:
        doc = strict_json.loads(body)
    except strict_json.RepeatedKey as exc:
        raise Malformed(exc.path, "duplicate key") from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, an int past 4,300 digits
        raise Malformed("body", f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise FieldError("body", "a JSON object: {\"request_id\", \"clicks\", \"skips\"?}")
    for key in doc:
        if key not in _KEYS:
            raise FieldError(key, f"unknown field (known: {', '.join(_KEYS)})")
    request_id = doc.get("request_id")
    if not isinstance(request_id, str) or not request_id:
        raise FieldError("request_id", "required: the request_id of the page's /v1/rerank "
                         "answer, a non-empty string")
    if len(request_id) > MAX_REQUEST_ID:
        raise FieldError("request_id", f"at most {MAX_REQUEST_ID} characters")
    _unicode("request_id", request_id)
    return request_id, _ids(doc, "clicks", True), _ids(doc, "skips", False)


def _unicode(field: str, text: str) -> None:
    """FieldError unless `text` is valid Unicode: JSON's \\ud800 escapes decode to lone
    surrogates, which no page's id is and no Redis key can be encoded from."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise FieldError(field, "valid Unicode (a lone surrogate escape such as \\ud800 "
                         "is not)") from None


def answer(services: Services, body: bytes) -> tuple[int, bytes]:
    """The status and body of `POST /v1/feedback` with `body`, on either port (it may wait
    on Redis: run it off the event loop)."""
    try:
        request_id, clicks, skips = parse(body)
        taken = services.impressions.feedback(request_id, clicks, skips)
    except errors.MAPPED as exc:
        refused = errors.refusal(exc)
        return refused.status, refused.body
    doc = {"request_id": taken.request_id, "experiment": taken.experiment,
           "outcome": taken.outcome, "replaced": taken.replaced}
    return 202, json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


@router.post(ROUTE, status_code=202, response_model=FeedbackTaken, responses=refusals({
    400: "the body is not JSON, or one of its objects gives a key twice",
    404: "no interleaved page is kept under that request_id (none served, or its window "
         "ended)",
    422: "a field is missing or wrong (`field` names it), or a document id was not on the "
         "page",
    503: "Redis is unreachable: nothing was counted"}),
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
        "schema": FeedbackBody.model_json_schema()}}}})
async def feedback(request: Request, services: Wired) -> Response:
    """Credit the clicks on an interleaved page to its teams: the page's outcome (a later
    feedback for the same page replaces an earlier one, fleet-wide)."""
    status, content = await run_in_threadpool(answer, services, await request.body())
    return Response(content, status, media_type="application/json")
