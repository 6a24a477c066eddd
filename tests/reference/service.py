"""The reference model of the request path: the Python service as it was before the engine.

Decode, route, assign experiments, run the reference pipeline and build the response dict,
as app/engine/service.py did before issue 14; no metrics. The property tests compare the engine's
bytes with `msgspec.json.encode` of what `rerank` returns, and its audit-log line with
that of what `audit_line` makes of the response.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from app.api.contract import Document, RerankRequest
from app.config.load import Engine
from app.errors import FieldError
from app.experiments.bucketing import Experiment
from tests.reference import contract
from tests.reference.experiments import assign
from tests.reference.pipeline import APPLIED, Context, Doc, Outcome, Pipeline
from tests.reference.rules import behaviour

_REMOVING = frozenset({"remove", "trim"})
FORCE_HEADER = "X-Rearrange-Force-Variant"


class Service:
    """A loaded config with the reference behaviour of each rule, built once: rules that
    keep caches (near_duplicates) keep them from one request to the next."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.profiles = {name: Pipeline.of(pipeline, behaviour)
                         for name, pipeline in engine.profiles.items()}

    def rerank(self, body: bytes, *, banlist: Any = None, quarantine: Any = None,
               banlist_version: int = 0, now: float | None = None,
               deadline: float | None = None, forced: Mapping[str, str] | None = None,
               max_documents: int = 1000, max_text_chars: int = 1_000_000,
               clock: Callable[[], float] = time.perf_counter) -> dict[str, Any]:
        """The response dict for one body; FieldError for bad input, RuleFailed (raised by
        the runner) when a closed rule fails."""
        engine = self.engine
        req = contract.decode(body)
        if req.profile is not None:
            if req.profile not in engine.profiles:
                raise FieldError("profile", f"unknown profile {req.profile!r} "
                                 f"(known: {', '.join(sorted(engine.profiles))})")
            profile = req.profile
        else:
            profile = engine.route(tuple(req.query.classes))
        docs = contract.to_docs(req, max_documents, max_text_chars)
        docs = _with_given(docs, req, body)
        if forced:
            _check_forced(engine.experiments, forced)
        assigned = assign(engine.experiments, engine.holdout, req.unit, forced)
        q = req.query
        ctx = Context(
            query_text=q.text, classes=tuple(q.classes),
            region=q.region.upper() if q.region else None, age_mode=q.age_mode,
            depth=req.depth, input_count=len(docs), now=time.time() if now is None else now,
            banlist=banlist, variants=assigned.variants, quarantine=quarantine,
            deadline=deadline, clock=clock, query=q,
        )
        outcome = self.profiles[profile].run(docs, ctx)
        response = {
            "request_id": req.request_id or uuid.uuid4().hex,
            "profile": profile,
            "config_version": engine.version,
            "banlist_version": banlist_version,
            "experiments": assigned.exposures,
            "documents": [_doc_out(i, d) for i, d in enumerate(outcome.docs, 1)],
            "removed": _removed(outcome),
            "fallback": outcome.fallback,
            "audit": outcome.audit,
        }
        if outcome.skipped:
            response["skipped"] = outcome.skipped
        return response

    def caches(self) -> list[tuple[str, str, Any]]:
        """(profile, signature | shingle, cache) of every near_duplicates cache that is on,
        variants' rules included, in the order Engine.cache_stats lists them."""
        return [(name, kind, cache) for name in sorted(self.profiles)
                for _, step in self.profiles[name].rules()
                for rule in (step.rule, *step.variants.values())
                for kind, attribute in (("signature", "cache"), ("shingle", "exact_cache"))
                if (cache := getattr(rule, attribute, None)) is not None]


def audit_line(body: bytes, response: dict[str, Any], now: float,
               forced_by: str | None = None) -> dict[str, Any] | None:
    """The audit-log line of a 200 `response` to `body` (None: nothing to log, no record,
    exposure or skipped rule): the response's head, the query, and its audit records each
    with the document's `url` (as the request gave it) and canonical `host` (None for a URL
    no browser could open; both None on a record naming no document)."""
    if not (response["audit"] or response["experiments"] or response.get("skipped")):
        return None
    req = contract.decode(body)
    docs = {d.id: d for d in contract.to_docs(req, len(req.documents), 1 << 62)}
    records = []
    for r in response["audit"]:
        record = msgspec.to_builtins(r)
        doc = docs.get(r.doc_id) if r.doc_id is not None else None
        where = {"url": doc.url if doc else None, "host": (doc.host or None) if doc else None}
        at = list(record).index("doc_id") + 1
        items = list(record.items())
        records.append(dict(items[:at] + list(where.items()) + items[at:]))
    line = {key: response[key] for key in ("request_id", "profile", "config_version",
                                           "banlist_version", "experiments")}
    q = req.query
    line = {"ts": now, **line, "query": {"text": q.text,
                                         "region": q.region.upper() if q.region else None},
            "audit": records}
    if response.get("skipped"):
        line["skipped"] = response["skipped"]
    if forced_by is not None:
        line["forced_by"] = forced_by
    return line


def rerank(engine: Engine, body: bytes, **request: Any) -> dict[str, Any]:
    """One request on a Service of its own (`Service.rerank` for the arguments)."""
    return Service(engine).rerank(body, **request)


_OPTIONAL = tuple(f for f in Document.__struct_fields__
                  if f not in ("id", "url", "score"))


def _with_given(docs: list[Doc], req: RerankRequest, body: bytes) -> list[Doc]:
    """Each Doc with the optional fields its request document gave (CONTRACT "Python
    rules": a Python rule is handed exactly those); the typed decode cannot tell a field
    sent with its default from one left out, so the keys come from an untyped decode."""
    sent = msgspec.json.decode(body)["documents"]
    return [d.replace(given={f: getattr(src, f) for f in _OPTIONAL if f in raw})
            for d, src, raw in zip(docs, req.documents, sent, strict=True)]


def _check_forced(experiments: tuple[Experiment, ...], forced: Mapping[str, str]) -> None:
    by_name = {e.name: e for e in experiments}
    layers: dict[str, str] = {}
    for name, variant in forced.items():
        exp = by_name.get(name)
        if exp is None:
            raise FieldError(FORCE_HEADER, f"unknown experiment {name!r} "
                             f"(running: {', '.join(by_name) or 'none'})")
        known = [v for v, _ in exp.variants]
        if variant not in known:
            raise FieldError(FORCE_HEADER, f"experiment {name} has no variant {variant!r} "
                             f"(variants: {', '.join(known)})")
        if exp.layer is not None:
            if exp.layer in layers:
                raise FieldError(FORCE_HEADER, f"{layers[exp.layer]} and {name} share layer "
                                 f"{exp.layer}: a request is in one experiment per layer")
            layers[exp.layer] = name


def _doc_out(position: int, d: Doc) -> dict[str, Any]:
    return {
        "id": d.id, "url": d.url, "position": position,
        "original_position": d.original_position, "score": d.score,
        "original_score": d.original_score, "annotations": list(d.annotations),
        "collapsed": list(d.collapsed), "attributes": d.attributes,
    }


def _removed(outcome: Outcome) -> list[dict[str, Any]]:
    return [
        {"id": r.doc_id, "rule": r.rule, "phase": r.phase, "action": r.action,
         "reason": r.reason}
        for r in outcome.audit if r.action in _REMOVING and r.mode == APPLIED
    ]
