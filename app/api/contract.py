"""The API's bodies: /v1/rerank's request, answer and error bodies as the engine declares
them (crates/engine/src/wire.rs, its JSON Schemas through `_engine.wire_schemas`), and the
admin request bodies as pydantic.

The engine decodes and checks /v1/rerank bodies itself and writes their answers; the
schemas here are the OpenAPI document's for them (app/api/openapi.py), and
tests/api/test_wire_schema.py holds the decoder and the writer to them.
"""
from __future__ import annotations

import functools
import json
from typing import Any

from app import _engine


@functools.cache
def wire_schemas() -> dict[str, Any]:
    """Every schema of the /v1/rerank wire by name (RerankRequest, RerankResponse, ErrorBody,
    RuleFailed and the types they name), referring to each other as
    `#/components/schemas/NAME`: the engine's, read once."""
    schemas: dict[str, Any] = json.loads(_engine.wire_schemas())
    return schemas


# --- admin bodies (pydantic: FastAPI validates and documents them; not a hot path); the
# banlist's own are app/banlist/bodies.py ---

from pydantic import BaseModel, ConfigDict  # noqa: E402
from pydantic import Field as PField  # noqa: E402


class ReseedIn(BaseModel):
    """POST /v1/admin/banlist/reseed: why, and whether to overwrite another history."""

    model_config = ConfigDict(extra="forbid")

    reason: str = PField(min_length=1, max_length=1000)
    force: bool = False


class TryIn(BaseModel):
    """POST /v1/admin/config/try: a candidate config's YAML and one /v1/rerank body to run
    through it, explained, without serving the candidate."""

    model_config = ConfigDict(extra="forbid")

    config: str = PField(min_length=1, max_length=1_000_000)
    request: dict[str, Any]


class RollbackIn(BaseModel):
    """POST /v1/admin/config/rollback: the earlier config version to serve now."""

    model_config = ConfigDict(extra="forbid")

    version: str = PField(min_length=1, max_length=64)
