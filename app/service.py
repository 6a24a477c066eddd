"""The request path: decode, route, assign experiments, run the pipeline, build the response."""
from __future__ import annotations

import time
import uuid
from typing import Any

from app import contract
from app.audit import AuditLog
from app.banlist.base import BanStore
from app.config import ConfigHolder
from app.errors import FieldError
from app.metrics import Metrics
from app.pipeline import APPLIED, Context, Doc, Outcome
from app.settings import Settings

_REMOVING = frozenset({"remove", "trim"})


class Rearranger:
    """Serves /v1/rerank (and `rearrange run`); holds no per-request state of its own."""

    def __init__(self, settings: Settings, store: BanStore, config: ConfigHolder,
                 metrics: Metrics, audit_log: AuditLog | None = None) -> None:
        self.settings = settings
        self.store = store
        self.config = config
        self.metrics = metrics
        self.audit_log = audit_log
        self.draining = False  # set on shutdown so /readyz turns false before the last request

    def rerank(self, body: bytes) -> dict[str, Any]:
        """Handle one request body; FieldError for bad input."""
        started = time.perf_counter()
        req = contract.decode(body)
        engine = self.config.engine  # one reference for the whole request, even across a reload
        if req.profile is not None:
            if req.profile not in engine.profiles:
                raise FieldError("profile", f"unknown profile {req.profile!r} "
                                 f"(known: {', '.join(sorted(engine.profiles))})")
            profile = req.profile
        else:
            profile = engine.route(tuple(req.query.classes))
        docs = contract.to_docs(req, self.settings.max_documents, self.settings.max_text_chars)
        assignments = []
        variants: dict[str, str] = {}
        for exp in engine.experiments:
            got = exp.assign(req.unit)
            if got is not None:
                variants[exp.name] = got[0]
                assignments.append({"experiment": exp.name, "variant": got[0], "bucket": got[1]})
        store = self.store
        q = req.query
        ctx = Context(
            query_text=q.text, classes=tuple(q.classes),
            region=q.region.upper() if q.region else None, age_mode=q.age_mode,
            depth=req.depth, input_count=len(docs), now=time.time(), banlist=store.index,
            variants=variants,
        )
        outcome = engine.profiles[profile].run(docs, ctx)
        response = {
            "request_id": req.request_id or uuid.uuid4().hex,
            "profile": profile,
            "config_version": engine.version,
            "banlist_version": store.version,
            "experiments": assignments,
            "documents": [_doc_out(i, d) for i, d in enumerate(outcome.docs, 1)],
            "removed": _removed(outcome),
            "fallback": outcome.fallback,
            "audit": [r.as_dict() for r in outcome.audit],
        }
        for a in assignments:
            self.metrics.experiment_assignments.labels(a["experiment"], a["variant"]).inc()
        self.metrics.observe(profile, outcome, time.perf_counter() - started)
        if self.audit_log is not None and outcome.audit:
            self.audit_log.emit({
                "ts": ctx.now, "request_id": response["request_id"], "profile": profile,
                "config_version": engine.version, "banlist_version": store.version,
                "experiments": assignments, "query": {"text": q.text, "region": ctx.region},
                "audit": response["audit"],
            })
        return response


def _doc_out(position: int, d: Doc) -> dict[str, Any]:
    return {
        "id": d.id, "url": d.url, "position": position,
        "original_position": d.original_position, "score": d.score,
        "original_score": d.original_score, "annotations": list(d.annotations),
        "collapsed": list(d.collapsed), "attributes": d.attributes,
    }


def _removed(outcome: Outcome) -> list[dict[str, Any]]:
    return [
        {"id": r.doc_id, "rule": r.rule, "phase": r.phase.value, "action": r.action,
         "reason": r.reason}
        for r in outcome.audit if r.action in _REMOVING and r.mode == APPLIED
    ]
