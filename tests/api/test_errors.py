"""app/api/errors.py: the one table from error class to status, and the one error body."""
from __future__ import annotations

import json

import pytest
import redis

from app.api.errors import BodyTooLarge, BodyTooSlow, body, refusal, status_of
from app.errors import (
    BanlistConflict,
    BanlistError,
    BanlistNotFound,
    BanlistTooLarge,
    BanlistUnavailable,
    Conflict,
    FieldError,
    Malformed,
    NotFound,
    RearrangeError,
    TooLarge,
    Unavailable,
)


@pytest.mark.parametrize(("error", "status"), [
    (FieldError("f", "p"), 422),
    (BanlistError("value", "p"), 422),
    (Malformed("body", "p"), 400),
    (NotFound("id", "p"), 404),
    (BanlistNotFound("id", "p"), 404),
    (Conflict("force", "p"), 409),
    (BanlistConflict("banlist", "p"), 409),
    (TooLarge("entries", "p"), 413),
    (BanlistTooLarge("entries", "p"), 413),
    (BodyTooLarge("p"), 413),
    (BodyTooSlow("p"), 408),
    (Unavailable("redis", "p"), 503),
    (BanlistUnavailable("banlist", "p"), 503),
    (redis.ConnectionError("down"), 503),
    (RearrangeError("not an answer"), 500),
    (ValueError("a bug"), 500),
])
def test_each_error_class_answers_its_status(error, status):
    assert status_of(error) == status


def test_the_body_reader_s_errors_keep_their_status_and_field():
    assert (status_of(BodyTooSlow("late")), BodyTooSlow("late").field) == (408, "body")
    assert status_of(BodyTooLarge("big")) == 413 and isinstance(BodyTooLarge("big"), FieldError)


def test_a_refusal_renders_its_field_problem_and_extra_fields():
    error = BanlistUnavailable("banlist", "not made", {"write_id": "ab", "outcome": "unknown"})
    refused = refusal(error)
    assert (refused.status, json.loads(refused.body)) == (
        503, {"error": "error", "field": "banlist", "problem": "not made", "write_id": "ab",
              "outcome": "unknown"})
    assert json.loads(refusal(NotFound("id", "no entry")).body)["error"] == "invalid_request"


def test_redis_down_renders_as_nothing_changed():
    status, raw, _ = refusal(redis.ConnectionError("refused"))
    doc = json.loads(raw)
    assert status == 503 and doc["field"] == "redis"
    assert doc["problem"] == "Redis is unreachable, nothing was changed: refused"


def test_the_encoded_body_is_compact_utf8_json():
    raw = body(413, "body", "über the limit")
    assert raw == '{"error":"invalid_request","field":"body","problem":"über the limit"}'.encode()
    assert json.loads(raw)["problem"] == "über the limit"
