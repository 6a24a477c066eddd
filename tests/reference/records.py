"""Audit records as the reference runner and its rules write them."""
from __future__ import annotations

import msgspec

from app.phases import Phase

APPLIED, SHADOW = "applied", "shadow"


class AuditRecord(msgspec.Struct, omit_defaults=True):
    """One thing a rule did (or would have done, in shadow) to one document.

    Encoded by msgspec straight into the response as the CONTRACT's object: `delta` and
    `mode` have no default so they are always written; `relax_to` (only on a `fallback`
    that asks the runner to rerun with a milder age mode) is left out when unset.
    """

    rule: str
    phase: Phase
    doc_id: str | None
    action: str
    reason: str
    delta: float | int | None
    mode: str
    relax_to: str | None = None
