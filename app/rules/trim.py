"""Trim rules: depth (top k) and a quota per host."""
from __future__ import annotations

from pydantic import Field

from app.phases import Phase
from app.rules.base import BuiltinRule, Params

TRIM = frozenset({Phase.TRIM})


class DepthParams(Params):
    k: int = Field(10, ge=1)


class Depth(BuiltinRule[DepthParams]):
    """Keeps the top k; the request's `depth` overrides k."""

    name = "depth"
    phases = TRIM
    Params = DepthParams


class HostQuotaParams(Params):
    max_per_host: int = Field(1, ge=1)


class HostQuota(BuiltinRule[HostQuotaParams]):
    """Drops documents past the quota per host."""

    name = "host_quota"
    phases = TRIM
    Params = HostQuotaParams
